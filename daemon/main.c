/* maskd: the daemon's process — options, configuration, the pipeline, the control socket, signals, sd_notify. */
#include "config.h"
#include "control.h"
#include "errors.h"
#include "log.h"
#include "notify.h"
#include "paths.h"
#include "pipeline.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char *instance;
    char config_path[4096];
    int config_explicit;         /* --config given: the file must exist */
    char **overrides;            /* "key=value": --set, then --source and --backend */
    int noverrides;
    mk_pipeline_t *pipe;
    mk_control_t *ctl;
} daemon_t;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: maskd [options]\n"
            "Publishes person masks of a camera (or a file, or the built-in test pattern) on the frame bus\n"
            "/maskd.INSTANCE and serves the control socket RUNTIME_DIR/control.sock (see maskctl, maskcat).\n"
            "\n"
            "  --config FILE        configuration file (default: " MK_PATHS_CONFIG_DIR "/INSTANCE.json if it\n"
            "                       exists, else " MK_PATHS_CONFIG_DIR "/maskd.json if it exists, else the built-in\n"
            "                       defaults)\n"
            "  --instance NAME      instance name: the bus /maskd.NAME, the runtime directory\n"
            "                       (default \"" MK_DEFAULT_INSTANCE "\")\n"
            "  --runtime-dir DIR    where control.sock lives (default: $RUNTIME_DIRECTORY, else " MK_PATHS_RUN_DIR "/NAME,\n"
            "                       else $XDG_RUNTIME_DIR/maskd/NAME)\n"
            "  --source SPEC        testpattern, v4l2:/dev/videoN or file:PATH (sets source.spec)\n"
            "  --backend B          auto, cpu or cuda (sets backend)\n"
            "  --set KEY=VALUE      sets an option (repeatable; `maskd --print-config` lists them)\n"
            "  --foreground         accepted for scripts: maskd never forks (systemd Type=notify)\n"
            "  --print-config       prints the effective configuration as JSON and exits\n"
            "  --check-config FILE  checks a configuration file, prints each error, exits 0 (valid) or 1\n"
            "  --version            prints the version and exits\n"
            "  -h, --help           this text\n"
            "Signals: SIGTERM/SIGINT stop (the current frame is finished, the bus is closed, the socket removed);\n"
            "SIGHUP re-reads the configuration file (an invalid file keeps the configuration in force).\n"
            "Environment: MASKD_LOG=error|warn|info|debug|trace overrides log.level.\n");
}

/* ---- configuration --------------------------------------------------------------------------------------- */

/* The configuration file (when there is one) over the defaults, then the command line's overrides. On failure
 * the errors are logged at `level` and *out is unchanged. */
static int build_config(const daemon_t *d, mk_log_level_t level, mk_config_t *out)
{
    return mk_config_build(d->config_path, d->config_explicit, d->overrides, d->noverrides, (int)level, out);
}

/* Reload: the file and the overrides again; the live options that differ from the configuration in force are
 * applied at the pipeline's next frame boundary, restart-only ones are reported and keep their values. */
static int reload(daemon_t *d, cJSON **result)
{
    mk_config_t *cand = malloc(sizeof *cand), *cur = malloc(sizeof *cur);
    int rc = cand && cur ? 0 : mk_err_set(MK_ENOMEM, "out of memory");
    if (!rc && (rc = build_config(d, MK_LOG_WARN, cand)))
        MK_WARN("reload: keeping the configuration in force: %s", mk_err_msg());
    mk_config_txn_t *t = NULL;
    cJSON *restart = NULL;
    if (!rc) {
        mk_pipeline_get_config(d->pipe, cur);
        t = mk_config_txn_new(cur, MK_CFG_TXN_LIVE);
        restart = cJSON_CreateArray();
        if (!t || !restart)
            rc = mk_err_set(MK_ENOMEM, "out of memory");
    }
    for (int i = 0; !rc && i < mk_options_count(); i++) {
        const mk_opt_t *o = mk_options_at(i);
        if (mk_opt_equal(o, cand, cur))
            continue;
        if (!(o->flags & MK_OPT_LIVE)) {
            MK_WARN("reload: %s changed; it takes effect when maskd restarts", o->name);
            cJSON_AddItemToArray(restart, cJSON_CreateString(o->name));
            continue;
        }
        cJSON *v = mk_opt_to_json(o, cand);
        mk_config_txn_set_json(t, o->name, v);
        cJSON_Delete(v);
    }
    if (!rc && mk_config_txn_nerrors(t)) {
        mk_config_txn_log_errors(t, MK_LOG_WARN, "reload: ");
        rc = mk_config_txn_failure(t, "reload");
    }
    if (!rc) {
        mk_control_opts_t co;
        mk_control_opts_from_config(&co, cur);
        if ((rc = mk_pipeline_apply(d->pipe, t, co.set_timeout_ms)) < 0)
            MK_WARN("reload: keeping the configuration in force: %s", mk_err_msg());
    }
    if (rc >= 0) {
        MK_INFO("reloaded %s: %d option%s changed%s", access(d->config_path, F_OK) ? "the defaults" : d->config_path,
                rc, rc == 1 ? "" : "s", cJSON_GetArraySize(restart) ? "; some need a restart" : "");
        if (result) {
            cJSON *r = cJSON_CreateObject();
            cJSON_AddStringToObject(r, "file", access(d->config_path, F_OK) ? "" : d->config_path);
            cJSON_AddNumberToObject(r, "changed", rc);
            cJSON_AddItemToObject(r, "applied", mk_config_txn_to_json(t));
            cJSON_AddItemToObject(r, "restart_required", restart);
            restart = NULL;
            *result = r;
        }
        rc = 0;
    }
    cJSON_Delete(restart);
    mk_config_txn_free(t);
    free(cand);
    free(cur);
    return rc;
}

