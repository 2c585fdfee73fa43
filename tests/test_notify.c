/* test_notify: the sd_notify protocol as systemd receives it — datagrams on a path socket and on an abstract one,
 * the watchdog's rate limit and its WATCHDOG_PID check, a receiver that does not read, malformed NOTIFY_SOCKET
 * values, the environment removed for children, and the no-op without NOTIFY_SOCKET. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "errors.h"
#include "notify.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* A datagram socket bound to `name` (a path, or '@' + an abstract name), as systemd's notify socket. */
static int bind_notify(const char *name)
{
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    size_t len = strlen(name);
    memcpy(a.sun_path, name, len);
    if (name[0] == '@')
        a.sun_path[0] = '\0';
    socklen_t alen = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len + (name[0] == '/'));
    assert_int_equal(bind(fd, (struct sockaddr *)&a, alen), 0);
    return fd;
}

/* The next datagram within 1 s ("" when none). */
static const char *recv_msg(int fd, char *buf, size_t n)
{
    struct pollfd p = {fd, POLLIN, 0};
    buf[0] = '\0';
    if (poll(&p, 1, 1000) == 1) {
        ssize_t r = recv(fd, buf, n - 1, 0);
        buf[r > 0 ? r : 0] = '\0';
    }
    return buf;
}

static int pending(int fd)
{
    struct pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, 50) == 1;
}

static void test_path_socket(void **state)
{
    (void)state;
    char path[64], buf[256];
    snprintf(path, sizeof path, "/tmp/mk-notify-%d.sock", (int)getpid());
    unlink(path);
    int fd = bind_notify(path);
    setenv("NOTIFY_SOCKET", path, 1);
    unsetenv("WATCHDOG_USEC");
    mk_notify_t *n;
    assert_int_equal(mk_notify_open(1, &n), 0);
    assert_null(getenv("NOTIFY_SOCKET")); /* not inherited by children */
    assert_true(mk_notify_enabled(n));
    assert_int_equal(mk_notify_watchdog_usec(n), 0);
    assert_int_equal(mk_notify_send(n, "READY=1\nSTATUS=running"), 0);
    assert_string_equal(recv_msg(fd, buf, sizeof buf), "READY=1\nSTATUS=running");
    assert_int_equal(mk_notify_sendf(n, "STATUS=%.1f fps, %d reader", 29.97, 1), 0);
    assert_string_equal(recv_msg(fd, buf, sizeof buf), "STATUS=30.0 fps, 1 reader");
    assert_int_equal(mk_notify_watchdog(n), 0); /* no watchdog asked for */
    assert_false(pending(fd));
    mk_notify_close(n);
    close(fd);
    unlink(path);
}

static void test_abstract_and_watchdog(void **state)
{
    (void)state;
    char name[64], buf[256], pid[32];
    snprintf(name, sizeof name, "@mk-notify-test-%d", (int)getpid());
    int fd = bind_notify(name);
    setenv("NOTIFY_SOCKET", name, 1);
    setenv("WATCHDOG_USEC", "300000", 1);
    snprintf(pid, sizeof pid, "%d", (int)getpid());
    setenv("WATCHDOG_PID", pid, 1);
    mk_notify_t *n;
    assert_int_equal(mk_notify_open(0, &n), 0);
    assert_non_null(getenv("NOTIFY_SOCKET")); /* kept when asked to */
    assert_int_equal(mk_notify_watchdog_usec(n), 300000);
    /* The first ping goes out at once; more within a third of the period do not. */
    assert_int_equal(mk_notify_watchdog(n), 1);
    assert_string_equal(recv_msg(fd, buf, sizeof buf), "WATCHDOG=1");
    for (int i = 0; i < 10; i++)
        assert_int_equal(mk_notify_watchdog(n), 0);
    assert_false(pending(fd));
    nanosleep(&(struct timespec){0, 120000000}, NULL);
    assert_int_equal(mk_notify_watchdog(n), 1);
    assert_string_equal(recv_msg(fd, buf, sizeof buf), "WATCHDOG=1");
    assert_int_equal(mk_notify_send(n, "STOPPING=1"), 0);
    assert_string_equal(recv_msg(fd, buf, sizeof buf), "STOPPING=1");
    mk_notify_close(n);

    /* A watchdog meant for another process is not ours. */
    setenv("WATCHDOG_PID", "1", 1);
    assert_int_equal(mk_notify_open(1, &n), 0);
    assert_int_equal(mk_notify_watchdog_usec(n), 0);
    assert_int_equal(mk_notify_watchdog(n), 0);
    assert_null(getenv("WATCHDOG_USEC"));
    assert_null(getenv("WATCHDOG_PID"));
    mk_notify_close(n);
    close(fd);
}

