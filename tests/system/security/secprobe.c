/* A stand-in for a privileged program, for security_check.py's secure-execution case: it calls
 * the shim's public step markers (which start a capture in an ordinary process, CUDA or not) and
 * says what it was: "secure=<AT_SECURE> shim=<1 when libtokprof.so is loaded>". The test runs a
 * copy of it with file capabilities as an unprivileged user, which makes the kernel set
 * AT_SECURE exactly as for a setuid program. */
#include <dlfcn.h>
#include <stdio.h>
#include <sys/auxv.h>

int main(void)
{
    void (*begin)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "tokprof_step_begin");
    void (*end)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "tokprof_step_end");
    if (begin && end) {
        begin();
        end();
    }
    printf("secure=%lu shim=%d\n", getauxval(AT_SECURE), begin != NULL);
    return 0;
}
