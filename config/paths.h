/* paths: where an instance's files live — the runtime directory with the control socket, the config file — decided
 * in this one place for maskd (which creates them) and its clients (which look them up).
 *
 *   instance      "video0" for maskd@video0; MK_DEFAULT_INSTANCE when none is given. The frame bus is
 *                 /maskd.INSTANCE; names are 1..64 characters of [A-Za-z0-9_.@-], not starting with '.'.
 *   runtime dir   $RUNTIME_DIRECTORY (systemd's RuntimeDirectory=, first entry) when set, else
 *                 /run/maskd/INSTANCE; when that cannot be created or written (not root), and
 *                 $XDG_RUNTIME_DIR is set: $XDG_RUNTIME_DIR/maskd/INSTANCE.
 *   socket        RUNTIME_DIR/control.sock
 *   config file   /etc/maskd/INSTANCE.json when it exists, else /etc/maskd/maskd.json
 * Thread rules: reentrant; reads the environment. */
#ifndef MK_PATHS_H
#define MK_PATHS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MK_DEFAULT_INSTANCE "default"
#define MK_PATHS_RUN_DIR "/run/maskd"
#define MK_PATHS_CONFIG_DIR "/etc/maskd"
#define MK_PATHS_SOCKET_NAME "control.sock"

/* 0 when `instance` is a valid instance name, else MK_EINVAL with a message. */
int mk_paths_instance_check(const char *instance);

/* maskd: the runtime directory of `instance`, created (mode 0755, parents as needed) when missing. `out`
 * receives the path. MK_EIO with a message naming every place tried when none is usable. */
int mk_paths_runtime_dir(const char *instance, char *out, size_t n);

/* Clients: the control socket of `instance` (NULL: MK_DEFAULT_INSTANCE, and $RUNTIME_DIRECTORY is tried first, as
 * for a client run by the unit itself). Returns 0 with the first candidate that exists as a socket; else MK_EIO
 * with `out` set to the first candidate and a message naming every place tried. */
int mk_paths_control_socket(const char *instance, char *out, size_t n);

/* maskd: the default config file of `instance` (see above); `out` receives the path even when the file does not
 * exist (returns MK_EIO then). */
int mk_paths_config_file(const char *instance, char *out, size_t n);

/* The same two lookups with `run_dir` in place of MK_PATHS_RUN_DIR (for tests). */
int mk_paths_runtime_dir_at(const char *run_dir, const char *instance, char *out, size_t n);
int mk_paths_control_socket_at(const char *run_dir, const char *instance, char *out, size_t n);

#ifdef __cplusplus
}
#endif
#endif
