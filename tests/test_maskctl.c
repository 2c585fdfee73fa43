/* test_maskctl: the maskctl program (spawned as a process, $MASKCTL) against an in-process control server with a
 * fake daemon: readable and --json output, set with typed values, errors and exit codes, subscribe, the socket
 * lookup by instance. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ctlproto.h"
#include "errors.h"
#include "fakedaemon.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    int rc;
    char out[1 << 17], err[1 << 14];
} run_t;

/* Runs $MASKCTL with argv (NULL-terminated, without argv[0]); env: "K=V" to set, "K" to unset, NULL-terminated
 * (may be NULL). Fails the test if it runs longer than 10 s. */
static void run_maskctl(run_t *r, const char *const *env, const char *const *argv)
{
    const char *exe = getenv("MASKCTL");
    if (!exe)
        fail_msg("$MASKCTL is not set (run through meson test)");
    int out[2], err[2];
    assert_int_equal(pipe(out), 0);
    assert_int_equal(pipe(err), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(out[1], STDOUT_FILENO);
        dup2(err[1], STDERR_FILENO);
        close(out[0]);
        close(err[0]);
        for (int i = 0; env && env[i]; i++) {
            char kv[512];
            snprintf(kv, sizeof kv, "%s", env[i]);
            char *eq = strchr(kv, '=');
            if (eq) {
                *eq = '\0';
                setenv(kv, eq + 1, 1);
            } else {
                unsetenv(kv);
            }
        }
        const char *args[32] = {"maskctl"};
        for (int i = 0; argv[i] && i < 30; i++)
            args[i + 1] = argv[i];
        execv(exe, (char *const *)args);
        _exit(127);
    }
    close(out[1]);
    close(err[1]);
    size_t no = 0, ne = 0;
    struct pollfd p[2] = {{.fd = out[0], .events = POLLIN}, {.fd = err[0], .events = POLLIN}};
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int open_fds = 2;
    while (open_fds) {
        clock_gettime(CLOCK_MONOTONIC, &t);
        if (t.tv_sec - t0.tv_sec > 10) {
            kill(pid, SIGKILL);
            fail_msg("maskctl %s ran over 10 s", argv[0] ? argv[0] : "");
        }
        if (poll(p, 2, 200) <= 0)
            continue;
        for (int k = 0; k < 2; k++) {
            if (!(p[k].revents & (POLLIN | POLLHUP)))
                continue;
            char *buf = k ? r->err : r->out;
            size_t *n = k ? &ne : &no, cap = k ? sizeof r->err : sizeof r->out;
            ssize_t got = read(p[k].fd, buf + *n, cap - 1 - *n);
            if (got <= 0) {
                p[k].fd = -1;
                open_fds--;
            } else {
                *n += (size_t)got;
            }
        }
    }
    r->out[no] = '\0';
    r->err[ne] = '\0';
    close(out[0]);
    close(err[0]);
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    r->rc = WEXITSTATUS(status);
}

static int count_lines(const char *s)
{
    int n = 0;
    for (; *s; s++)
        n += *s == '\n';
    return n;
}

#define RUN(r, ...)                                                                                            \
    do {                                                                                                       \
        const char *const argv_[] = {__VA_ARGS__, NULL};                                                       \
        run_maskctl((r), NULL, argv_);                                                                         \
    } while (0)

static run_t R;

