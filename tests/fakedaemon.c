/* fakedaemon: the fake daemon behind the control server in tests. */
#include "fakedaemon.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "errors.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static int get_config(void *user, mk_config_t *out)
{
    fd_daemon_t *d = user;
    pthread_mutex_lock(&d->lock);
    *out = d->cfg;
    pthread_mutex_unlock(&d->lock);
    return 0;
}

static int set_config(void *user, const mk_config_txn_t *txn)
{
    fd_daemon_t *d = user;
    pthread_mutex_lock(&d->lock);
    int rc = mk_config_txn_commit(txn, &d->cfg, d->hooks);
    pthread_mutex_unlock(&d->lock);
    return rc;
}

static cJSON *stats(void *user)
{
    fd_daemon_t *d = user;
    pthread_mutex_lock(&d->lock);
    int calls = ++d->stats_calls;
    pthread_mutex_unlock(&d->lock);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "frames", atomic_load(&d->frames));
    cJSON_AddNumberToObject(o, "calls", calls);
    cJSON_AddStringToObject(o, "state", "running");
    cJSON *st = cJSON_AddObjectToObject(o, "stages");
    cJSON_AddNumberToObject(cJSON_AddObjectToObject(st, "capture"), "fps", 30.5);
    return o;
}

static int reload(void *user, cJSON **result)
{
    fd_daemon_t *d = user;
    pthread_mutex_lock(&d->lock);
    int fail = d->reload_fail;
    if (!fail)
        d->reloads++;
    pthread_mutex_unlock(&d->lock);
    (void)result;
    if (fail)
        return mk_err_set(MK_EINVAL, "/etc/maskd/maskd.json: grabcut.iterations: expected integer 1..20, got 0");
    return 0;
}

static void count_hook(void *user, const mk_opt_t *o, const mk_config_t *cfg)
{
    fd_daemon_t *d = user; /* called by mk_config_txn_commit under d->lock */
    (void)o;
    (void)cfg;
    d->hook_calls++;
}

static void *pipeline_main(void *arg)
{
    fd_daemon_t *d = arg;
    while (atomic_load(&d->pipeline_on)) {
        atomic_fetch_add(&d->frames, 1);
        mk_control_apply_pending(d->srv);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

void fd_pipeline(fd_daemon_t *d, int on)
{
    if (on && !d->pipeline_started) {
        atomic_store(&d->pipeline_on, 1);
        assert_int_equal(pthread_create(&d->pipeline, NULL, pipeline_main, d), 0);
        d->pipeline_started = 1;
    } else if (!on && d->pipeline_started) {
        atomic_store(&d->pipeline_on, 0);
        pthread_join(d->pipeline, NULL);
        d->pipeline_started = 0;
    }
}

static const mk_control_ops_t ops = {get_config, set_config, stats, reload};

const mk_control_ops_t *fd_ops(void)
{
    return &ops;
}

void fd_start(fd_daemon_t *d, const mk_control_opts_t *opts, const char *path)
{
    memset(d, 0, sizeof *d);
    pthread_mutex_init(&d->lock, NULL);
    mk_config_defaults(&d->cfg);
    d->hooks = mk_opt_hooks_new();
    assert_int_equal(mk_opt_hooks_set(d->hooks, "*", count_hook, d), 0);
    snprintf(d->dir, sizeof d->dir, "/tmp/mk-ctl-XXXXXX");
    assert_non_null(mkdtemp(d->dir));
    snprintf(d->path, sizeof d->path, "%s", path ? path : d->dir);
    if (!path)
        strcat(d->path, "/control.sock");
    mk_control_opts_t o;
    if (opts)
        o = *opts;
    else
        mk_control_opts_from_config(&o, NULL);
    o.path = d->path;
    o.version = "test-1.0";
    int rc = mk_control_create(&o, &ops, d, &d->srv);
    if (!rc)
        rc = mk_control_start(d->srv);
    if (rc)
        fail_msg("starting the control server: %s", mk_err_msg());
    fd_pipeline(d, 1);
}

void fd_stop(fd_daemon_t *d)
{
    fd_pipeline(d, 0);
    mk_control_destroy(d->srv);
    d->srv = NULL;
    mk_opt_hooks_free(d->hooks);
    rmdir(d->dir);
    pthread_mutex_destroy(&d->lock);
}

mk_config_t fd_config(fd_daemon_t *d)
{
    pthread_mutex_lock(&d->lock);
    mk_config_t c = d->cfg;
    pthread_mutex_unlock(&d->lock);
    return c;
}

int fd_hook_calls(fd_daemon_t *d)
{
    pthread_mutex_lock(&d->lock);
    int n = d->hook_calls;
    pthread_mutex_unlock(&d->lock);
    return n;
}
