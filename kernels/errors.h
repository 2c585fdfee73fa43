/* errors: the project's named error codes and the per-thread error message. */
#ifndef MK_ERRORS_H
#define MK_ERRORS_H

#ifdef __cplusplus
extern "C" {
#endif

/* 0 is success; every failure is one of these negative codes. Callers branch on the code; people read the
 * message, which the failing function records with mk_err_set() for the calling thread. */
enum {
    MK_OK = 0,
    MK_EINVAL = -1,       /* an argument is invalid (NULL, zero size, mismatched pitch, wrong format) */
    MK_ERANGE = -2,       /* a value is outside its allowed range */
    MK_ENOMEM = -3,       /* host or device allocation failed */
    MK_EIO = -4,          /* a file or device could not be read or written */
    MK_EFORMAT = -5,      /* input data is malformed, corrupt or truncated */
    MK_EUNSUPPORTED = -6, /* a valid request this build or backend does not support */
    MK_ENODEV = -7,       /* no usable device (no GPU, or CUDA not compiled in) */
    MK_ECUDA = -8,        /* a CUDA runtime call failed */
    MK_ECUDNN = -9,       /* a cuDNN call failed */
    MK_ESTATE = -10,      /* the object is not in a state that allows the call */
};

/* "MK_EINVAL" etc.; "MK_E?" for an unknown code. Never NULL. */
const char *mk_err_name(int code);
/* A short generic description of the code ("invalid argument"). Never NULL. */
const char *mk_err_str(int code);

/* Records a message (printf format) for the calling thread and returns `code`, so that a failing function can
 * `return mk_err_set(MK_EINVAL, "width %d out of range", w);`. The message is truncated to 511 bytes. */
int mk_err_set(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Prefixes the calling thread's current message with "context: " and returns `code` unchanged. */
int mk_err_wrap(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The calling thread's last message ("" if none). Valid until the thread's next mk_err_set/mk_err_clear. */
const char *mk_err_msg(void);
void mk_err_clear(void);

#ifdef __cplusplus
}
#endif
#endif
