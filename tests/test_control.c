/* test_control: the control server against a fake daemon — greeting, id echo, get/set/list, atomic sets with
 * every bad key named, restart-only keys, sets applied at frame boundaries (ordering, timeout), malformed and
 * oversize requests while the server keeps serving, 64 concurrent clients and a refused 65th, a subscriber that
 * never reads (dropped; the publisher never blocks), events, stats, reload, the socket file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ctlproto.h"
#include "errors.h"
#include "fakedaemon.h"
#include "testutil.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

/* ---- a test client ----------------------------------------------------------------------------------------- */

typedef struct {
    int fd;
    mk_ctl_linebuf_t lb;
} cli_t;

static cJSON *cli_read(cli_t *c)
{
    char *line;
    size_t len;
    int r;
    while ((r = mk_ctl_read_line(c->fd, &c->lb, 5000, &line, &len)) == MK_CTL_NEED_MORE)
        ;
    if (r != MK_CTL_LINE)
        fail_msg("reading a reply: %s", mk_err_msg());
    cJSON *j = cJSON_Parse(line);
    if (!j)
        fail_msg("not JSON: %s", line);
    return j;
}

/* Connects and checks the greeting; returns it when `greeting` is non-NULL. */
static void cli_open(cli_t *c, const char *path, cJSON **greeting)
{
    c->fd = mk_ctl_connect(path);
    if (c->fd < 0)
        fail_msg("%s", mk_err_msg());
    assert_int_equal(mk_ctl_linebuf_init(&c->lb, 1 << 22), 0);
    cJSON *g = cli_read(c);
    cJSON *m = cJSON_GetObjectItem(g, "maskd");
    if (!m)
        fail_msg("no greeting: %s", cJSON_PrintUnformatted(g));
    assert_int_equal(cJSON_GetObjectItem(m, "protocol")->valueint, MK_CTL_PROTOCOL);
    if (greeting)
        *greeting = g;
    else
        cJSON_Delete(g);
}

static void cli_close(cli_t *c)
{
    close(c->fd);
    mk_ctl_linebuf_free(&c->lb);
}

static void cli_send(cli_t *c, const char *text)
{
    assert_int_equal(mk_ctl_write_all(c->fd, text, strlen(text)), 0);
}

/* Sends a request line and returns the next message that is not an event. */
static cJSON *cli_call(cli_t *c, const char *request)
{
    cli_send(c, request);
    cli_send(c, "\n");
    for (;;) {
        cJSON *j = cli_read(c);
        if (!cJSON_GetObjectItem(j, "event"))
            return j;
        cJSON_Delete(j);
    }
}

/* The result of an ok reply with id `id` (-1: null). */
static cJSON *ok_result(cJSON *reply, int id)
{
    if (!cJSON_IsTrue(cJSON_GetObjectItem(reply, "ok")))
        fail_msg("expected ok: %s", cJSON_PrintUnformatted(reply));
    cJSON *rid = cJSON_GetObjectItem(reply, "id");
    if (id < 0)
        assert_true(cJSON_IsNull(rid));
    else
        assert_int_equal(rid->valueint, id);
    return cJSON_GetObjectItem(reply, "result");
}

/* The error object of an error reply of class cls. */
static cJSON *err_of(cJSON *reply, const char *cls)
{
    cJSON *e = cJSON_GetObjectItem(reply, "error");
    if (cJSON_IsTrue(cJSON_GetObjectItem(reply, "ok")) || !e)
        fail_msg("expected an error %s: %s", cls, cJSON_PrintUnformatted(reply));
    assert_string_equal(cJSON_GetObjectItem(e, "class")->valuestring, cls);
    return e;
}

static const char *desc_of(cJSON *e)
{
    return cJSON_GetObjectItem(e, "desc")->valuestring;
}

static int setup(void **state)
{
    fd_daemon_t *d = calloc(1, sizeof *d);
    fd_start(d, NULL, NULL);
    *state = d;
    return 0;
}

static int teardown(void **state)
{
    fd_stop(*state);
    free(*state);
    return 0;
}

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static double stat_of(fd_daemon_t *d, const char *name)
{
    cJSON *s = mk_control_stats(d->srv);
    double v = cJSON_GetObjectItem(s, name)->valuedouble;
    cJSON_Delete(s);
    return v;
}

/* Waits (up to 5 s) until the server's counter `name` reaches `value`. */
static void wait_stat(fd_daemon_t *d, const char *name, double value)
{
    int64_t end = now_ms() + 5000;
    while (stat_of(d, name) != value) {
        if (now_ms() > end)
            fail_msg("%s stayed %g, expected %g", name, stat_of(d, name), value);
        usleep(2000);
    }
}

/* ---- tests ------------------------------------------------------------------------------------------------- */

