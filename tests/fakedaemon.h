/* fakedaemon: an in-process stand-in for maskd's side of the control server (a configuration behind a lock, a
 * "pipeline" thread reaching frame boundaries, stats, reload), for the control server and maskctl tests. */
#ifndef MK_FAKEDAEMON_H
#define MK_FAKEDAEMON_H

#include "config.h"
#include "control.h"

#include <pthread.h>
#include <stdatomic.h>

typedef struct {
    pthread_mutex_t lock;
    mk_config_t cfg;
    mk_opt_hooks_t *hooks;
    int hook_calls, reloads, reload_fail, stats_calls; /* under lock */
    atomic_int frames;
    atomic_int pipeline_on;
    pthread_t pipeline;
    int pipeline_started;
    mk_control_t *srv;
    char dir[64];   /* a private temporary directory (removed by fd_stop) */
    char path[256]; /* the socket */
} fd_daemon_t;

/* Starts a server at `path` (NULL: DIR/control.sock) with `opts` (NULL: the defaults of the option table) and
 * version "test-1.0", and its pipeline thread. Fails the test on error. */
void fd_start(fd_daemon_t *d, const mk_control_opts_t *opts, const char *path);
/* Pipeline thread on (frame boundaries every millisecond) or off (sets wait, then time out). */
void fd_pipeline(fd_daemon_t *d, int on);
void fd_stop(fd_daemon_t *d);
/* The ops the fake daemon implements (user: the fd_daemon_t). */
const mk_control_ops_t *fd_ops(void);
/* A copy of the configuration in force. */
mk_config_t fd_config(fd_daemon_t *d);
int fd_hook_calls(fd_daemon_t *d);

#endif
