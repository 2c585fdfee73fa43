/* test_ctlproto: the control protocol's framing — line splitting across reads, oversize lines and resync,
 * request parsing (table of {input, ok, cmd, id}), reply/greeting/event builders. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "ctlproto.h"
#include "errors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Feeds `chunks` into a line buffer of max_line, reading in pieces of at most `piece` bytes, and writes what
 * came out as "L<line>" or "O" (oversize) items separated by '|'. */
static void frame(const char *const *chunks, size_t max_line, size_t piece, char *out, size_t n)
{
    mk_ctl_linebuf_t lb;
    assert_int_equal(mk_ctl_linebuf_init(&lb, max_line), 0);
    size_t pos = 0;
    out[0] = '\0';
    for (int c = 0; chunks[c]; c++) {
        const char *data = chunks[c];
        size_t left = strlen(data);
        while (left) {
            size_t avail;
            char *space = mk_ctl_linebuf_space(&lb, &avail);
            assert_true(avail > 0);
            size_t take = left < avail ? left : avail;
            if (piece && take > piece)
                take = piece;
            memcpy(space, data, take);
            mk_ctl_linebuf_commit(&lb, take);
            data += take;
            left -= take;
            char *line;
            size_t len;
            int r;
            while ((r = mk_ctl_linebuf_next(&lb, &line, &len)) != MK_CTL_NEED_MORE) {
                if (r == MK_CTL_LINE) {
                    assert_int_equal(strlen(line), len);
                    assert_true(len <= max_line);
                    pos += (size_t)snprintf(out + pos, n - pos, "%sL%s", pos ? "|" : "", line);
                } else {
                    assert_int_equal(r, MK_CTL_OVERSIZE);
                    pos += (size_t)snprintf(out + pos, n - pos, "%sO", pos ? "|" : "");
                }
            }
        }
    }
    mk_ctl_linebuf_free(&lb);
}

typedef struct {
    const char *chunks[6];
    size_t max_line;
    const char *expected;
} frame_case_t;

static const frame_case_t frame_cases[] = {
    {{"a\n", NULL}, 16, "La"},
    {{"abc", "def\n", NULL}, 16, "Labcdef"},
    {{"one\ntwo\nthr", "ee\n", NULL}, 16, "Lone|Ltwo|Lthree"},
    {{"crlf\r\n", "x\r", "\n", NULL}, 16, "Lcrlf|Lx"},
    {{"\n\n\r\n  \nz\n", NULL}, 16, "L  |Lz"},                       /* empty lines skipped, blanks kept */
    {{"12345678\n", NULL}, 8, "L12345678"},                           /* exactly max_line */
    {{"123456789\n", "ok\n", NULL}, 8, "O|Lok"},                      /* one over */
    {{"0123456789abcdef", "0123456789abcdef", "xyz\nafter\n", NULL}, 8, "O|Lafter"}, /* reported once */
    {{"short\n0123456789abc", "def\nnext\n", NULL}, 8, "Lshort|O|Lnext"},
    {{"a\nb\nc\nd\ne\nf\ng\nh\n", NULL}, 4, "La|Lb|Lc|Ld|Le|Lf|Lg|Lh"},
    {{"partial", NULL}, 16, ""},
};

static void test_framing(void **state)
{
    (void)state;
    char out[512];
    for (size_t i = 0; i < sizeof frame_cases / sizeof frame_cases[0]; i++)
        for (size_t piece = 0; piece <= 3; piece++) { /* whole chunks, then 1, 2, 3 bytes at a time */
            frame(frame_cases[i].chunks, frame_cases[i].max_line, piece, out, sizeof out);
            if (strcmp(out, frame_cases[i].expected))
                fail_msg("case %zu, pieces of %zu: got '%s', expected '%s'", i, piece, out, frame_cases[i].expected);
        }
    mk_ctl_linebuf_t lb;
    assert_int_equal(mk_ctl_linebuf_init(&lb, 0), MK_EINVAL);
}