/* ---- the control server's view of the daemon ------------------------------------------------------------------ */

static int op_get_config(void *user, mk_config_t *out)
{
    daemon_t *d = user;
    mk_pipeline_get_config(d->pipe, out);
    return 0;
}

static int op_set_config(void *user, const mk_config_txn_t *txn)
{
    daemon_t *d = user;
    return mk_pipeline_commit(d->pipe, txn);
}

static cJSON *op_stats(void *user)
{
    daemon_t *d = user;
    cJSON *s = mk_pipeline_stats(d->pipe);
    if (!s)
        mk_err_set(MK_ENOMEM, "out of memory");
    else if (d->ctl)
        cJSON_AddItemToObject(s, "control", mk_control_stats(d->ctl));
    return s;
}

static int op_reload(void *user, cJSON **result)
{
    return reload(user, result);
}

static const mk_control_ops_t control_ops = {op_get_config, op_set_config, op_stats, op_reload};

/* ---- main ---------------------------------------------------------------------------------------------------- */

static int add_override(daemon_t *d, const char *key, const char *value)
{
    char **n = realloc(d->overrides, (size_t)(d->noverrides + 1) * sizeof *n);
    if (!n)
        return -1;
    d->overrides = n;
    size_t len = strlen(key) + (value ? strlen(value) + 1 : 0) + 1;
    if (!(n[d->noverrides] = malloc(len)))
        return -1;
    snprintf(n[d->noverrides], len, "%s%s%s", key, value ? "=" : "", value ? value : "");
    d->noverrides++;
    return 0;
}

/* The command line's overrides and the configuration, at every exit of main (LeakSanitizer runs the tests). */
static void free_startup(daemon_t *d, mk_config_t *cfg)
{
    for (int i = 0; i < d->noverrides; i++)
        free(d->overrides[i]);
    free(d->overrides);
    d->overrides = NULL;
    d->noverrides = 0;
    free(cfg);
}

