/* A library that must never be loaded into a privileged process: named by TOKPROF_CUPTI_PATH in
 * security_check.py's secure-execution case, it creates the file $TOKPROF_TEST_EVIL_MARK when it
 * is loaded. (It is not CUPTI: where it is loaded the shim says so and goes on without GPU time.) */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

__attribute__((constructor)) static void loaded(void)
{
    const char *mark = getenv("TOKPROF_TEST_EVIL_MARK");
    if (!mark) return;
    int fd = open(mark, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) close(fd);
}