static void test_greeting_and_ids(void **state)
{
    fd_daemon_t *d = *state;
    cli_t c;
    cJSON *g;
    cli_open(&c, d->path, &g);
    cJSON *m = cJSON_GetObjectItem(g, "maskd");
    assert_string_equal(cJSON_GetObjectItem(m, "version")->valuestring, "test-1.0");
    static const char *const cmds[] = {"get", "set", "list", "stats", "subscribe", "unsubscribe", "reload",
                                       "version", "help"};
    cJSON *caps = cJSON_GetObjectItem(m, "capabilities");
    assert_int_equal(cJSON_GetArraySize(caps), 9);
    for (int i = 0; i < 9; i++)
        assert_string_equal(cJSON_GetArrayItem(caps, i)->valuestring, cmds[i]);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(m, "events")), 3);
    cJSON_Delete(g);

    cJSON *r = cli_call(&c, "{\"id\": 42, \"cmd\": \"version\"}");
    cJSON *res = ok_result(r, 42);
    assert_string_equal(cJSON_GetObjectItem(res, "version")->valuestring, "test-1.0");
    assert_int_equal(cJSON_GetObjectItem(res, "protocol")->valueint, 1);
    cJSON_Delete(r);
    r = cli_call(&c, "{\"id\": \"abc-1\", \"cmd\": \"version\"}");
    assert_string_equal(cJSON_GetObjectItem(r, "id")->valuestring, "abc-1");
    cJSON_Delete(r);
    r = cli_call(&c, "{\"cmd\": \"version\"}");
    ok_result(r, -1);
    cJSON_Delete(r);
    /* Errors echo the id too. */
    r = cli_call(&c, "{\"id\": 9, \"cmd\": \"frobnicate\"}");
    assert_int_equal(cJSON_GetObjectItem(r, "id")->valueint, 9);
    assert_non_null(strstr(desc_of(err_of(r, "unknown-command")), "frobnicate"));
    cJSON_Delete(r);
    r = cli_call(&c, "{\"id\": 10, \"cmd\": \"get\", \"bogus\": 1}");
    assert_int_equal(cJSON_GetObjectItem(r, "id")->valueint, 10);
    err_of(r, "parse");
    cJSON_Delete(r);
    cli_close(&c);
}

static void test_get_list(void **state)
{
    fd_daemon_t *d = *state;
    cli_t c;
    cli_open(&c, d->path, NULL);
    cJSON *r = cli_call(&c, "{\"id\": 1, \"cmd\": \"get\"}");
    cJSON *res = ok_result(r, 1);
    assert_int_equal(cJSON_GetArraySize(res), mk_options_count());
    assert_int_equal(cJSON_GetObjectItem(res, "grabcut.iterations")->valueint, 5);
    assert_string_equal(cJSON_GetObjectItem(res, "bus.mode")->valuestring, "0640");
    cJSON_Delete(r);
    r = cli_call(&c, "{\"id\": 2, \"cmd\": \"get\", \"args\": [\"grabcut.iterations\", \"backend\"]}");
    res = ok_result(r, 2);
    assert_int_equal(cJSON_GetArraySize(res), 2);
    assert_string_equal(cJSON_GetObjectItem(res, "backend")->valuestring, "auto");
    cJSON_Delete(r);
    /* A section, "section.*", a single key as a string, {"keys": [...]}. */
    static const struct {
        const char *req;
        int count;
    } sel[] = {{"{\"id\": 3, \"cmd\": \"get\", \"args\": \"grabcut\"}", 8},
               {"{\"id\": 3, \"cmd\": \"get\", \"args\": [\"guided.*\"]}", 3},
               {"{\"id\": 3, \"cmd\": \"get\", \"args\": \"log.level\"}", 1},
               {"{\"id\": 3, \"cmd\": \"get\", \"args\": {\"keys\": [\"mask\", \"backend\"]}}", 5},
               {"{\"id\": 3, \"cmd\": \"get\", \"args\": \"*\"}", -1}};
    for (size_t i = 0; i < sizeof sel / sizeof sel[0]; i++) {
        r = cli_call(&c, sel[i].req);
        res = ok_result(r, 3);
        assert_int_equal(cJSON_GetArraySize(res), sel[i].count < 0 ? mk_options_count() : sel[i].count);
        cJSON_Delete(r);
    }
    r = cli_call(&c, "{\"id\": 4, \"cmd\": \"get\", \"args\": [\"grabcut.iteration\"]}");
    cJSON *e = err_of(r, "unknown-key");
    assert_string_equal(desc_of(e), "grabcut.iteration: unknown key (did you mean grabcut.iterations?)");
    cJSON_Delete(r);
    r = cli_call(&c, "{\"id\": 5, \"cmd\": \"get\", \"args\": [\"nope\", \"backend\", \"grab\"]}");
    e = err_of(r, "unknown-key");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(e, "errors")), 2);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(e, "errors"), 1), "key")->valuestring,
                        "grab");
    cJSON_Delete(r);
    r = cli_call(&c, "{\"id\": 6, \"cmd\": \"get\", \"args\": [1]}");
    err_of(r, "bad-args");
    cJSON_Delete(r);
    r = cli_call(&c, "{\"id\": 6, \"cmd\": \"get\", \"args\": 5}");
    err_of(r, "bad-args");
    cJSON_Delete(r);
    r = cli_call(&c, "{\"id\": 6, \"cmd\": \"get\", \"args\": {\"key\": \"backend\"}}");
    err_of(r, "bad-args");
    cJSON_Delete(r);

    r = cli_call(&c, "{\"id\": 7, \"cmd\": \"list\"}");
    res = ok_result(r, 7);
    assert_int_equal(cJSON_GetArraySize(res), mk_options_count());
    cJSON *first = cJSON_GetArrayItem(res, 0);
    assert_string_equal(cJSON_GetObjectItem(first, "name")->valuestring, mk_options_at(0)->name);
    assert_non_null(cJSON_GetObjectItem(first, "doc"));
    assert_non_null(cJSON_GetObjectItem(first, "value"));
    cJSON_Delete(r);
    r = cli_call(&c, "{\"id\": 8, \"cmd\": \"list\", \"args\": \"grabcut.iterations\"}");
    res = ok_result(r, 8);
    assert_int_equal(cJSON_GetArraySize(res), 1);
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(res, 0), "max")->valueint, 20);
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetArrayItem(res, 0), "live")));
    cJSON_Delete(r);
    cli_close(&c);
}

