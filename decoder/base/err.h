/* tokprof decoder: one error convention. Functions return 0 (or a count) on success and a negative
 * tkp_err on failure; tkp_strerror() names it. Only main.c prints, and it maps codes to exit
 * statuses: TKP_ERR_VIOLATION -> 1, TKP_ERR_INCONCLUSIVE -> 3, every other error -> 2. */
#ifndef TKP_ERR_H
#define TKP_ERR_H

enum tkp_err {
    TKP_OK = 0,
    TKP_ERR_NOMEM = -1,
    TKP_ERR_IO = -2,          /* open/read failed; errno-style reason in the message */
    TKP_ERR_NOT_CAPTURE = -3, /* file magic is not tokprof's */
    TKP_ERR_VERSION = -4,     /* a format version this reader does not know */
    TKP_ERR_HEADER = -5,      /* file header malformed or cut short */
    TKP_ERR_TORN = -6,        /* last chunk incomplete: the normal end of a killed program */
    TKP_ERR_CHUNK = -7,       /* chunk framing or compression is corrupt */
    TKP_ERR_RECORD = -8,      /* a record inside a chunk is malformed */
    TKP_ERR_USAGE = -9,       /* bad command line */
    TKP_ERR_NOSHIM = -10,     /* libtokprof.so not found (tokprof run) */
    TKP_ERR_EXEC = -11,       /* the command could not be run (tokprof run) */
    TKP_ERR_VIOLATION = -12,  /* a check found a violation (exit 1) */
    TKP_ERR_INCONCLUSIVE = -13, /* a check could not decide an assertion, none violated (exit 3) */
    TKP_ERR_SPEC = -14,       /* a spec (tokprof check) cannot be parsed, compiled or run */
};

/* A static, lowercase phrase for a tkp_err code (never NULL). */
const char *tkp_strerror(int err);

/* Writes the formatted reason into why (when not NULL, len > 0) and returns code: for functions
 * that hand back an error code and a one-line reason. */
int tkp_why(char *why, unsigned long len, int code, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

#endif
