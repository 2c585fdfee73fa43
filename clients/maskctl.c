/* maskctl: command-line client of maskd's control socket — get, set, list, stats, subscribe, reload, version. */
#include "config.h"
#include "ctlproto.h"
#include "errors.h"
#include "paths.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { EXIT_REFUSED = 1, EXIT_USAGE = 2, EXIT_CONN = 3 };

static volatile sig_atomic_t stop;

static void on_signal(int sig)
{
    (void)sig;
    stop = 1;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: maskctl [options] COMMAND [ARG...]\n"
            "Talks to a running maskd through its control socket.\n"
            "\n"
            "Commands:\n"
            "  get [KEY...]          option values (KEY: a name such as grabcut.iterations, a section such as\n"
            "                        grabcut, or *; none: all)\n"
            "  set KEY=VALUE...      change live options; all are validated together and applied at once at the\n"
            "                        next frame, or none is (every bad key is reported)\n"
            "  list [KEY...]         the options: value, type and range, default, live or restart-only, description\n"
            "  stats                 the daemon's statistics\n"
            "  subscribe [EVENT...]  print events as they arrive (stats, detections, state; none: all) until\n"
            "                        interrupted or --count events\n"
            "  reload                re-read the config file\n"
            "  version               versions of maskd and of the protocol\n"
            "  help                  the commands the daemon knows\n"
            "\n"
            "Options (before the command):\n"
            "  --socket PATH         the control socket\n"
            "  --instance NAME       the maskd instance (default: the control socket of instance \"" MK_DEFAULT_INSTANCE
            "\" or\n"
            "                        $RUNTIME_DIRECTORY's); its socket is " MK_PATHS_RUN_DIR "/NAME/" MK_PATHS_SOCKET_NAME
            ", or\n"
            "                        $XDG_RUNTIME_DIR/maskd/NAME/" MK_PATHS_SOCKET_NAME " for a maskd run as a user\n"
            "  --json                print the daemon's JSON replies (subscribe: its events) unchanged, one per line\n"
            "  --timeout S           seconds to wait for the daemon (default 10; 0: no limit)\n"
            "  --count N             subscribe: stop after N events\n"
            "  -h, --help            this text\n"
            "Exit codes: 0 done, 1 the daemon refused the request, 2 bad usage, 3 no connection (or it broke).\n");
}

typedef struct {
    int fd, json, timeout_ms;
    mk_ctl_linebuf_t lb;
} conn_t;

static int die_conn(const char *what)
{
    fprintf(stderr, "maskctl: %s%s%s\n", what, mk_err_msg()[0] ? ": " : "", mk_err_msg());
    return EXIT_CONN;
}

/* Prints an error reply ("error": {"class", "desc", "errors"}) to stderr. */
static void print_error(const cJSON *reply)
{
    const cJSON *e = cJSON_GetObjectItemCaseSensitive(reply, "error");
    const cJSON *cls = cJSON_GetObjectItemCaseSensitive(e, "class");
    const cJSON *desc = cJSON_GetObjectItemCaseSensitive(e, "desc");
    const cJSON *list = cJSON_GetObjectItemCaseSensitive(e, "errors"), *item;
    const char *c = cJSON_IsString(cls) ? cls->valuestring : "error";
    if (cJSON_IsArray(list) && cJSON_GetArraySize(list) > 0) {
        cJSON_ArrayForEach(item, list) {
            const cJSON *ic = cJSON_GetObjectItemCaseSensitive(item, "class");
            const cJSON *id = cJSON_GetObjectItemCaseSensitive(item, "desc");
            fprintf(stderr, "maskctl: %s: %s\n", cJSON_IsString(ic) ? ic->valuestring : c,
                    cJSON_IsString(id) ? id->valuestring : "?");
        }
        return;
    }
    fprintf(stderr, "maskctl: %s: %s\n", c, cJSON_IsString(desc) ? desc->valuestring : "?");
}

/* A value as a person reads it: strings bare, the rest as JSON. */
static void print_value(FILE *f, const cJSON *v)
{
    if (cJSON_IsString(v)) {
        fputs(v->valuestring, f);
        return;
    }
    char *s = cJSON_PrintUnformatted(v);
    fputs(s ? s : "?", f);
    free(s);
}