static void test_commands(void **state)
{
    (void)state;
    fd_daemon_t d;
    fd_start(&d, NULL, NULL);
    run_t *r = &R;

    RUN(r, "--socket", d.path, "version");
    assert_int_equal(r->rc, 0);
    assert_string_equal(r->out, "maskd test-1.0, control protocol 1 (maskctl " MASKD_VERSION ")\n");

    RUN(r, "--socket", d.path, "get", "grabcut.iterations");
    assert_int_equal(r->rc, 0);
    assert_string_equal(r->out, "grabcut.iterations = 5\n");
    RUN(r, "--socket", d.path, "get", "grabcut", "bus.mode");
    assert_int_equal(count_lines(r->out), 9);
    assert_non_null(strstr(r->out, "bus.mode = 0640\n"));
    RUN(r, "--socket", d.path, "get");
    assert_int_equal(count_lines(r->out), mk_options_count());

    /* set: values typed through the option table (detect.classes=0 is a string, grabcut.iterations=7 a number). */
    RUN(r, "--socket", d.path, "set", "grabcut.iterations=7", "mask.threshold=otsu", "detect.classes=0,2",
        "select.fallback=10,20,300,400");
    assert_int_equal(r->rc, 0);
    assert_non_null(strstr(r->out, "grabcut.iterations = 7\n"));
    assert_non_null(strstr(r->out, "mask.threshold = otsu\n"));
    mk_config_t cfg = fd_config(&d);
    assert_int_equal(cfg.grabcut.iterations, 7);
    assert_int_equal(cfg.mask.threshold, MK_CFG_THRESH_OTSU);
    assert_string_equal(cfg.detect.classes, "0,2");
    assert_int_equal(cfg.select.fallback.w, 300);
    RUN(r, "--socket", d.path, "set", "detect.classes=0");
    assert_int_equal(r->rc, 0);
    RUN(r, "--socket", d.path, "set", "grabcut.iterations=7");
    assert_string_equal(r->out, "grabcut.iterations = 7\n(no value changed)\n");

    /* Refused sets: exit 1, every error on stderr, nothing applied. */
    RUN(r, "--socket", d.path, "set", "grabcut.iterations=x");
    assert_int_equal(r->rc, 1);
    assert_string_equal(r->err, "maskctl: bad-value: grabcut.iterations: expected integer 1..20, got \"x\"\n");
    RUN(r, "--socket", d.path, "set", "grabcut.iterations=3", "guided.radius=0", "mask.treshold=otsu");
    assert_int_equal(r->rc, 1);
    assert_int_equal(count_lines(r->err), 2);
    assert_non_null(strstr(r->err, "maskctl: bad-value: guided.radius: expected integer 1..128, got 0\n"));
    assert_non_null(strstr(r->err, "maskctl: unknown-key: mask.treshold: unknown key (did you mean mask.threshold?)\n"));
    assert_int_equal(fd_config(&d).grabcut.iterations, 7);
    RUN(r, "--socket", d.path, "set", "source.size=1280x720");
    assert_int_equal(r->rc, 1);
    assert_non_null(strstr(r->err, "maskctl: restart-required: source.size: takes effect only at a restart"));
    RUN(r, "--socket", d.path, "get", "nope");
    assert_int_equal(r->rc, 1);
    assert_non_null(strstr(r->err, "unknown-key"));

    RUN(r, "--socket", d.path, "list", "grabcut.iterations");
    assert_int_equal(r->rc, 0);
    const char *want = "grabcut.iterations = 7  (int: integer 1..20; default 5; live)\n    GrabCut iterations";
    assert_true(strncmp(r->out, want, strlen(want)) == 0);
    RUN(r, "--socket", d.path, "list");
    assert_int_equal(count_lines(r->out), 2 * mk_options_count());

    /* --json: the daemon's reply as it is. */
    RUN(r, "--json", "--socket", d.path, "list");
    cJSON *j = cJSON_Parse(r->out);
    assert_non_null(j);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(j, "result")), mk_options_count());
    cJSON_Delete(j);
    RUN(r, "--json", "--socket", d.path, "set", "grabcut.iterations=40");
    assert_int_equal(r->rc, 1);
    j = cJSON_Parse(r->out);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "class")->valuestring, "bad-value");
    cJSON_Delete(j);

    RUN(r, "--socket", d.path, "stats");
    assert_int_equal(r->rc, 0);
    assert_non_null(strstr(r->out, "state = running\n"));
    assert_non_null(strstr(r->out, "stages.capture.fps = 30.5\n"));
    RUN(r, "--socket", d.path, "reload");
    assert_int_equal(r->rc, 0);
    assert_string_equal(r->out, "reloaded = true\n");
    pthread_mutex_lock(&d.lock);
    d.reload_fail = 1;
    pthread_mutex_unlock(&d.lock);
    RUN(r, "--socket", d.path, "reload");
    assert_int_equal(r->rc, 1);
    assert_non_null(strstr(r->err, "maskctl: bad-value: reload failed: /etc/maskd/maskd.json: grabcut.iterations"));
    RUN(r, "--socket", d.path, "help");
    assert_int_equal(count_lines(r->out), 9);
    fd_stop(&d);
}

typedef struct {
    fd_daemon_t *d;
    atomic_int stop;
} publisher_t;

static void *publish_main(void *arg)
{
    publisher_t *p = arg;
    for (int i = 0; !atomic_load(&p->stop); i++) {
        cJSON *data = cJSON_CreateObject();
        cJSON_AddNumberToObject(data, "n", i);
        cJSON_AddNumberToObject(cJSON_AddObjectToObject(data, "fps"), "capture", 30);
        mk_control_publish(p->d->srv, i % 2 ? "stats" : "detections", data);
        cJSON_Delete(data);
        usleep(5000);
    }
    return NULL;
}

static void test_subscribe(void **state)
{
    (void)state;
    fd_daemon_t d;
    fd_start(&d, NULL, NULL);
    publisher_t p = {&d, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, publish_main, &p), 0);
    run_t *r = &R;
    RUN(r, "--socket", d.path, "--count", "3", "subscribe", "stats");
    assert_int_equal(r->rc, 0);
    assert_int_equal(count_lines(r->out), 4);
    assert_true(strncmp(r->out, "subscribed to: stats\n", strlen("subscribed to: stats\n")) == 0);
    const char *line = r->out;
    for (int i = 0; i < 3; i++) {
        line = strchr(line, '\n') + 1;
        assert_true(strncmp(line, "stats n=", 8) == 0);
        int n = atoi(line + 8);
        assert_true(n % 2 == 1); /* only the stats events */
        assert_non_null(strstr(line, " fps.capture=30\n"));
    }
    RUN(r, "--json", "--socket", d.path, "--count", "4", "subscribe");
    assert_int_equal(r->rc, 0);
    assert_int_equal(count_lines(r->out), 4);
    int kinds = 0;
    for (char *s = strtok(r->out, "\n"); s; s = strtok(NULL, "\n")) {
        cJSON *j = cJSON_Parse(s);
        assert_non_null(j);
        const char *ev = cJSON_GetObjectItem(j, "event")->valuestring;
        kinds |= !strcmp(ev, "stats") ? 1 : !strcmp(ev, "detections") ? 2 : 4;
        cJSON_Delete(j);
    }
    assert_int_equal(kinds, 3);
    RUN(r, "--socket", d.path, "subscribe", "frames");
    assert_int_equal(r->rc, 1);
    assert_non_null(strstr(r->err, "bad-args: unknown event \"frames\""));
    atomic_store(&p.stop, 1);
    pthread_join(th, NULL);
    fd_stop(&d);
}