typedef struct {
    const char *line;
    int ok;
    const char *cmd;  /* when ok */
    const char *id;   /* the id as printed JSON, NULL when absent (also for failures: whether it is echoed) */
    const char *err;  /* a part of the error message */
} req_case_t;

static const req_case_t req_cases[] = {
    {"{\"id\": 1, \"cmd\": \"get\"}", 1, "get", "1", NULL},
    {"{\"cmd\": \"get\", \"args\": [\"grabcut\"]}", 1, "get", NULL, NULL},
    {"{\"id\": \"abc\", \"cmd\": \"version\"}", 1, "version", "\"abc\"", NULL},
    {"{\"id\": null, \"cmd\": \"version\"}", 1, "version", "null", NULL},
    {"  {\"cmd\":\"stats\"}  ", 1, "stats", NULL, NULL},
    {"{\"id\": 2.5, \"cmd\": \"set\", \"args\": {\"a\": 1}}", 1, "set", "2.5", NULL},
    {"not json", 0, NULL, NULL, "invalid JSON"},
    {"{\"cmd\": \"get\"} x", 0, NULL, NULL, "invalid JSON"},
    {"{\"cmd\": \"get\"", 0, NULL, NULL, "invalid JSON"},
    {"[\"get\"]", 0, NULL, NULL, "a request is a JSON object"},
    {"\"get\"", 0, NULL, NULL, "a request is a JSON object"},
    {"{\"id\": 7}", 0, NULL, "7", "missing \"cmd\""},
    {"{\"id\": 7, \"cmd\": \"\"}", 0, NULL, "7", "missing \"cmd\""},
    {"{\"id\": 7, \"cmd\": 5}", 0, NULL, "7", "missing \"cmd\""},
    {"{\"id\": {}, \"cmd\": \"get\"}", 0, NULL, NULL, "\"id\" must be"},
    {"{\"id\": [1], \"cmd\": \"get\"}", 0, NULL, NULL, "\"id\" must be"},
    {"{\"id\": 3, \"cmd\": \"get\", \"extra\": 1}", 0, NULL, "3", "unknown member \"extra\""},
    {"{\"id\": 3, \"cmd\": \"get\", \"cmd\": \"set\"}", 0, NULL, "3", "member \"cmd\" given twice"},
};

static void test_requests(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof req_cases / sizeof req_cases[0]; i++) {
        const req_case_t *rc = &req_cases[i];
        mk_ctl_request_t req;
        char err[256] = "";
        int r = mk_ctl_request_parse(rc->line, strlen(rc->line), &req, err, sizeof err);
        if ((r == 0) != rc->ok)
            fail_msg("case %zu (%s): rc %d (%s)", i, rc->line, r, err);
        if (rc->ok) {
            assert_string_equal(req.cmd, rc->cmd);
        } else {
            assert_int_equal(r, MK_EFORMAT);
            if (!strstr(err, rc->err))
                fail_msg("case %zu: '%s' lacks '%s'", i, err, rc->err);
        }
        if (rc->id) {
            assert_non_null(req.id);
            char *p = cJSON_PrintUnformatted(req.id);
            assert_string_equal(p, rc->id);
            free(p);
        } else {
            assert_null(req.id);
        }
        mk_ctl_request_free(&req);
    }
}

/* A message line: ends with one newline and holds no other, parses as JSON. */
static cJSON *parse_line(char *line)
{
    assert_non_null(line);
    size_t n = strlen(line);
    assert_true(n >= 2 && line[n - 1] == '\n');
    assert_null(memchr(line, '\n', n - 1));
    cJSON *j = cJSON_Parse(line);
    assert_non_null(j);
    free(line);
    return j;
}