/* Nested objects as "a.b = value" lines (or "a.b=value" words on one line when inline). */
static void print_flat(const cJSON *obj, const char *prefix, int inline_)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, obj) {
        char key[512];
        snprintf(key, sizeof key, "%s%s%s", prefix, *prefix ? "." : "", c->string ? c->string : "");
        if (cJSON_IsObject(c) && c->child) {
            print_flat(c, key, inline_);
            continue;
        }
        printf(inline_ ? " %s=" : "%s = ", key);
        print_value(stdout, c);
        if (!inline_)
            putchar('\n');
    }
}

static void print_list(const cJSON *arr)
{
    const cJSON *o;
    cJSON_ArrayForEach(o, arr) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(o, "name");
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
        const cJSON *expected = cJSON_GetObjectItemCaseSensitive(o, "expected");
        const cJSON *def = cJSON_GetObjectItemCaseSensitive(o, "default");
        const cJSON *doc = cJSON_GetObjectItemCaseSensitive(o, "doc");
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(o, "value");
        printf("%s = ", cJSON_IsString(name) ? name->valuestring : "?");
        print_value(stdout, value);
        printf("  (%s: %s; default ", cJSON_IsString(type) ? type->valuestring : "?",
               cJSON_IsString(expected) ? expected->valuestring : "?");
        print_value(stdout, def);
        printf("; %s)\n    %s\n", cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(o, "live")) ? "live" : "restart-only",
               cJSON_IsString(doc) ? doc->valuestring : "");
    }
}

static void print_result(const char *cmd, const cJSON *res)
{
    if (!strcmp(cmd, "list")) {
        print_list(res);
    } else if (!strcmp(cmd, "set")) {
        print_flat(cJSON_GetObjectItemCaseSensitive(res, "applied"), "", 0);
        const cJSON *n = cJSON_GetObjectItemCaseSensitive(res, "changed");
        if (cJSON_IsNumber(n) && n->valuedouble == 0)
            printf("(no value changed)\n");
    } else if (!strcmp(cmd, "version")) {
        const cJSON *v = cJSON_GetObjectItemCaseSensitive(res, "version");
        const cJSON *p = cJSON_GetObjectItemCaseSensitive(res, "protocol");
        printf("maskd %s, control protocol %d (maskctl %s)\n", cJSON_IsString(v) ? v->valuestring : "?",
               cJSON_IsNumber(p) ? p->valueint : 0, MASKD_VERSION);
    } else if (!strcmp(cmd, "help")) {
        const cJSON *c;
        cJSON_ArrayForEach(c, cJSON_GetObjectItemCaseSensitive(res, "commands")) {
            const cJSON *name = cJSON_GetObjectItemCaseSensitive(c, "name");
            const cJSON *args = cJSON_GetObjectItemCaseSensitive(c, "args");
            const cJSON *doc = cJSON_GetObjectItemCaseSensitive(c, "doc");
            char head[128];
            snprintf(head, sizeof head, "%s %s", cJSON_IsString(name) ? name->valuestring : "?",
                     cJSON_IsString(args) ? args->valuestring : "");
            printf("  %-34s %s\n", head, cJSON_IsString(doc) ? doc->valuestring : "");
        }
    } else if (!strcmp(cmd, "subscribe")) {
        printf("subscribed to:");
        const cJSON *e;
        cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(res, "events")) {
            putchar(' ');
            print_value(stdout, e);
        }
        putchar('\n');
    } else if (cJSON_IsObject(res)) {
        print_flat(res, "", 0);
    } else {
        print_value(stdout, res);
        putchar('\n');
    }
}

/* Reads the next line as JSON (NULL: connection problem, message printed). raw receives the line. */
static cJSON *next_message(conn_t *c, char **raw)
{
    size_t len;
    int r;
    while ((r = mk_ctl_read_line(c->fd, &c->lb, c->timeout_ms, raw, &len)) != MK_CTL_LINE) {
        if (r == MK_CTL_OVERSIZE)
            fprintf(stderr, "maskctl: skipped a message longer than the line buffer\n");
        if (r < 0 || stop)
            break;
    }
    if (r != MK_CTL_LINE) {
        if (!stop)
            die_conn("no reply");
        return NULL;
    }
    cJSON *j = cJSON_ParseWithLength(*raw, len);
    if (!j)
        fprintf(stderr, "maskctl: the daemon sent something that is not JSON: %.80s\n", *raw);
    return j;
}

