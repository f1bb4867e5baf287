/* Logging (log.c): silent unless TOKPROF_LOG asks, signal-safe, never stdout. */
#ifndef TKP_CORE_LOG_H
#define TKP_CORE_LOG_H

enum tkp_log_level { TKP_LOG_QUIET = 0, TKP_LOG_WARN = 1, TKP_LOG_DEBUG = 2 };
extern int tkp_log_level;
/* Formats into a stack buffer and write(2)s one line to stderr, prefixed "tokprof: ". Never
 * allocates; silent below the configured level. */
void tkp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
#define tkp_warn(...) tkp_log(TKP_LOG_WARN, __VA_ARGS__)
#define tkp_debug(...) tkp_log(TKP_LOG_DEBUG, __VA_ARGS__)

#endif
