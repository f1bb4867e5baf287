/* tokprof decoder: names of error codes (see err.h). */
#include "base/err.h"

#include <stdarg.h>
#include <stdio.h>

const char *tkp_strerror(int err)
{
    switch (err) {
    case TKP_OK:
        return "success";
    case TKP_ERR_NOMEM:
        return "out of memory";
    case TKP_ERR_IO:
        return "i/o error";
    case TKP_ERR_NOT_CAPTURE:
        return "not a tokprof capture";
    case TKP_ERR_VERSION:
        return "unsupported capture format version";
    case TKP_ERR_HEADER:
        return "bad capture header";
    case TKP_ERR_TORN:
        return "torn tail (incomplete chunk)";
    case TKP_ERR_CHUNK:
        return "corrupt chunk";
    case TKP_ERR_RECORD:
        return "malformed record";
    case TKP_ERR_USAGE:
        return "usage error";
    case TKP_ERR_NOSHIM:
        return "libtokprof.so not found";
    case TKP_ERR_EXEC:
        return "cannot run the command";
    case TKP_ERR_VIOLATION:
        return "check violated";
    case TKP_ERR_INCONCLUSIVE:
        return "check inconclusive";
    case TKP_ERR_SPEC:
        return "bad spec";
    }
    return "unknown error";
}

int tkp_why(char *why, unsigned long len, int code, const char *fmt, ...)
{
    if (why && len) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, len, fmt, ap);
        va_end(ap);
    }
    return code;
}