/* The JSON value maskctl sends for KEY=VALUE: typed through the option table when the key is known here and the
 * value valid; otherwise (an unknown key, maybe of a newer daemon, or a bad value for the daemon to explain)
 * VALUE as JSON when it parses as such, else as a string. */
static cJSON *value_for(const char *key, const char *text, mk_config_t *scratch)
{
    const mk_opt_t *o = mk_options_find(key);
    if (o && mk_opt_parse_text(o, text, scratch, NULL, 0) == 0)
        return mk_opt_to_json(o, scratch);
    cJSON *j = cJSON_Parse(text);
    return j ? j : cJSON_CreateString(text);
}

static cJSON *build_args(const char *cmd, int argc, char **argv, int *bad)
{
    *bad = 0;
    if (!strcmp(cmd, "set")) {
        if (argc == 0) {
            fprintf(stderr, "maskctl: set needs KEY=VALUE arguments\n");
            *bad = 1;
            return NULL;
        }
        mk_config_t *scratch = malloc(sizeof *scratch);
        cJSON *obj = cJSON_CreateObject();
        if (!scratch || !obj) {
            free(scratch);
            cJSON_Delete(obj);
            *bad = 1;
            return NULL;
        }
        mk_config_defaults(scratch);
        for (int i = 0; i < argc; i++) {
            const char *eq = strchr(argv[i], '=');
            if (!eq || eq == argv[i]) {
                fprintf(stderr, "maskctl: set: expected KEY=VALUE, got '%s'\n", argv[i]);
                *bad = 1;
                break;
            }
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)(eq - argv[i]), argv[i]);
            cJSON_AddItemToObject(obj, key, value_for(key, eq + 1, scratch));
        }
        free(scratch);
        if (*bad) {
            cJSON_Delete(obj);
            return NULL;
        }
        return obj;
    }
    int takes_list = !strcmp(cmd, "get") || !strcmp(cmd, "list") || !strcmp(cmd, "subscribe");
    if (!takes_list) {
        if (argc) {
            fprintf(stderr, "maskctl: %s takes no arguments\n", cmd);
            *bad = 1;
        }
        return NULL;
    }
    if (!argc)
        return NULL;
    cJSON *arr = cJSON_CreateArray();
    for (int i = 0; arr && i < argc; i++)
        cJSON_AddItemToArray(arr, cJSON_CreateString(argv[i]));
    return arr;
}

