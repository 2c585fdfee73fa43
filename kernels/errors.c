/* errors: code names and the thread-local error message. */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

enum { MSG_MAX = 512 };
static _Thread_local char msg[MSG_MAX];

static const struct {
    int code;
    const char *name, *desc;
} table[] = {
    {MK_OK, "MK_OK", "success"},
    {MK_EINVAL, "MK_EINVAL", "invalid argument"},
    {MK_ERANGE, "MK_ERANGE", "value out of range"},
    {MK_ENOMEM, "MK_ENOMEM", "out of memory"},
    {MK_EIO, "MK_EIO", "input/output error"},
    {MK_EFORMAT, "MK_EFORMAT", "malformed or truncated data"},
    {MK_EUNSUPPORTED, "MK_EUNSUPPORTED", "not supported"},
    {MK_ENODEV, "MK_ENODEV", "no usable device"},
    {MK_ECUDA, "MK_ECUDA", "CUDA error"},
    {MK_ECUDNN, "MK_ECUDNN", "cuDNN error"},
    {MK_ESTATE, "MK_ESTATE", "invalid state"},
};

const char *mk_err_name(int code)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].code == code)
            return table[i].name;
    return "MK_E?";
}

const char *mk_err_str(int code)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (table[i].code == code)
            return table[i].desc;
    return "unknown error";
}

int mk_err_set(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return code;
}

int mk_err_wrap(int code, const char *fmt, ...)
{
    char prefix[MSG_MAX], joined[2 * MSG_MAX + 2];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    snprintf(joined, sizeof joined, "%s: %s", prefix, msg[0] ? msg : mk_err_str(code));
    snprintf(msg, sizeof msg, "%.*s", MSG_MAX - 1, joined);
    return code;
}

const char *mk_err_msg(void)
{
    return msg;
}

void mk_err_clear(void)
{
    msg[0] = '\0';
}
