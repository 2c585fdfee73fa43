/* paths: runtime directory, control socket and config file locations of an instance. */
#include "paths.h"

#include "errors.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { PATH_LEN = 4096 };

int mk_paths_instance_check(const char *instance)
{
    size_t len = instance ? strlen(instance) : 0;
    if (len < 1 || len > 64 || instance[0] == '.' ||
        strspn(instance, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.@-") != len)
        return mk_err_set(MK_EINVAL, "bad instance name '%s': 1..64 characters of [A-Za-z0-9_.@-], not starting with '.'",
                          instance ? instance : "(null)");
    return 0;
}

/* mkdir -p; 0 or an errno value. */
static int make_dirs(const char *path, mode_t mode)
{
    char buf[PATH_LEN];
    size_t len = strlen(path);
    if (len == 0 || len >= sizeof buf)
        return ENAMETOOLONG;
    memcpy(buf, path, len + 1);
    for (char *p = buf + 1;; p++) {
        if (*p == '/' || *p == '\0') {
            char c = *p;
            *p = '\0';
            if (mkdir(buf, mode) != 0 && errno != EEXIST)
                return errno;
            *p = c;
            if (!c)
                break;
        }
    }
    struct stat st;
    if (stat(path, &st) != 0)
        return errno;
    if (!S_ISDIR(st.st_mode))
        return ENOTDIR;
    return access(path, W_OK | X_OK) == 0 ? 0 : errno;
}

/* The first entry of a colon-separated list, or NULL when the variable is unset or empty. */
static const char *first_entry(const char *var, char *buf, size_t n)
{
    const char *v = getenv(var);
    if (!v || !*v)
        return NULL;
    snprintf(buf, n, "%.*s", (int)strcspn(v, ":"), v);
    return buf;
}

static int set_path(char *out, size_t n, const char *fmt, const char *a, const char *b)
{
    int len = snprintf(out, n, fmt, a, b);
    return len < 0 || (size_t)len >= n ? mk_err_set(MK_ERANGE, "path too long") : 0;
}

int mk_paths_runtime_dir_at(const char *run_dir, const char *instance, char *out, size_t n)
{
    char env[PATH_LEN], tried[2 * PATH_LEN + 256];
    int rc = mk_paths_instance_check(instance);
    if (rc)
        return rc;
    if (first_entry("RUNTIME_DIRECTORY", env, sizeof env)) {
        if ((rc = set_path(out, n, "%s%s", env, "")))
            return rc;
        int e = make_dirs(out, 0755);
        return e ? mk_err_set(MK_EIO, "runtime directory %s ($RUNTIME_DIRECTORY): %s", out, strerror(e)) : 0;
    }
    if ((rc = set_path(out, n, "%s/%s", run_dir, instance)))
        return rc;
    int e = make_dirs(out, 0755);
    if (!e)
        return 0;
    snprintf(tried, sizeof tried, "%s: %s", out, strerror(e));
    const char *xdg = first_entry("XDG_RUNTIME_DIR", env, sizeof env);
    if (geteuid() != 0 && xdg) {
        char alt[PATH_LEN];
        if ((rc = set_path(alt, sizeof alt, "%s/maskd/%s", xdg, instance)))
            return rc;
        int e2 = make_dirs(alt, 0755);
        if (!e2)
            return set_path(out, n, "%s%s", alt, "");
        size_t len = strlen(tried);
        snprintf(tried + len, sizeof tried - len, "; %s: %s", alt, strerror(e2));
    }
    return mk_err_set(MK_EIO, "no usable runtime directory (%s%s)", tried,
                      geteuid() != 0 && !xdg ? "; $XDG_RUNTIME_DIR is not set" : "");
}

int mk_paths_runtime_dir(const char *instance, char *out, size_t n)
{
    return mk_paths_runtime_dir_at(MK_PATHS_RUN_DIR, instance, out, n);
}

static int is_socket(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISSOCK(st.st_mode);
}

int mk_paths_control_socket_at(const char *run_dir, const char *instance, char *out, size_t n)
{
    char cand[3][PATH_LEN], env[PATH_LEN];
    int count = 0, rc;
    if (!instance) {
        instance = MK_DEFAULT_INSTANCE;
        if (first_entry("RUNTIME_DIRECTORY", env, sizeof env))
            snprintf(cand[count++], PATH_LEN, "%.4000s/" MK_PATHS_SOCKET_NAME, env);
    }
    if ((rc = mk_paths_instance_check(instance)))
        return rc;
    snprintf(cand[count++], PATH_LEN, "%.3000s/%s/" MK_PATHS_SOCKET_NAME, run_dir, instance);
    if (first_entry("XDG_RUNTIME_DIR", env, sizeof env))
        snprintf(cand[count++], PATH_LEN, "%.3000s/maskd/%s/" MK_PATHS_SOCKET_NAME, env, instance);
    for (int i = 0; i < count; i++)
        if (is_socket(cand[i]))
            return set_path(out, n, "%s%s", cand[i], "");
    if ((rc = set_path(out, n, "%s%s", cand[0], "")))
        return rc;
    return mk_err_set(MK_EIO, "no control socket of instance '%s' (looked for %s%s%s%s%s); is maskd running?",
                      instance, cand[0], count > 1 ? ", " : "", count > 1 ? cand[1] : "", count > 2 ? ", " : "",
                      count > 2 ? cand[2] : "");
}

int mk_paths_control_socket(const char *instance, char *out, size_t n)
{
    return mk_paths_control_socket_at(MK_PATHS_RUN_DIR, instance, out, n);
}

int mk_paths_config_file(const char *instance, char *out, size_t n)
{
    int rc = mk_paths_instance_check(instance);
    if (rc)
        return rc;
    if ((rc = set_path(out, n, MK_PATHS_CONFIG_DIR "/%s%s.json", instance, "")))
        return rc;
    if (access(out, F_OK) == 0)
        return 0;
    if ((rc = set_path(out, n, "%s%s", MK_PATHS_CONFIG_DIR "/maskd.json", "")))
        return rc;
    return access(out, F_OK) == 0 ? 0 : mk_err_set(MK_EIO, "no config file (%s/%s.json, %s)", MK_PATHS_CONFIG_DIR,
                                                   instance, out);
}