static void *stop_later(void *arg)
{
    struct timespec w = {0, 300 * 1000000};
    nanosleep(&w, NULL);
    fd_stop(arg);
    return NULL;
}

static void test_errors_and_lookup(void **state)
{
    (void)state;
    run_t *r = &R;
    /* Usage errors: exit 2, before any connection. */
    static const char *const usage_cases[][5] = {
        {NULL},
        {"frobnicate", NULL},
        {"set", NULL},
        {"set", "grabcut.iterations", NULL},
        {"version", "extra", NULL},
        {"--timeout", "soon", "version", NULL},
        {"--count", "0", "subscribe", NULL},
        {"--socket", "/x", "--instance", "y", NULL},
    };
    for (size_t i = 0; i < sizeof usage_cases / sizeof usage_cases[0]; i++) {
        run_maskctl(r, NULL, usage_cases[i]);
        if (r->rc != 2)
            fail_msg("usage case %zu: exit %d (%s)", i, r->rc, r->err);
        assert_true(strlen(r->err) > 0);
    }
    RUN(r, "--help");
    assert_int_equal(r->rc, 0);
    assert_non_null(strstr(r->out, "Exit codes:"));
    /* No daemon: exit 3. */
    RUN(r, "--socket", "/nonexistent/control.sock", "version");
    assert_int_equal(r->rc, 3);
    assert_non_null(strstr(r->err, "maskctl: cannot connect: connecting to /nonexistent/control.sock"));

    /* --instance: $XDG_RUNTIME_DIR/maskd/NAME/control.sock when no /run/maskd/NAME/control.sock exists. */
    char xdg[] = "/tmp/mk-xdg-XXXXXX", dir[128], path[160], env_xdg[200];
    assert_non_null(mkdtemp(xdg));
    snprintf(dir, sizeof dir, "%s/maskd", xdg);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(dir, sizeof dir, "%s/maskd/ctltest", xdg);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/control.sock", dir);
    fd_daemon_t d;
    mk_control_opts_t o;
    mk_control_opts_from_config(&o, NULL);
    o.max_clients = 1;
    fd_start(&d, &o, path);
    snprintf(env_xdg, sizeof env_xdg, "XDG_RUNTIME_DIR=%s", xdg);
    const char *const env[] = {env_xdg, "RUNTIME_DIRECTORY", NULL};
    const char *const argv_version[] = {"--instance", "ctltest", "version", NULL};
    run_maskctl(r, env, argv_version);
    assert_int_equal(r->rc, 0);
    assert_non_null(strstr(r->out, "maskd test-1.0"));
    const char *const argv_other[] = {"--instance", "othertest", "version", NULL};
    run_maskctl(r, env, argv_other);
    assert_int_equal(r->rc, 3);
    assert_non_null(strstr(r->err, "no control socket of instance 'othertest'"));
    const char *const argv_bad[] = {"--instance", "../etc", "version", NULL};
    run_maskctl(r, env, argv_bad);
    assert_int_equal(r->rc, 3);
    assert_non_null(strstr(r->err, "bad instance name"));
    /* The daemon refuses (its one client slot is taken): exit 1 with its reason. */
    int hold = mk_ctl_connect(path);
    assert_true(hold >= 0);
    struct timespec ts = {0, 50 * 1000000};
    nanosleep(&ts, NULL);
    RUN(r, "--socket", path, "version");
    assert_int_equal(r->rc, 1);
    assert_non_null(strstr(r->err, "maskctl: busy: too many clients (control.max_clients = 1)"));
    close(hold);
    fd_stop(&d);
    rmdir(dir);
    snprintf(dir, sizeof dir, "%s/maskd", xdg);
    rmdir(dir);
    rmdir(xdg);
    /* The daemon goes away while maskctl waits for events: exit 3. */
    fd_start(&d, NULL, NULL);
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, stop_later, &d), 0);
    RUN(r, "--socket", d.path, "subscribe");
    pthread_join(th, NULL);
    assert_int_equal(r->rc, 3);
    assert_non_null(strstr(r->err, "maskd closed the connection"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_commands),
        cmocka_unit_test(test_subscribe),
        cmocka_unit_test(test_errors_and_lookup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