static void test_set(void **state)
{
    fd_daemon_t *d = *state;
    cli_t c;
    cli_open(&c, d->path, NULL);
    cJSON *r = cli_call(&c, "{\"id\": 1, \"cmd\": \"set\", \"args\": {\"grabcut.iterations\": 8, \"mask\": "
                            "{\"threshold\": \"otsu\", \"value\": 0.5}}}");
    cJSON *res = ok_result(r, 1);
    cJSON *applied = cJSON_GetObjectItem(res, "applied");
    assert_int_equal(cJSON_GetArraySize(applied), 3);
    assert_int_equal(cJSON_GetObjectItem(applied, "grabcut.iterations")->valueint, 8);
    assert_string_equal(cJSON_GetObjectItem(applied, "mask.threshold")->valuestring, "otsu");
    assert_int_equal(cJSON_GetObjectItem(res, "changed")->valueint, 2); /* mask.value was 0.5 already */
    cJSON_Delete(r);
    mk_config_t cfg = fd_config(d);
    assert_int_equal(cfg.grabcut.iterations, 8);
    assert_int_equal(cfg.mask.threshold, MK_CFG_THRESH_OTSU);
    assert_int_equal(fd_hook_calls(d), 2);
    r = cli_call(&c, "{\"id\": 2, \"cmd\": \"get\", \"args\": \"grabcut.iterations\"}");
    assert_int_equal(cJSON_GetObjectItem(ok_result(r, 2), "grabcut.iterations")->valueint, 8);
    cJSON_Delete(r);

    /* Several keys, some bad: nothing applied, every bad key named. */
    r = cli_call(&c, "{\"id\": 3, \"cmd\": \"set\", \"args\": {\"grabcut.iterations\": 9, \"guided.radius\": 0, "
                     "\"mask.threshold\": \"hard\", \"no.such\": 1, \"detect.thresh\": \"0.3\"}}");
    assert_int_equal(cJSON_GetObjectItem(r, "id")->valueint, 3);
    cJSON *e = err_of(r, "bad-value");
    cJSON *errors = cJSON_GetObjectItem(e, "errors");
    assert_int_equal(cJSON_GetArraySize(errors), 4);
    static const char *const keys[] = {"guided.radius", "mask.threshold", "no.such", "detect.thresh"};
    static const char *const classes[] = {"bad-value", "bad-value", "unknown-key", "bad-value"};
    for (int i = 0; i < 4; i++) {
        cJSON *ei = cJSON_GetArrayItem(errors, i);
        assert_string_equal(cJSON_GetObjectItem(ei, "key")->valuestring, keys[i]);
        assert_string_equal(cJSON_GetObjectItem(ei, "class")->valuestring, classes[i]);
        assert_non_null(strstr(desc_of(e), keys[i]));
    }
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(errors, 3), "desc")->valuestring,
                        "detect.thresh: expected number 0..0.99, got \"0.3\"");
    cJSON_Delete(r);
    cfg = fd_config(d);
    assert_int_equal(cfg.grabcut.iterations, 8);
    assert_int_equal(fd_hook_calls(d), 2);

    /* Wrong type: the message. */
    r = cli_call(&c, "{\"id\": 4, \"cmd\": \"set\", \"args\": {\"grabcut\": {\"iterations\": \"x\"}}}");
    e = err_of(r, "bad-value");
    assert_string_equal(desc_of(e), "grabcut.iterations: expected integer 1..20, got \"x\"");
    assert_null(cJSON_GetObjectItem(e, "errors"));
    cJSON_Delete(r);

    /* Restart-only keys are refused, unless unchanged. */
    r = cli_call(&c, "{\"id\": 5, \"cmd\": \"set\", \"args\": {\"source.size\": \"1280x720\"}}");
    e = err_of(r, "restart-required");
    assert_non_null(strstr(desc_of(e), "source.size: takes effect only at a restart"));
    cJSON_Delete(r);
    r = cli_call(&c, "{\"id\": 6, \"cmd\": \"set\", \"args\": {\"source.size\": \"640x480\", \"bus.frame\": true}}");
    assert_int_equal(cJSON_GetObjectItem(ok_result(r, 6), "changed")->valueint, 1);
    cJSON_Delete(r);
    assert_int_equal(fd_config(d).bus.frame, 1);
    r = cli_call(&c, "{\"id\": 7, \"cmd\": \"set\", \"args\": {\"source.size\": \"1280x720\", \"grabcut.iterations\": 3}}");
    err_of(r, "restart-required");
    cJSON_Delete(r);
    assert_int_equal(fd_config(d).grabcut.iterations, 8);

    /* The shape of args. */
    static const char *const bad_args[] = {
        "{\"id\": 8, \"cmd\": \"set\"}", "{\"id\": 8, \"cmd\": \"set\", \"args\": {}}",
        "{\"id\": 8, \"cmd\": \"set\", \"args\": [\"grabcut.iterations\", 5]}",
        "{\"id\": 8, \"cmd\": \"set\", \"args\": \"grabcut.iterations=5\"}"};
    for (size_t i = 0; i < sizeof bad_args / sizeof bad_args[0]; i++) {
        r = cli_call(&c, bad_args[i]);
        err_of(r, "bad-args");
        cJSON_Delete(r);
    }
    r = cli_call(&c, "{\"id\": 9, \"cmd\": \"set\", \"args\": {\"grabcut\": 5}}");
    err_of(r, "bad-value");
    cJSON_Delete(r);
    assert_int_equal(stat_of(d, "sets_applied"), 2);
    cli_close(&c);
}

