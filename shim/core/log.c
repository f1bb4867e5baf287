/* Logging for a guest in someone else's process: one line per message through write(2) on
 * stderr, formatted on the stack, silent unless TOKPROF_LOG asks. Never stdout, never stdio. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

#include "core/log.h"

int tkp_log_level = TKP_LOG_WARN;

void tkp_log(int level, const char *fmt, ...)
{
    if (level > tkp_log_level) return;
    int saved = errno;
    char buf[512];
    int n = snprintf(buf, sizeof buf, "tokprof[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (m < 0) m = 0;
    size_t len = (size_t)n + ((size_t)m < sizeof buf - (size_t)n - 1 ? (size_t)m : sizeof buf - (size_t)n - 2);
    buf[len++] = '\n';
    ssize_t w = write(2, buf, len);
    (void)w;
    errno = saved;
}
