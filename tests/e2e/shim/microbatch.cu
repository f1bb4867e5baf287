// A decode loop on a non-blocking compute stream whose inputs are uploaded synchronously on the
// per-thread default stream (cudaMemcpyAsync + cudaStreamSynchronize(cudaStreamPerThread), as
// ggml's set_tensor does); each evaluation launches its kernels on the compute stream, copies its
// logits back on it into the host buffer, and the host waits for the compute stream once. Every
// third evaluation is split into two micro-batches,
// each with its own upload, kernels and logits copy (the second's into the buffer after the
// first's), with one wait after both. Its kernel is named as ggml's quantized matrix-vector
// product, whose template argument is the micro-batch's tokens: a whole evaluation has 4, a split
// one 3 + 2 (README "Tokens per step"). `auto` must find N token steps, one per evaluation, and one
// part step per split evaluation (README "Steps"); a sync on the per-thread stream completes no
// step (it has not waited for the compute stream). With "sync", the host also waits for the
// compute stream between the two micro-batches, as ggml's scheduler does before a split's input
// copy (llama.cpp's server): the first part is complete before the second is launched.
//
// usage: microbatch N K [sync]
#include <cstdio>
#include <cstdlib>
#include <cstring>

enum ggml_type { GGML_TYPE_Q8_0 = 8 };
template <ggml_type type, int ncols_dst> __global__ void mul_mat_vec_q(float *x, int i)
{
    (void)x, (void)i;
}

static const int VOCAB = 512;

static void upload(int *dev, const int *host)
{
    cudaMemcpyAsync(dev, host, 64 * sizeof(int), cudaMemcpyHostToDevice, cudaStreamPerThread);
    cudaStreamSynchronize(cudaStreamPerThread);
}

static void ubatch(cudaStream_t s, int k, int tokens, float *dlogits, float *hlogits)
{
    for (int i = 0; i < k; i++) {
        if (tokens == 4) mul_mat_vec_q<GGML_TYPE_Q8_0, 4><<<2, 64, 0, s>>>(dlogits, i);
        else if (tokens == 3) mul_mat_vec_q<GGML_TYPE_Q8_0, 3><<<2, 64, 0, s>>>(dlogits, i);
        else mul_mat_vec_q<GGML_TYPE_Q8_0, 2><<<2, 64, 0, s>>>(dlogits, i);
    }
    cudaMemcpyAsync(hlogits, dlogits, VOCAB * sizeof(float), cudaMemcpyDeviceToHost, s);
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 9, k = argc > 2 ? atoi(argv[2]) : 3, splits = 0;
    bool sync_between = argc > 3 && !strcmp(argv[3], "sync");
    cudaStream_t s;
    cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking);
    float *dlogits, *hlogits;
    int *din, *hin;
    cudaMalloc(&dlogits, VOCAB * sizeof(float));
    cudaMalloc(&din, 64 * sizeof(int));
    cudaMallocHost(&hlogits, 2 * VOCAB * sizeof(float));
    cudaMallocHost(&hin, 64 * sizeof(int));
    for (int e = 0; e < n; e++) {
        bool split = e % 3 == 2;
        upload(din, hin);
        ubatch(s, k, split ? 3 : 4, dlogits, hlogits);
        if (split) { /* the second micro-batch's inputs, kernels and logits */
            if (sync_between) cudaStreamSynchronize(s);
            upload(din, hin);
            ubatch(s, k, 2, dlogits, hlogits + VOCAB);
            splits++;
        }
        cudaStreamSynchronize(s);
    }
    printf("microbatch: %d evaluations, %d split in two\n", n, splits);
    return 0;
}