/* A set is applied at a frame boundary; the next request of the same client is answered after it. */
static void test_set_ordering_and_timeout(void **state)
{
    fd_daemon_t *d = *state;
    cli_t c;
    cli_open(&c, d->path, NULL);
    cli_send(&c, "{\"id\": 1, \"cmd\": \"set\", \"args\": {\"grabcut.iterations\": 11}}\n"
                 "{\"id\": 2, \"cmd\": \"get\", \"args\": \"grabcut.iterations\"}\n");
    cJSON *r = cli_read(&c);
    ok_result(r, 1);
    cJSON_Delete(r);
    r = cli_read(&c);
    assert_int_equal(cJSON_GetObjectItem(ok_result(r, 2), "grabcut.iterations")->valueint, 11);
    cJSON_Delete(r);

    /* No frame boundary (pipeline stuck): "busy" after control.set_timeout_ms, nothing applied, ever. */
    fd_pipeline(d, 0);
    int64_t t0 = now_ms();
    r = cli_call(&c, "{\"id\": 3, \"cmd\": \"set\", \"args\": {\"grabcut.iterations\": 12}}");
    int64_t waited = now_ms() - t0;
    cJSON *e = err_of(r, "busy");
    assert_non_null(strstr(desc_of(e), "no frame boundary within 2000 ms"));
    cJSON_Delete(r);
    assert_true(waited >= 1900 && waited < 4000);
    assert_int_equal(mk_control_pending(d->srv), 0);
    assert_int_equal(mk_control_apply_pending(d->srv), 0);
    assert_int_equal(fd_config(d).grabcut.iterations, 11);
    assert_int_equal(stat_of(d, "sets_timed_out"), 1);
    /* While the set waits the client's other requests wait too; the boundary comes: both answered. */
    cli_send(&c, "{\"id\": 4, \"cmd\": \"set\", \"args\": {\"grabcut.iterations\": 13}}\n"
                 "{\"id\": 5, \"cmd\": \"version\"}\n");
    int64_t end = now_ms() + 2000;
    while (mk_control_pending(d->srv) == 0 && now_ms() < end)
        usleep(1000);
    assert_int_equal(mk_control_pending(d->srv), 1);
    struct pollfd p = {.fd = c.fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 100), 0); /* nothing answered yet */
    assert_int_equal(mk_control_apply_pending(d->srv), 1);
    r = cli_read(&c);
    ok_result(r, 4);
    cJSON_Delete(r);
    r = cli_read(&c);
    ok_result(r, 5);
    cJSON_Delete(r);
    assert_int_equal(fd_config(d).grabcut.iterations, 13);
    fd_pipeline(d, 1);

    /* A client that leaves while its set waits: the set is still applied, the server goes on. */
    cli_t gone;
    cli_open(&gone, d->path, NULL);
    fd_pipeline(d, 0);
    cli_send(&gone, "{\"id\": 1, \"cmd\": \"set\", \"args\": {\"guided.radius\": 3}}\n");
    end = now_ms() + 2000;
    while (mk_control_pending(d->srv) == 0 && now_ms() < end)
        usleep(1000);
    cli_close(&gone);
    usleep(20000);
    assert_int_equal(mk_control_apply_pending(d->srv), 1);
    fd_pipeline(d, 1);
    assert_int_equal(fd_config(d).guided.radius, 3);
    r = cli_call(&c, "{\"id\": 6, \"cmd\": \"version\"}");
    ok_result(r, 6);
    cJSON_Delete(r);
    cli_close(&c);
}

/* Two sets sent together while the pipeline is stuck: each waits its own timeout, then is refused. */
static void test_set_timeouts_in_a_row(void **state)
{
    (void)state;
    fd_daemon_t d;
    mk_control_opts_t o;
    mk_control_opts_from_config(&o, NULL);
    o.set_timeout_ms = 200;
    fd_start(&d, &o, NULL);
    fd_pipeline(&d, 0);
    cli_t c;
    cli_open(&c, d.path, NULL);
    int64_t t0 = now_ms();
    cli_send(&c, "{\"id\": 1, \"cmd\": \"set\", \"args\": {\"grabcut.iterations\": 2}}\n"
                 "{\"id\": 2, \"cmd\": \"set\", \"args\": {\"grabcut.iterations\": 3}}\n");
    for (int id = 1; id <= 2; id++) {
        cJSON *r = cli_read(&c);
        assert_int_equal(cJSON_GetObjectItem(r, "id")->valueint, id);
        assert_non_null(strstr(desc_of(err_of(r, "busy")), "within 200 ms"));
        cJSON_Delete(r);
        int64_t t = now_ms() - t0;
        assert_true(t >= 190 * id && t < 1500 * id);
    }
    assert_int_equal(fd_config(&d).grabcut.iterations, 5);
    assert_int_equal(stat_of(&d, "sets_timed_out"), 2);
    /* Stopping the server answers a set still waiting. */
    cli_send(&c, "{\"id\": 3, \"cmd\": \"set\", \"args\": {\"grabcut.iterations\": 4}}\n");
    int64_t end = now_ms() + 2000;
    while (mk_control_pending(d.srv) == 0 && now_ms() < end)
        usleep(1000);
    mk_control_stop(d.srv);
    cJSON *r = cli_read(&c);
    assert_non_null(strstr(desc_of(err_of(r, "busy")), "shutting down"));
    cJSON_Delete(r);
    cli_close(&c);
    fd_stop(&d);
    assert_int_equal(d.cfg.grabcut.iterations, 5);
}

