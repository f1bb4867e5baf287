// A decode loop on a non-blocking compute stream whose inputs are uploaded synchronously on the
// per-thread default stream (cudaMemcpyAsync + cudaStreamSynchronize(cudaStreamPerThread), as
// ggml's set_tensor does); each evaluation launches its kernels on the compute stream, copies its
// logits back on it into the host buffer, and the host waits for the compute stream once (ggml's
// own split into micro-batches also syncs the compute stream in between, which this loop does
// not: README "Steps"). Every third evaluation is split into two micro-batches,
// each with its own upload, kernels and logits copy (the second's into the buffer after the
// first's), with one wait after both. `auto` must find N token steps, one per evaluation, and one
// part step per split evaluation (README "Steps"); a sync on the per-thread stream completes no
// step (it has not waited for the compute stream).
//
// usage: microbatch N K
#include <cstdio>
#include <cstdlib>

extern "C" __global__ void ubatch_kernel(float *x, int i) { (void)x, (void)i; }

static const int VOCAB = 512;

static void upload(int *dev, const int *host)
{
    cudaMemcpyAsync(dev, host, 64 * sizeof(int), cudaMemcpyHostToDevice, cudaStreamPerThread);
    cudaStreamSynchronize(cudaStreamPerThread);
}

static void ubatch(cudaStream_t s, int k, float *dlogits, float *hlogits)
{
    for (int i = 0; i < k; i++) ubatch_kernel<<<2, 64, 0, s>>>(dlogits, i);
    cudaMemcpyAsync(hlogits, dlogits, VOCAB * sizeof(float), cudaMemcpyDeviceToHost, s);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 9, k = argc > 2 ? atoi(argv[2]) : 3, splits = 0;
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *dlogits, *hlogits;
    int *din, *hin;
    cudaMalloc(&dlogits, VOCAB * sizeof(float));
    cudaMalloc(&din, 64 * sizeof(int));
    cudaMallocHost(&hlogits, 2 * VOCAB * sizeof(float));
    cudaMallocHost(&hin, 64 * sizeof(int));
    for (int e = 0; e < n; e++) {
        upload(din, hin);
        ubatch(s, k, dlogits, hlogits);
        if (e % 3 == 2) { /* split: the second micro-batch's inputs, kernels and logits */
            upload(din, hin);
            ubatch(s, k, dlogits, hlogits + VOCAB);
            splits++;
        }
        cudaStreamSynchronize(s);
    }
    printf("microbatch: %d evaluations, %d split in two\n", n, splits);
    return 0;
}
