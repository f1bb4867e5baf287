/* Exit 0 when dlsym(RTLD_NEXT) from a library reaches the next library, and dlsym on a handle
 * and RTLD_DEFAULT still work. */
#include <dlfcn.h>
#include <stdio.h>

int foo(void);

int main(void)
{
    int v = foo();
    void *h = dlopen("libc.so.6", RTLD_NOW);
    void *p = h ? dlsym(h, "strlen") : NULL;
    void *q = dlsym(RTLD_DEFAULT, "printf");
    printf("foo=%d handle=%s default=%s\n", v, p ? "ok" : "null", q ? "ok" : "null");
    return (v == 12 && p && q) ? 0 : 1;
}
