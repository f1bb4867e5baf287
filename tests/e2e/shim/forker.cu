// fork() during capture: the parent launches, forks; the child launches on its own (a vLLM
// EngineCore, a multiprocessing worker) and exits normally; the parent launches again and waits.
// Each process must leave its own complete capture. The child first renames itself as vLLM's
// EngineCore does (setproctitle writes the title over argv[0]'s memory and zeroes the rest):
// its capture must still be named after the program, not ".PID.tokprof" (a hidden file).
#include <cstdio>
#include <cstring>
#include <sys/wait.h>
#include <unistd.h>

extern "C" __global__ void parent_kernel(int i) { (void)i; }
extern "C" __global__ void child_kernel(int i) { (void)i; }

int main(int argc, char **argv)
{
    (void)argc;
    for (int i = 0; i < 3; i++) parent_kernel<<<1, 32>>>(i);
    cudaDeviceSynchronize();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        size_t n = strlen(argv[0]);
        memset(argv[0], 0, n);
        strncpy(argv[0], "VLLM::E", n);
        for (int i = 0; i < 5; i++) child_kernel<<<1, 32>>>(i);
        cudaDeviceSynchronize();
        printf("child %d done\n", (int)getpid());
        return 0;
    }
    for (int i = 0; i < 2; i++) parent_kernel<<<1, 32>>>(i);
    cudaDeviceSynchronize();
    int st = 0;
    waitpid(pid, &st, 0);
    printf("parent %d done, child %d exit %d\n", (int)getpid(), (int)pid, WEXITSTATUS(st));
    return WEXITSTATUS(st);
}