static void test_bad_requests(void **state)
{
    (void)state;
    fd_daemon_t d;
    mk_control_opts_t o;
    mk_control_opts_from_config(&o, NULL);
    o.max_line = 4096;
    fd_start(&d, &o, NULL);
    cli_t c;
    cli_open(&c, d.path, NULL);
    static const struct {
        const char *line, *cls, *desc;
    } cases[] = {
        {"not json", "parse", "invalid JSON"},
        {"{\"id\": 1, \"cmd\": \"get\"", "parse", "invalid JSON"},
        {"[1, 2, 3]", "parse", "JSON object"},
        {"{\"id\": 1}", "parse", "missing \"cmd\""},
        {"{\"id\": 1, \"cmd\": 7}", "parse", "missing \"cmd\""},
        {"{\"id\": 1, \"cmd\": \"explode\"}", "unknown-command", "unknown command \"explode\""},
        {"{\"id\": 1, \"cmd\": \"stats\", \"args\": [1]}", "bad-args", "stats takes no arguments"},
        {"{\"id\": 1, \"cmd\": \"version\", \"args\": {}}", "bad-args", "version takes no arguments"},
        {"{\"id\": 1, \"cmd\": \"subscribe\", \"args\": [\"frames\"]}", "bad-args", "unknown event \"frames\""},
        {"{\"id\": 1, \"cmd\": \"subscribe\", \"args\": 3}", "bad-args", "expected an event name"},
        {"{\"id\": 1, \"cmd\": \"set\", \"args\": {\"detect.fp16\": \"yes\"}}", "bad-value",
         "detect.fp16: expected true or false, got \"yes\""},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *r = cli_call(&c, cases[i].line);
        cJSON *e = err_of(r, cases[i].cls);
        if (!strstr(desc_of(e), cases[i].desc))
            fail_msg("case %zu: '%s' lacks '%s'", i, desc_of(e), cases[i].desc);
        cJSON_Delete(r);
        r = cli_call(&c, "{\"id\": 77, \"cmd\": \"version\"}"); /* still serving this client */
        ok_result(r, 77);
        cJSON_Delete(r);
    }
    /* Oversize lines: an error, the rest of the line skipped, the connection kept — in one write, in pieces,
     * and followed by a request in the same write. */
    size_t big = 10000;
    char *line = malloc(big + 64);
    memset(line, 'x', big);
    line[big] = '\0';
    cJSON *r = cli_call(&c, line);
    assert_non_null(strstr(desc_of(err_of(r, "parse")), "longer than 4096 bytes"));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(r, "id")));
    cJSON_Delete(r);
    for (size_t off = 0; off < big; off += 1000) {
        char piece[1001];
        memcpy(piece, line + off, 1000);
        piece[1000] = '\0';
        cli_send(&c, piece);
        usleep(1000);
    }
    cli_send(&c, "\n{\"id\": 78, \"cmd\": \"version\"}\n");
    r = cli_read(&c);
    err_of(r, "parse");
    cJSON_Delete(r);
    r = cli_read(&c);
    ok_result(r, 78);
    cJSON_Delete(r);
    /* Exactly the limit is fine. */
    snprintf(line, big, "{\"id\": 79, \"cmd\": \"get\", \"args\": \"backend\"}");
    size_t n = strlen(line);
    memset(line + n, ' ', 4096 - n);
    line[4096] = '\0';
    r = cli_call(&c, line);
    ok_result(r, 79);
    cJSON_Delete(r);
    free(line);
    /* Blank lines are ignored; a line with several requests is not a request. */
    r = cli_call(&c, "\n\n{\"id\": 80, \"cmd\": \"version\"}");
    ok_result(r, 80);
    cJSON_Delete(r);
    r = cli_call(&c, "{\"cmd\": \"version\"} {\"cmd\": \"version\"}");
    err_of(r, "parse");
    cJSON_Delete(r);
    cli_close(&c);
    assert_true(stat_of(&d, "errors") >= 13);
    fd_stop(&d);
}

/* ---- mutated requests ------------------------------------------------------------------------------------ */

/* Random mutations of valid requests, on one connection: each gets one reply, ok or an error with a class and a
 * description, and the connection keeps serving; never a crash (the CI's sanitizer build runs this too). */
static void test_mutated_requests(void **state)
{
    fd_daemon_t *d = *state;
    static const char *const seeds[] = {
        "{\"id\": 1, \"cmd\": \"get\", \"args\": \"grabcut.iterations\"}",
        "{\"id\": 2, \"cmd\": \"get\", \"args\": [\"guided.radius\", \"backend\"]}",
        "{\"id\": 3, \"cmd\": \"set\", \"args\": {\"grabcut.iterations\": 4, \"guided.eps\": 0.001}}",
        "{\"id\": 4, \"cmd\": \"set\", \"args\": {\"mask\": {\"threshold\": \"otsu\"}}}",
        "{\"id\": 5, \"cmd\": \"list\", \"args\": \"grabcut\"}",
        "{\"id\": 6, \"cmd\": \"subscribe\", \"args\": [\"config\"]}",
        "{\"id\": 7, \"cmd\": \"unsubscribe\", \"args\": \"config\"}",
        "{\"id\": \"s\", \"cmd\": \"stats\"}",
        "{\"id\": 9, \"cmd\": \"version\", \"args\": null}",
        "{\"cmd\": \"help\"}",
    };
    static const char *const tokens[] = {"\"cmd\"", "\"args\"", "\"id\"", "\"set\"", "\"get\"", "\"list\"",
                                         "\"subscribe\"", "{", "}", "[", "]", ":", ",", "null", "true", "1e999",
                                         "-0", "99999999999999999999", "\"\\u0000\"", "\"\\ud800\"",
                                         "\"grabcut.iterations\"", "\"source.spec\"", "{\"a\": {\"b\": [[]]}}"};
    cli_t c;
    cli_open(&c, d->path, NULL);
    tu_rng_t rng = {99};
    int oks = 0, errs = 0;
    for (int i = 0; i < 1500; i++) {
        const char *seed = seeds[i % (int)(sizeof seeds / sizeof seeds[0])];
        size_t n;
        char *line = tu_mutate(&rng, seed, strlen(seed), tokens, (int)(sizeof tokens / sizeof tokens[0]), &n);
        int blank = 1;
        for (size_t k = 0; k < n; k++) {
            if (line[k] == '\n' || line[k] == '\0')
                line[k] = ' ';
            blank &= line[k] == ' ' || line[k] == '\t' || line[k] == '\r';
        }
        if (blank) {
            free(line);
            continue; /* blank lines get no reply */
        }
        cJSON *r = cli_call(&c, line);
        cJSON *ok = cJSON_GetObjectItem(r, "ok");
        if (!cJSON_IsBool(ok))
            fail_msg("mutation %d '%s': no ok in %s", i, line, cJSON_PrintUnformatted(r));
        if (cJSON_IsTrue(ok)) {
            oks++;
        } else {
            cJSON *e = cJSON_GetObjectItem(r, "error");
            cJSON *cls = cJSON_GetObjectItem(e, "class"), *desc = cJSON_GetObjectItem(e, "desc");
            if (!cJSON_IsString(cls) || !cJSON_IsString(desc) || !desc->valuestring[0])
                fail_msg("mutation %d '%s': error without class or description: %s", i, line,
                         cJSON_PrintUnformatted(r));
            errs++;
        }
        cJSON_Delete(r);
        free(line);
        if (i % 100 == 99) {
            r = cli_call(&c, "{\"id\": 4242, \"cmd\": \"version\"}");
            ok_result(r, 4242);
            cJSON_Delete(r);
        }
    }
    print_message("mutated requests: %d ok, %d errors\n", oks, errs);
    assert_true(oks > 0 && errs > 0);
    cli_close(&c);
}

