/* See unimpl.h. Not on any hot path: an unimplemented call is a gap in the simulation that a test
 * wants to see, so it costs an open/write/close when $SIMGPU_UNIMPL_LOG is set. */
#include "unimpl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

__attribute__((visibility("hidden"))) const char simgpu_unimpl_string[] = "simgpu: unimplemented";

__attribute__((visibility("hidden"))) int simgpu_unimpl(const char *name, int *seen, int status)
{
    int saved = errno;
    char line[256];
    if (!__atomic_exchange_n(seen, 1, __ATOMIC_RELAXED)) {
        int n = snprintf(line, sizeof line, "simgpu: unimplemented %s\n", name);
        if (n > 0 && write(2, line, (size_t)n) < 0)
            n = 0; /* nothing better to do with a failed stderr */
    }
    const char *log = getenv("SIMGPU_UNIMPL_LOG");
    if (log && *log) {
        int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd >= 0) {
            int n = snprintf(line, sizeof line, "%d %s\n", (int)getpid(), name);
            if (n > 0 && write(fd, line, (size_t)n) < 0)
                n = 0;
            close(fd);
        }
    }
    errno = saved;
    return status;
}