/* A receiver that does not read (its queue fills up): the watchdog ping and STATUS= through the no-wait form are
 * dropped at once, never blocking the caller (alarm: a send that waited would hang here), and a waiting send gives
 * up after MK_NOTIFY_WAIT_MS; a dropped ping is due again at the next call, and goes out once the receiver has
 * read. */
static void test_full_queue(void **state)
{
    (void)state;
    char name[64], buf[256];
    snprintf(name, sizeof name, "@mk-notify-full-%d", (int)getpid());
    int fd = bind_notify(name);
    setenv("NOTIFY_SOCKET", name, 1);
    setenv("WATCHDOG_USEC", "3", 1); /* a ping is due every microsecond */
    unsetenv("WATCHDOG_PID");
    mk_notify_t *n;
    assert_int_equal(mk_notify_open(1, &n), 0);
    alarm(10);
    int sent = 0, dropped = 0;
    for (int i = 0; i < 100000 && dropped < 50; i++) {
        nanosleep(&(struct timespec){0, 2000}, NULL);
        int rc = mk_notify_watchdog(n);
        assert_true(rc == 0 || rc == 1);
        sent += rc;
        dropped += sent > 0 && rc == 0;
    }
    assert_true(sent >= 1);
    assert_int_equal(dropped, 50);
    for (int i = 0; i < 20; i++)
        assert_int_equal(mk_notify_sendf_nowait(n, "STATUS=%d", i), 1); /* dropped: the queue is full */
    /* a waiting send (READY=1, STOPPING=1) gives up after MK_NOTIFY_WAIT_MS with a message, so that a receiver
     * that never reads cannot hold up maskd's shutdown */
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    assert_int_equal(mk_notify_send(n, "STOPPING=1"), MK_EIO);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (ms < MK_NOTIFY_WAIT_MS * 0.9 || ms > MK_NOTIFY_WAIT_MS * 3.0)
        fail_msg("the waiting send gave up after %.0f ms, not ~%d", ms, MK_NOTIFY_WAIT_MS);
    assert_non_null(strstr(mk_err_msg(), "queue stayed full"));
    alarm(0);
    for (int i = 0; i < sent; i++)
        assert_string_equal(recv_msg(fd, buf, sizeof buf), "WATCHDOG=1");
    assert_false(pending(fd));
    assert_int_equal(mk_notify_watchdog(n), 1); /* room again: the dropped ping goes out */
    assert_string_equal(recv_msg(fd, buf, sizeof buf), "WATCHDOG=1");
    mk_notify_close(n);
    close(fd);
}

static void test_disabled_and_malformed(void **state)
{
    (void)state;
    unsetenv("NOTIFY_SOCKET");
    setenv("WATCHDOG_USEC", "1000000", 1);
    mk_notify_t *n;
    assert_int_equal(mk_notify_open(1, &n), 0);
    assert_false(mk_notify_enabled(n));
    assert_int_equal(mk_notify_watchdog_usec(n), 0);
    assert_int_equal(mk_notify_send(n, "READY=1"), 0);
    assert_int_equal(mk_notify_watchdog(n), 0);
    mk_notify_close(n);
    assert_int_equal(mk_notify_send(NULL, "READY=1"), 0);
    const char *bad[] = {"relative/path", "@", "/"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        setenv("NOTIFY_SOCKET", bad[i], 1);
        assert_int_equal(mk_notify_open(1, &n), MK_EINVAL);
        assert_non_null(strstr(mk_err_msg(), "NOTIFY_SOCKET"));
        assert_false(mk_notify_enabled(n));
        mk_notify_close(n);
    }
    /* A socket nobody listens on: sending fails with a message, nothing crashes. */
    setenv("NOTIFY_SOCKET", "/tmp/mk-notify-nobody-listens.sock", 1);
    assert_int_equal(mk_notify_open(1, &n), 0);
    assert_int_equal(mk_notify_send(n, "READY=1"), MK_EIO);
    assert_non_null(strstr(mk_err_msg(), "sd_notify"));
    mk_notify_close(n);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_path_socket),
        cmocka_unit_test(test_abstract_and_watchdog),
        cmocka_unit_test(test_full_queue),
        cmocka_unit_test(test_disabled_and_malformed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
