/* error.c - the error code list, messages and the error struct helpers. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *tether_version(void) {
#define TETHER__STR2(x) #x
#define TETHER__STR(x) TETHER__STR2(x)
    return TETHER__STR(TETHER_VERSION_MAJOR) "." TETHER__STR(
        TETHER_VERSION_MINOR) "." TETHER__STR(TETHER_VERSION_PATCH);
}

const char *tether_strerror(int code) {
    switch (code) {
    case TETHER_OK:
        return "success";
#define TETHER__MSG(name, val, msg)                                            \
    case (val):                                                                \
        return msg;
        TETHER_ERRORS(TETHER__MSG)
#undef TETHER__MSG
    default:
        return "unknown error";
    }
}

const char *tether_errname(int code) {
    switch (code) {
    case TETHER_OK:
        return "TETHER_OK";
#define TETHER__NAME(name, val, msg)                                           \
    case (val):                                                                \
        return "TETHER_" #name;
        TETHER_ERRORS(TETHER__NAME)
#undef TETHER__NAME
    default:
        return "TETHER_EUNKNOWN";
    }
}

/* Field by field, strings emptied: this runs on every attempt, and a
 * memset of the whole message buffer would cost more than the rest. */
TETHER__HOT void tether_error_clear(tether_error *err) {
    if (!err)
        return;
    err->code = 0;
    err->cause = 0;
    err->cls = TETHER_CLASS_NONE;
    err->stop = TETHER_STOP_NONE;
    err->not_sent = 0;
    err->attempts = 0;
    err->elapsed_ms = 0;
    err->retry_after_ms = 0;
    err->sqlstate[0] = '\0';
    err->message[0] = '\0';
}

void tether__sized_out(void *dst, size_t size, const void *full,
                       size_t full_size) {
    if (!dst)
        return;
    size_t n = size < full_size ? size : full_size;
    memcpy(dst, full, n);
    if (size > n)
        memset((char *)dst + n, 0, size - n);
    if (size >= sizeof(size_t))
        memcpy(dst, &size, sizeof(size_t));
}

int tether__sized_in(void *dst, size_t full_size, const void *src,
                     size_t min_size, const char *name, tether_error *err) {
    size_t size;
    memcpy(&size, src, sizeof(size));
    if (size == 0)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "%s: size is 0: initialize it with its "
                                "_init function",
                                name);
    if (size < min_size || size > full_size)
        return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                                "%s: size %zu is not one this library knows "
                                "(%zu): built against another tether.h?",
                                name, size, full_size);
    memcpy(dst, src, size);
    return 0;
}

int tether__error_vset(tether_error *err, int code, tether_class cls,
                       const char *prefix, const char *fmt, va_list ap) {
    if (!err)
        return code;
    tether_error_clear(err);
    err->code = code;
    err->cls = cls;
    if (!fmt) {
        snprintf(err->message, sizeof(err->message), "%s%s", prefix,
                 tether_strerror(code));
        return code;
    }
    int n = snprintf(err->message, sizeof(err->message), "%s", prefix);
    if (n >= 0 && (size_t)n < sizeof(err->message))
        vsnprintf(err->message + n, sizeof(err->message) - (size_t)n, fmt, ap);
    return code;
}

int tether__null(tether_error *err, const char *fn, const char *arg) {
    return tether_error_set(err, TETHER_EINVAL, TETHER_CLASS_PERMANENT,
                            "%s: %s is NULL", fn, arg);
}

int tether_error_set(tether_error *err, int code, tether_class cls,
                     const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = tether__error_vset(err, code, cls, "", fmt, ap);
    va_end(ap);
    return rc;
}

int tether_error_set_not_sent(tether_error *err, int code, tether_class cls,
                              const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = tether__error_vset(err, code, cls, "", fmt, ap);
    va_end(ap);
    if (err)
        err->not_sent = 1;
    return rc;
}

const char *tether_class_name(tether_class cls) {
    switch (cls) {
    case TETHER_CLASS_TRANSIENT:
        return "transient";
    case TETHER_CLASS_THROTTLED:
        return "throttled";
    case TETHER_CLASS_PERMANENT:
        return "permanent";
    default:
        return "none";
    }
}

const char *tether_stop_name(tether_stop stop) {
    static const char *const names[] = {
        "none",           "permanent", "attempts", "deadline",
        "not-idempotent", "budget",    "breaker",  "nested"};
    if ((unsigned)stop < sizeof(names) / sizeof(names[0]))
        return names[stop];
    return "unknown";
}