/* ---- 64 concurrent clients ------------------------------------------------------------------------------- */

typedef struct {
    fd_daemon_t *d;
    int index;
    pthread_barrier_t *connected, *done;
    int failures;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    int fd = mk_ctl_connect(w->d->path);
    mk_ctl_linebuf_t lb;
    mk_ctl_linebuf_init(&lb, 1 << 20);
    char *line;
    size_t len;
    if (fd < 0 || mk_ctl_read_line(fd, &lb, 5000, &line, &len) != MK_CTL_LINE || !strstr(line, "\"maskd\""))
        w->failures++;
    pthread_barrier_wait(w->connected);
    for (int i = 0; i < 20 && fd >= 0; i++) {
        int id = w->index * 1000 + i;
        char req[160];
        snprintf(req, sizeof req, "{\"id\": %d, \"cmd\": \"get\", \"args\": [\"grabcut.iterations\"]}\n", id);
        if (mk_ctl_write_all(fd, req, strlen(req)) != 0 || mk_ctl_read_line(fd, &lb, 5000, &line, &len) != MK_CTL_LINE) {
            w->failures++;
            break;
        }
        cJSON *r = cJSON_Parse(line);
        cJSON *res = cJSON_GetObjectItem(r, "result");
        if (!r || cJSON_GetObjectItem(r, "id")->valueint != id ||
            cJSON_GetObjectItem(res, "grabcut.iterations")->valueint != 5)
            w->failures++;
        cJSON_Delete(r);
    }
    pthread_barrier_wait(w->done);
    if (fd >= 0)
        close(fd);
    mk_ctl_linebuf_free(&lb);
    return NULL;
}

static void test_many_clients(void **state)
{
    fd_daemon_t *d = *state;
    enum { N = 64 };
    assert_int_equal(fd_config(d).control.max_clients, N); /* the default limit */
    pthread_t th[N];
    worker_t w[N];
    pthread_barrier_t connected, done;
    pthread_barrier_init(&connected, NULL, N + 1);
    pthread_barrier_init(&done, NULL, N + 1);
    for (int i = 0; i < N; i++) {
        w[i] = (worker_t){d, i, &connected, &done, 0};
        assert_int_equal(pthread_create(&th[i], NULL, worker_main, &w[i]), 0);
    }
    pthread_barrier_wait(&connected);
    assert_int_equal(stat_of(d, "clients"), N);
    /* The 65th: one "busy" error line, then the server closes. */
    int fd = mk_ctl_connect(d->path);
    assert_true(fd >= 0);
    mk_ctl_linebuf_t lb;
    mk_ctl_linebuf_init(&lb, 4096);
    char *line;
    size_t len;
    assert_int_equal(mk_ctl_read_line(fd, &lb, 5000, &line, &len), MK_CTL_LINE);
    cJSON *r = cJSON_Parse(line);
    assert_non_null(strstr(desc_of(err_of(r, "busy")), "too many clients (control.max_clients = 64)"));
    cJSON_Delete(r);
    assert_int_equal(mk_ctl_read_line(fd, &lb, 5000, &line, &len), MK_EIO);
    close(fd);
    mk_ctl_linebuf_free(&lb);
    pthread_barrier_wait(&done);
    for (int i = 0; i < N; i++) {
        pthread_join(th[i], NULL);
        assert_int_equal(w[i].failures, 0);
    }
    pthread_barrier_destroy(&connected);
    pthread_barrier_destroy(&done);
    assert_int_equal(stat_of(d, "refused"), 1);
    wait_stat(d, "clients", 0);
    cli_t c;
    cli_open(&c, d->path, NULL); /* room again */
    cli_close(&c);
    assert_int_equal(stat_of(d, "connections"), N + 1);
}

/* ---- events ------------------------------------------------------------------------------------------------ */

typedef struct {
    cli_t *c;
    int events, in_order, closed;
} drain_t;

static void *drain_main(void *arg)
{
    drain_t *dr = arg;
    long expect = 0;
    dr->in_order = 1;
    for (;;) {
        char *line;
        size_t len;
        int r = mk_ctl_read_line(dr->c->fd, &dr->c->lb, 10000, &line, &len);
        if (r != MK_CTL_LINE) {
            dr->closed = r == MK_EIO;
            return NULL;
        }
        cJSON *j = cJSON_Parse(line);
        cJSON *seq = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "data"), "seq");
        if (seq) {
            if ((long)seq->valuedouble != expect)
                dr->in_order = 0;
            expect++;
            dr->events++;
        }
        int last = seq && cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "data"), "last"));
        cJSON_Delete(j);
        if (last)
            return NULL;
    }
}