static void test_messages(void **state)
{
    (void)state;
    cJSON *id = cJSON_CreateString("req\n1");
    cJSON *res = cJSON_CreateObject();
    cJSON_AddStringToObject(res, "text", "two\nlines");
    cJSON *j = parse_line(mk_ctl_reply_ok(id, res));
    assert_string_equal(cJSON_GetObjectItem(j, "id")->valuestring, "req\n1");
    assert_true(cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")));
    assert_string_equal(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "result"), "text")->valuestring, "two\nlines");
    cJSON_Delete(j);

    j = parse_line(mk_ctl_reply_ok(NULL, NULL));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "id")));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "result")));
    cJSON_Delete(j);

    cJSON *errors = cJSON_CreateArray();
    cJSON_AddItemToArray(errors, cJSON_CreateString("x"));
    j = parse_line(mk_ctl_reply_error(id, MK_CTL_EBAD_VALUE, "grabcut.iterations: bad", errors));
    assert_false(cJSON_IsTrue(cJSON_GetObjectItem(j, "ok")));
    cJSON *e = cJSON_GetObjectItem(j, "error");
    assert_string_equal(cJSON_GetObjectItem(e, "class")->valuestring, "bad-value");
    assert_string_equal(cJSON_GetObjectItem(e, "desc")->valuestring, "grabcut.iterations: bad");
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(e, "errors")), 1);
    cJSON_Delete(j);
    j = parse_line(mk_ctl_reply_error(NULL, MK_CTL_EBUSY, "full", NULL));
    assert_null(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "error"), "errors"));
    cJSON_Delete(j);
    cJSON_Delete(id);

    static const char *const caps[] = {"get", "set", NULL}, *const evs[] = {"stats", NULL};
    j = parse_line(mk_ctl_greeting("9.9", caps, evs));
    cJSON *m = cJSON_GetObjectItem(j, "maskd");
    assert_string_equal(cJSON_GetObjectItem(m, "version")->valuestring, "9.9");
    assert_int_equal(cJSON_GetObjectItem(m, "protocol")->valueint, MK_CTL_PROTOCOL);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(m, "capabilities")), 2);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(m, "events"), 0)->valuestring, "stats");
    cJSON_Delete(j);

    cJSON *data = cJSON_CreateObject();
    cJSON_AddNumberToObject(data, "fps", 29.5);
    j = parse_line(mk_ctl_event("stats", data));
    assert_string_equal(cJSON_GetObjectItem(j, "event")->valuestring, "stats");
    assert_true(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "data"), "fps")->valuedouble == 29.5);
    cJSON_Delete(j);
    cJSON_Delete(data);
    j = parse_line(mk_ctl_event("state", NULL));
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(j, "data")));
    cJSON_Delete(j);

    /* A request built here parses back on the server side. */
    cJSON *rid = cJSON_CreateNumber(12);
    cJSON *args = cJSON_CreateArray();
    cJSON_AddItemToArray(args, cJSON_CreateString("grabcut"));
    char *line = mk_ctl_request(rid, "get", args);
    cJSON_Delete(rid);
    line[strlen(line) - 1] = '\0';
    mk_ctl_request_t req;
    char err[128];
    assert_int_equal(mk_ctl_request_parse(line, strlen(line), &req, err, sizeof err), 0);
    assert_string_equal(req.cmd, "get");
    assert_int_equal(req.id->valueint, 12);
    assert_string_equal(cJSON_GetArrayItem(req.args, 0)->valuestring, "grabcut");
    mk_ctl_request_free(&req);
    free(line);

    for (int c = 0; c < MK_CTL_ECLASSES; c++)
        assert_int_equal(mk_ctl_eclass_parse(mk_ctl_eclass_name((mk_ctl_eclass_t)c)), c);
    assert_string_equal(mk_ctl_eclass_name(MK_CTL_ERESTART), "restart-required");
    assert_string_equal(mk_ctl_eclass_name(MK_CTL_EUNKNOWN_CMD), "unknown-command");
    assert_int_equal(mk_ctl_eclass_parse("nope"), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_framing),
        cmocka_unit_test(test_requests),
        cmocka_unit_test(test_messages),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
