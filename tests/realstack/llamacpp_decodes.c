/* llama.cpp's own count of its evaluations, for tests/realstack/run_llamacpp.py: preloaded (beside
 * the shim, and in the run without it), it interposes llama_process() — the one entry every
 * decode and encode goes through in this llama.cpp (the server's batches, common's load-time
 * probe, llama-bench's prompts and tokens; the older llama_decode() these programs no longer
 * call) — and appends one line per
 * call to the file named by LLAMACPP_DECODES: "<type> <return value> <tokens>" (type 1: decode,
 * 0: encode; tokens: the batch's entries, counted from the llama_batch_ext_add_token/_add_embd
 * calls since its last llama_batch_ext_clear, which is how common_batch fills it).
 * The truth it gives is the client's own calls, not anything tokprof computes. Built by the test
 * against the cache's llama.h. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "llama.h"

typedef int32_t (*process_fn)(struct llama_context *, enum llama_process_type,
                              struct llama_batch_ext *);

/* The entries of the last few batches filled (a program keeps one or two). */
#define NB 8
static struct {
    struct llama_batch_ext *b;
    int32_t n;
} fill[NB];
static unsigned next_fill;

static int32_t *entries(struct llama_batch_ext *b)
{
    for (int i = 0; i < NB; i++)
        if (fill[i].b == b) return &fill[i].n;
    unsigned i = next_fill++ % NB;
    fill[i].b = b, fill[i].n = 0;
    return &fill[i].n;
}

void llama_batch_ext_clear(struct llama_batch_ext *b)
{
    static void (*real)(struct llama_batch_ext *);
    if (!real) real = (void (*)(struct llama_batch_ext *))dlsym(RTLD_NEXT, "llama_batch_ext_clear");
    if (!real) abort();
    real(b);
    *entries(b) = 0;
}

static void added(struct llama_batch_ext *b, int32_t idx)
{
    int32_t *n = entries(b);
    if (idx >= 0 && idx + 1 > *n) *n = idx + 1;
}

int32_t llama_batch_ext_add_token(struct llama_batch_ext *b, llama_seq_id seq, llama_token id)
{
    static int32_t (*real)(struct llama_batch_ext *, llama_seq_id, llama_token);
    if (!real)
        real = (int32_t(*)(struct llama_batch_ext *, llama_seq_id, llama_token))dlsym(
            RTLD_NEXT, "llama_batch_ext_add_token");
    if (!real) abort();
    int32_t idx = real(b, seq, id);
    added(b, idx);
    return idx;
}

int32_t llama_batch_ext_add_embd(struct llama_batch_ext *b, llama_seq_id seq, struct llama_embd e)
{
    static int32_t (*real)(struct llama_batch_ext *, llama_seq_id, struct llama_embd);
    if (!real)
        real = (int32_t(*)(struct llama_batch_ext *, llama_seq_id, struct llama_embd))dlsym(
            RTLD_NEXT, "llama_batch_ext_add_embd");
    if (!real) abort();
    int32_t idx = real(b, seq, e);
    added(b, idx);
    return idx;
}

int32_t llama_process(struct llama_context *ctx, enum llama_process_type type,
                      struct llama_batch_ext *batch)
{
    static process_fn real;
    if (!real) real = (process_fn)dlsym(RTLD_NEXT, "llama_process");
    if (!real) abort();
    int32_t rv = real(ctx, type, batch);
    const char *path = getenv("LLAMACPP_DECODES");
    if (path) {
        int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0) {
            char line[48];
            int n = snprintf(line, sizeof line, "%d %d %d\n", (int)type, (int)rv, (int)*entries(batch));
            if (write(fd, line, (size_t)n) != n) abort();
            close(fd);
        }
    }
    return rv;
}