static void test_slow_subscriber(void **state)
{
    (void)state;
    fd_daemon_t d;
    mk_control_opts_t o;
    mk_control_opts_from_config(&o, NULL);
    o.max_output = 256 * 1024;
    fd_start(&d, &o, NULL);
    cli_t slow, fast;
    cli_open(&slow, d.path, NULL);
    cli_open(&fast, d.path, NULL);
    cJSON *r = cli_call(&slow, "{\"id\": 1, \"cmd\": \"subscribe\", \"args\": [\"stats\"]}");
    cJSON_Delete(r);
    r = cli_call(&fast, "{\"id\": 1, \"cmd\": \"subscribe\", \"args\": \"stats\"}");
    cJSON_Delete(r);
    assert_int_equal(stat_of(&d, "subscribers"), 2);
    drain_t dr = {&fast, 0, 0, 0};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, drain_main, &dr), 0);

    /* 2000 events of 2 KB (4 MB): `slow` never reads, so its socket and then its 256 KB of output fill up. */
    enum { EVENTS = 2000 };
    char pad[2048];
    memset(pad, 'p', sizeof pad - 1);
    pad[sizeof pad - 1] = '\0';
    int64_t worst = 0, t_all = now_ms();
    for (int i = 0; i < EVENTS; i++) {
        cJSON *data = cJSON_CreateObject();
        cJSON_AddNumberToObject(data, "seq", i);
        cJSON_AddBoolToObject(data, "last", i == EVENTS - 1);
        cJSON_AddStringToObject(data, "pad", pad);
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        int q = mk_control_publish(d.srv, "stats", data);
        clock_gettime(CLOCK_MONOTONIC, &b);
        cJSON_Delete(data);
        assert_true(q >= 1);
        int64_t us = (b.tv_sec - a.tv_sec) * 1000000 + (b.tv_nsec - a.tv_nsec) / 1000;
        if (us > worst)
            worst = us;
        if (i % 5 == 4)
            usleep(1000);
    }
    pthread_join(th, NULL);
    print_message("publish: worst %lld us, %d events in %lld ms\n", (long long)worst, EVENTS,
                  (long long)(now_ms() - t_all));
    assert_true(worst < 100000); /* never waits for a client */
    /* The reader got everything in order; the non-reader was disconnected. */
    assert_int_equal(dr.events, EVENTS);
    assert_true(dr.in_order);
    wait_stat(&d, "dropped_slow", 1);
    wait_stat(&d, "clients", 1);
    /* What `slow` finds when it finally reads: some events, then the end of the connection. */
    int got = 0, rc;
    char *line;
    size_t len;
    while ((rc = mk_ctl_read_line(slow.fd, &slow.lb, 5000, &line, &len)) == MK_CTL_LINE)
        got++;
    assert_int_equal(rc, MK_EIO);
    assert_true(got > 0 && got < EVENTS);
    cli_close(&slow);
    r = cli_call(&fast, "{\"id\": 2, \"cmd\": \"version\"}");
    ok_result(r, 2);
    cJSON_Delete(r);
    cli_close(&fast);
    fd_stop(&d);
}

static void test_events(void **state)
{
    fd_daemon_t *d = *state;
    cJSON *data = cJSON_CreateObject();
    cJSON_AddNumberToObject(data, "n", 1);
    assert_int_equal(mk_control_publish(d->srv, "stats", data), 0); /* nobody listens */
    assert_int_equal(mk_control_publish(d->srv, "frames", data), MK_EINVAL);
    cli_t c;
    cli_open(&c, d->path, NULL);
    cJSON *r = cli_call(&c, "{\"id\": 1, \"cmd\": \"subscribe\", \"args\": [\"stats\", \"state\"]}");
    cJSON *ev = cJSON_GetObjectItem(ok_result(r, 1), "events");
    assert_int_equal(cJSON_GetArraySize(ev), 2);
    assert_string_equal(cJSON_GetArrayItem(ev, 1)->valuestring, "state");
    cJSON_Delete(r);
    assert_int_equal(mk_control_publish(d->srv, "detections", data), 0);
    assert_int_equal(mk_control_publish(d->srv, "state", data), 1);
    assert_int_equal(mk_control_publish(d->srv, "stats", NULL), 1);
    r = cli_read(&c);
    assert_string_equal(cJSON_GetObjectItem(r, "event")->valuestring, "state");
    assert_int_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(r, "data"), "n")->valueint, 1);
    cJSON_Delete(r);
    r = cli_read(&c);
    assert_string_equal(cJSON_GetObjectItem(r, "event")->valuestring, "stats");
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(r, "data")));
    cJSON_Delete(r);
    /* Replies after events stay in order. */
    r = cli_call(&c, "{\"id\": 2, \"cmd\": \"unsubscribe\", \"args\": \"state\"}");
    ev = cJSON_GetObjectItem(ok_result(r, 2), "events");
    assert_int_equal(cJSON_GetArraySize(ev), 1);
    cJSON_Delete(r);
    assert_int_equal(mk_control_publish(d->srv, "state", data), 0);
    r = cli_call(&c, "{\"id\": 3, \"cmd\": \"subscribe\"}");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(ok_result(r, 3), "events")), 3);
    cJSON_Delete(r);
    assert_int_equal(mk_control_publish(d->srv, "detections", data), 1);
    r = cli_read(&c);
    assert_string_equal(cJSON_GetObjectItem(r, "event")->valuestring, "detections");
    cJSON_Delete(r);
    r = cli_call(&c, "{\"id\": 4, \"cmd\": \"unsubscribe\"}");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(ok_result(r, 4), "events")), 0);
    cJSON_Delete(r);
    assert_int_equal(mk_control_publish(d->srv, "detections", data), 0);
    assert_int_equal(stat_of(d, "subscribers"), 0);
    /* A subscriber that disconnects stops counting. */
    r = cli_call(&c, "{\"id\": 5, \"cmd\": \"subscribe\", \"args\": {\"events\": [\"stats\"]}}");
    cJSON_Delete(r);
    cli_close(&c);
    wait_stat(d, "clients", 0);
    assert_int_equal(mk_control_publish(d->srv, "stats", data), 0);
    cJSON_Delete(data);
}