static int run(conn_t *c, const char *cmd, cJSON *args, long count)
{
    char *raw;
    cJSON *greeting = next_message(c, &raw);
    if (!greeting) {
        cJSON_Delete(args);
        return EXIT_CONN;
    }
    const cJSON *m = cJSON_GetObjectItemCaseSensitive(greeting, "maskd");
    if (!m) {
        int refused = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(greeting, "ok"));
        if (refused)
            print_error(greeting);
        else
            fprintf(stderr, "maskctl: not a maskd control socket (greeting %.80s)\n", raw);
        cJSON_Delete(greeting);
        cJSON_Delete(args);
        return refused ? EXIT_REFUSED : EXIT_CONN;
    }
    const cJSON *proto = cJSON_GetObjectItemCaseSensitive(m, "protocol");
    if (!cJSON_IsNumber(proto) || proto->valueint != MK_CTL_PROTOCOL) {
        fprintf(stderr, "maskctl: the daemon speaks control protocol %d, this maskctl %d\n",
                cJSON_IsNumber(proto) ? proto->valueint : -1, MK_CTL_PROTOCOL);
        cJSON_Delete(greeting);
        cJSON_Delete(args);
        return EXIT_CONN;
    }
    cJSON_Delete(greeting);

    cJSON *id = cJSON_CreateNumber(1);
    char *req = mk_ctl_request(id, cmd, args);
    cJSON_Delete(id);
    if (!req || mk_ctl_write_all(c->fd, req, strlen(req)) != 0) {
        free(req);
        return die_conn("sending the request");
    }
    free(req);

    int is_sub = !strcmp(cmd, "subscribe"), rc = -1;
    long events = 0;
    while (rc < 0 || (is_sub && rc == 0 && !stop && (count <= 0 || events < count))) {
        cJSON *msg = next_message(c, &raw);
        if (!msg && stop && rc == 0)
            return 0; /* a subscriber interrupted */
        if (!msg) {
            if (stop)
                fprintf(stderr, "maskctl: interrupted before the reply\n");
            return EXIT_CONN;
        }
        const cJSON *ev = cJSON_GetObjectItemCaseSensitive(msg, "event");
        if (cJSON_IsString(ev)) {
            if (is_sub && rc == 0) {
                if (c->json) {
                    puts(raw);
                } else {
                    printf("%s", ev->valuestring);
                    const cJSON *data = cJSON_GetObjectItemCaseSensitive(msg, "data");
                    if (cJSON_IsObject(data))
                        print_flat(data, "", 1);
                    else if (data && !cJSON_IsNull(data)) {
                        putchar(' ');
                        print_value(stdout, data);
                    }
                    putchar('\n');
                }
                fflush(stdout);
                events++;
            }
            cJSON_Delete(msg);
            continue;
        }
        const cJSON *rid = cJSON_GetObjectItemCaseSensitive(msg, "id");
        if (!cJSON_IsNumber(rid) || rid->valueint != 1) {
            cJSON_Delete(msg);
            continue;
        }
        if (!cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(msg, "ok"))) {
            if (c->json)
                puts(raw);
            else
                print_error(msg);
            cJSON_Delete(msg);
            return EXIT_REFUSED;
        }
        if (c->json && !is_sub)
            puts(raw);
        else if (!c->json)
            print_result(cmd, cJSON_GetObjectItemCaseSensitive(msg, "result"));
        fflush(stdout);
        cJSON_Delete(msg);
        rc = 0;
        if (is_sub)
            c->timeout_ms = -1; /* events may be far apart */
    }
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"socket", required_argument, NULL, 's'}, {"instance", required_argument, NULL, 'i'},
        {"json", no_argument, NULL, 'j'},         {"timeout", required_argument, NULL, 't'},
        {"count", required_argument, NULL, 'n'},  {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *socket_path = NULL, *instance = NULL;
    conn_t c = {.fd = -1, .timeout_ms = 10000};
    long count = 0;
    int opt;
    while ((opt = getopt_long(argc, argv, "+h", opts, NULL)) != -1) {
        char *end;
        switch (opt) {
        case 's':
            socket_path = optarg;
            break;
        case 'i':
            instance = optarg;
            break;
        case 'j':
            c.json = 1;
            break;
        case 't': {
            double t = strtod(optarg, &end);
            if (*end || end == optarg || t < 0 || t > 86400) {
                fprintf(stderr, "maskctl: --timeout: expected seconds 0..86400, got '%s'\n", optarg);
                return EXIT_USAGE;
            }
            c.timeout_ms = t == 0 ? -1 : (int)(t * 1000);
            break;
        }
        case 'n':
            count = strtol(optarg, &end, 10);
            if (*end || end == optarg || count < 1) {
                fprintf(stderr, "maskctl: --count: expected a positive number, got '%s'\n", optarg);
                return EXIT_USAGE;
            }
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        usage(stderr);
        return EXIT_USAGE;
    }
    if (socket_path && instance) {
        fprintf(stderr, "maskctl: --socket and --instance exclude each other\n");
        return EXIT_USAGE;
    }
    const char *cmd = argv[optind];
    static const char *const known[] = {"get", "set", "list", "stats", "subscribe", "reload", "version", "help"};
    size_t k = 0;
    while (k < sizeof known / sizeof known[0] && strcmp(cmd, known[k]))
        k++;
    if (k == sizeof known / sizeof known[0]) {
        fprintf(stderr, "maskctl: unknown command '%s' (maskctl --help lists them)\n", cmd);
        return EXIT_USAGE;
    }
    int bad;
    cJSON *args = build_args(cmd, argc - optind - 1, argv + optind + 1, &bad);
    if (bad)
        return EXIT_USAGE;

    char path[4096];
    if (socket_path) {
        snprintf(path, sizeof path, "%s", socket_path);
    } else if (mk_paths_control_socket(instance, path, sizeof path) != 0) {
        cJSON_Delete(args);
        return die_conn("cannot find maskd");
    }
    struct sigaction sa = {.sa_handler = on_signal};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    if ((c.fd = mk_ctl_connect(path)) < 0) {
        cJSON_Delete(args);
        return die_conn("cannot connect");
    }
    if (mk_ctl_linebuf_init(&c.lb, 64u << 20) != 0) {
        close(c.fd);
        cJSON_Delete(args);
        return die_conn("line buffer");
    }
    int rc = run(&c, cmd, args, count);
    mk_ctl_linebuf_free(&c.lb);
    close(c.fd);
    return rc;
}
