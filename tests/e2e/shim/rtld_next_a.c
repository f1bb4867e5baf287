/* An interposer of its own, as LD_PRELOAD allocators are: its foo() finds the next foo() with
 * dlsym(RTLD_NEXT). Under a shim that interposes dlsym naively, RTLD_NEXT would be resolved
 * relative to the shim and this would find itself. */
#include <dlfcn.h>

int foo(void)
{
    int (*next)(void) = (int (*)(void))dlsym(RTLD_NEXT, "foo");
    if (!next || next == foo) return -1;
    return 10 + next();
}
