// Production situations for tests/e2e/prod/prod_check.py, on the simulated GPU.
//
// usage: prodprog spawn PROGRAM [ARGS...]  launch, posix_spawn PROGRAM (LD_PRELOAD inherited),
//                                          wait for it, launch again; exit with its status
//        prodprog exit N                   N launches, a sync, a pause, then _exit(0): no atexit
//        prodprog trigger WHY              launches, tokprof_trigger(WHY) found with dlsym, more
//                                          launches, a pause for the snapshot's after-window
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

extern "C" __global__ void prod_kernel(int i) { (void)i; }

static void launches(int n)
{
    for (int i = 0; i < n; i++) prod_kernel<<<1, 32>>>(i);
    cudaDeviceSynchronize();
}

int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    if (!strcmp(argv[1], "spawn")) {
        launches(3);
        pid_t pid;
        if (posix_spawn(&pid, argv[2], nullptr, nullptr, argv + 2, environ)) return 3;
        int st = 0;
        waitpid(pid, &st, 0);
        launches(2);
        printf("parent %d, child %d exit %d\n", (int)getpid(), (int)pid, WEXITSTATUS(st));
        return WEXITSTATUS(st);
    }
    if (!strcmp(argv[1], "exit")) {
        launches(atoi(argv[2]));
        printf("launched %d\n", atoi(argv[2]));
        fflush(stdout);
        usleep(500000); // several flush periods: the launches are on disk before _exit
        _exit(0);
    }
    if (!strcmp(argv[1], "trigger")) {
        typedef void (*trigger_fn)(const char *);
        trigger_fn trig = (trigger_fn)dlsym(RTLD_DEFAULT, "tokprof_trigger");
        for (int k = 0; k < 10; k++) {
            launches(100);
            usleep(20000);
        }
        if (trig) trig(argv[2]);
        for (int k = 0; k < 10; k++) {
            launches(100);
            usleep(50000);
        }
        printf("trigger %s\n", trig ? "found" : "absent");
        return 0;
    }
    return 2;
}