static void test_stats_reload_help(void **state)
{
    fd_daemon_t *d = *state;
    cli_t c;
    cli_open(&c, d->path, NULL);
    cJSON *r = cli_call(&c, "{\"id\": 1, \"cmd\": \"stats\"}");
    cJSON *res = ok_result(r, 1);
    assert_int_equal(cJSON_GetObjectItem(res, "calls")->valueint, 1);
    assert_string_equal(cJSON_GetObjectItem(res, "state")->valuestring, "running");
    cJSON_Delete(r);
    r = cli_call(&c, "{\"id\": 2, \"cmd\": \"reload\"}");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(ok_result(r, 2), "reloaded")));
    cJSON_Delete(r);
    pthread_mutex_lock(&d->lock);
    assert_int_equal(d->reloads, 1);
    d->reload_fail = 1;
    pthread_mutex_unlock(&d->lock);
    r = cli_call(&c, "{\"id\": 3, \"cmd\": \"reload\"}");
    assert_string_equal(desc_of(err_of(r, "bad-value")),
                        "reload failed: /etc/maskd/maskd.json: grabcut.iterations: expected integer 1..20, got 0");
    cJSON_Delete(r);
    r = cli_call(&c, "{\"id\": 4, \"cmd\": \"help\"}");
    cJSON *cmds = cJSON_GetObjectItem(ok_result(r, 4), "commands");
    assert_int_equal(cJSON_GetArraySize(cmds), 9);
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetArrayItem(cmds, 1), "name")->valuestring, "set");
    cJSON_Delete(r);
    cli_close(&c);
    cJSON *s = mk_control_stats(d->srv);
    assert_int_equal(cJSON_GetObjectItem(s, "requests")->valueint, 4);
    assert_int_equal(cJSON_GetObjectItem(s, "errors")->valueint, 1);
    assert_int_equal(cJSON_GetObjectItem(s, "connections")->valueint, 1);
    cJSON_Delete(s);
}

/* The socket: mode 0660, a stale file replaced, a live server or another file refused, removed at stop; a client
 * that half-closes still gets its answers. */
static void test_socket_file(void **state)
{
    fd_daemon_t *d = *state;
    struct stat st;
    assert_int_equal(stat(d->path, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(st.st_mode & 0777, 0660);

    /* Half-close: what was sent is answered, then the server closes. */
    cli_t c;
    cli_open(&c, d->path, NULL);
    cli_send(&c, "{\"id\": 1, \"cmd\": \"version\"}\n{\"id\": 2, \"cmd\": \"set\", \"args\": {\"guided.scale\": 2}}\n");
    shutdown(c.fd, SHUT_WR);
    cJSON *r = cli_read(&c);
    ok_result(r, 1);
    cJSON_Delete(r);
    r = cli_read(&c);
    ok_result(r, 2);
    cJSON_Delete(r);
    char *line;
    size_t len;
    assert_int_equal(mk_ctl_read_line(c.fd, &c.lb, 5000, &line, &len), MK_EIO);
    cli_close(&c);
    assert_int_equal(fd_config(d).guided.scale, 2);

    mk_control_opts_t o;
    mk_control_opts_from_config(&o, NULL);
    mk_control_t *other = NULL;
    mk_control_ops_t no_ops = {0};
    o.path = d->path;
    assert_int_equal(mk_control_create(&o, &no_ops, NULL, &other), MK_EINVAL);
    assert_null(other);
    /* A second server on a live socket is refused and leaves it alone. */
    assert_int_equal(mk_control_create(&o, fd_ops(), d, &other), 0);
    assert_int_equal(mk_control_start(other), MK_ESTATE);
    mk_control_destroy(other);
    cli_open(&c, d->path, NULL);
    cli_close(&c);

    char dir[32] = "/tmp/mk-sock-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/control.sock", dir);
    /* A stale socket (its server gone) is replaced; the socket is removed at stop. */
    struct sockaddr_un addr = {.sun_family = AF_UNIX};
    snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    assert_int_equal(bind(fd, (struct sockaddr *)&addr, sizeof addr), 0);
    close(fd);
    fd_daemon_t d2;
    fd_start(&d2, NULL, path);
    cli_open(&c, path, NULL);
    cli_close(&c);
    fd_stop(&d2);
    assert_int_equal(stat(path, &st), -1);
    assert_int_equal(errno, ENOENT);
    /* Any other file there is never removed. */
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fclose(f);
    o.path = path;
    assert_int_equal(mk_control_create(&o, fd_ops(), d, &other), 0);
    assert_int_equal(mk_control_start(other), MK_EIO);
    assert_non_null(strstr(mk_err_msg(), "is not a socket"));
    mk_control_destroy(other);
    assert_int_equal(stat(path, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    unlink(path);
    rmdir(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_greeting_and_ids, setup, teardown),
        cmocka_unit_test_setup_teardown(test_get_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_ordering_and_timeout, setup, teardown),
        cmocka_unit_test(test_set_timeouts_in_a_row),
        cmocka_unit_test(test_bad_requests),
        cmocka_unit_test_setup_teardown(test_mutated_requests, setup, teardown),
        cmocka_unit_test_setup_teardown(test_many_clients, setup, teardown),
        cmocka_unit_test(test_slow_subscriber),
        cmocka_unit_test_setup_teardown(test_events, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stats_reload_help, setup, teardown),
        cmocka_unit_test_setup_teardown(test_socket_file, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
