// fork() during capture: the parent launches, forks; the child launches on its own (a vLLM
// EngineCore, a multiprocessing worker) and exits normally; the parent launches again and waits.
// Each process must leave its own complete capture.
#include <cstdio>
#include <sys/wait.h>
#include <unistd.h>

extern "C" __global__ void parent_kernel(int i) { (void)i; }
extern "C" __global__ void child_kernel(int i) { (void)i; }

int main()
{
    for (int i = 0; i < 3; i++) parent_kernel<<<1, 32>>>(i);
    cudaDeviceSynchronize();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
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