/* mkdir -p for --runtime-dir. */
static int make_dir(const char *path)
{
    char buf[4096];
    if (!path[0]) {
        errno = ENOENT;
        return -1;
    }
    snprintf(buf, sizeof buf, "%s", path);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = '\0';
            if (mkdir(buf, 0755) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return mkdir(buf, 0755) && errno != EEXIST ? -1 : 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},      {"instance", required_argument, NULL, 'i'},
        {"runtime-dir", required_argument, NULL, 'r'}, {"source", required_argument, NULL, 's'},
        {"backend", required_argument, NULL, 'b'},     {"set", required_argument, NULL, 'S'},
        {"foreground", no_argument, NULL, 'f'},        {"print-config", no_argument, NULL, 'p'},
        {"check-config", required_argument, NULL, 'k'}, {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},              {NULL, 0, NULL, 0},
    };
    daemon_t d = {.instance = MK_DEFAULT_INSTANCE};
    const char *runtime_dir = NULL, *source = NULL, *backend = NULL;
    int print_config = 0, opt;
    while ((opt = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (opt) {
        case 'c':
            snprintf(d.config_path, sizeof d.config_path, "%s", optarg);
            d.config_explicit = 1;
            break;
        case 'i': d.instance = optarg; break;
        case 'r': runtime_dir = optarg; break;
        case 's': source = optarg; break;
        case 'b': backend = optarg; break;
        case 'S':
            if (!strchr(optarg, '=')) {
                fprintf(stderr, "maskd: --set needs KEY=VALUE, not '%s'\n", optarg);
                free_startup(&d, NULL);
                return 2;
            }
            if (add_override(&d, optarg, NULL)) {
                free_startup(&d, NULL);
                return 1;
            }
            break;
        case 'f': break;
        case 'p': print_config = 1; break;
        case 'k': free_startup(&d, NULL); return mk_config_check_file(optarg, stderr) == 0 ? 0 : 1;
        case 'V': free_startup(&d, NULL); printf("maskd %s\n", MASKD_VERSION); return 0;
        case 'h': free_startup(&d, NULL); usage(stdout); return 0;
        default: free_startup(&d, NULL); usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, "maskd: unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        free_startup(&d, NULL);
        return 2;
    }
    if (mk_paths_instance_check(d.instance)) {
        fprintf(stderr, "maskd: %s\n", mk_err_msg());
        free_startup(&d, NULL);
        return 2;
    }
    if ((source && add_override(&d, "source.spec", source)) || (backend && add_override(&d, "backend", backend))) {
        free_startup(&d, NULL);
        return 1;
    }
    if (!d.config_explicit)
        mk_paths_config_file(d.instance, d.config_path, sizeof d.config_path);

    mk_config_t *cfg = malloc(sizeof *cfg);
    if (!cfg || build_config(&d, MK_LOG_ERROR, cfg)) {
        fprintf(stderr, "maskd: %s\n", cfg ? mk_err_msg() : "out of memory");
        free_startup(&d, cfg);
        return 1;
    }
    if (print_config) {
        char *s = mk_config_print(cfg, 0);
        const int ok = s != NULL;
        fputs(ok ? s : "", stdout);
        free(s);
        free_startup(&d, cfg);
        return ok ? 0 : 1;
    }
    if (!getenv("MASKD_LOG"))
        mk_log_set_level((mk_log_level_t)cfg->log.level);
    MK_INFO("maskd %s, instance %s, configuration %s", MASKD_VERSION, d.instance,
            access(d.config_path, F_OK) == 0 ? d.config_path : "built in (no file)");

    /* Signals are taken by this thread alone (sigwait); the threads started below inherit the mask. */
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGTERM);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    mk_notify_t *notify = NULL;
    if (mk_notify_open(1, &notify))
        MK_WARN("sd_notify: %s", mk_err_msg());

    char rundir[4096], sock[4200];
    int rc = 0;
    if (runtime_dir) {
        if (make_dir(runtime_dir))
            rc = mk_err_set(MK_EIO, "runtime directory %s: %s", runtime_dir, strerror(errno));
        snprintf(rundir, sizeof rundir, "%s", runtime_dir);
    } else {
        rc = mk_paths_runtime_dir(d.instance, rundir, sizeof rundir);
    }
    snprintf(sock, sizeof sock, "%s/" MK_PATHS_SOCKET_NAME, rundir);

    mk_pipeline_opts_t po = {.instance = d.instance, .notify = notify};
    if (!rc)
        rc = mk_pipeline_create(&po, cfg, &d.pipe);
    if (!rc) {
        mk_control_opts_t co;
        mk_control_opts_from_config(&co, cfg);
        co.path = sock;
        co.version = MASKD_VERSION;
        if (!(rc = mk_control_create(&co, &control_ops, &d, &d.ctl)))
            rc = mk_control_start(d.ctl);
    }
    if (!rc) {
        mk_pipeline_set_control(d.pipe, d.ctl);
        rc = mk_pipeline_start(d.pipe);
    }
    if (rc) {
        MK_ERROR("%s", mk_err_msg());
        fprintf(stderr, "maskd: %s\n", mk_err_msg());
        mk_notify_sendf(notify, "STATUS=failed: %.900s", mk_err_msg());
        mk_control_destroy(d.ctl);
        mk_pipeline_destroy(d.pipe);
        mk_notify_close(notify);
        free_startup(&d, cfg);
        return 1;
    }

    for (;;) {
        siginfo_t si;
        int sig = sigwaitinfo(&sigs, &si);
        if (sig < 0)
            continue;
        if (sig == SIGHUP) {
            MK_INFO("SIGHUP: re-reading the configuration");
            reload(&d, NULL);
            continue;
        }
        if (sig == SIGTERM && si.si_pid == getpid() && mk_pipeline_failed(d.pipe, NULL, 0))
            MK_INFO("stopping: the pipeline failed");
        else
            MK_INFO("%s: stopping", sig == SIGTERM ? "SIGTERM" : "SIGINT");
        break;
    }
    char failed[512];
    int failed_rc = mk_pipeline_failed(d.pipe, failed, sizeof failed);
    mk_notify_send(notify, "STOPPING=1\nSTATUS=stopping");
    mk_pipeline_stop(d.pipe);
    mk_control_destroy(d.ctl);
    d.ctl = NULL;
    mk_pipeline_destroy(d.pipe);
    mk_notify_close(notify);
    free_startup(&d, cfg);
    if (failed_rc) {
        MK_ERROR("stopped: %s", failed);
        return 1;
    }
    MK_INFO("stopped");
    return 0;
}
