/* mkseries: a synthetic decode-loop capture with a known timeline, for the change-point tests
 * (analysis_test.py cp_*). Written with the test capture writer (tests/unit/capwriter.h, from
 * docs/FORMAT.md alone), so host timing can be perturbed exactly and reproducibly — what a loaded
 * machine does to a real capture, without depending on the load of the machine running the test.
 *
 * usage: mkseries OUT [--steps N] [--seed S] [--no-gpu] [--host-noise PCT]
 *                     [--load FROM:TO:FACTOR]... [--slow NAME:FROM:FACTOR] [--stall K:NS]
 *                     [--gpu-jitter PCT]
 *
 * One thread, N token steps (segments 0..N-1), each: 24 launches (a layer pattern of 6 kernels of
 * the norm, gemm, attention, gemm, activation, gemm classes, 4 times), 20 us of host time per
 * launch plus 200 us of fixed host work, and the GPU running each kernel 10 us (gemm 14 us) from
 * the later of its launch + 5 us and the previous kernel's end; the step ends 30 us after the
 * later of its last launch and its last kernel (the sync). Host time is multiplied per step by
 *   --host-noise PCT  1 + u*PCT/100 (u uniform in [-1, 1)), and with probability 1/20 a spike of
 *                     x2..x10 (heavy-tailed: what preemption does);
 *   --load F:T:X      x X for steps [F, T) (another process sharing the cores), repeatable.
 * GPU faults: --slow NAME:FROM:X (kernels whose name contains NAME take X times longer from step
 * FROM on), --stall K:NS (every K-th step's first kernel starts NS later), --gpu-jitter PCT (each
 * kernel duration times 1 + u*PCT/100). --no-gpu writes no GPU records (GPU_INFO status off).
 * No LIB_CALL records: tokens per step are not in the capture. Random numbers: splitmix64. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "capwriter.h"
#include "tokprof/format.h"

#define LAUNCHES 24
#define MAX_LOADS 8

static uint64_t rng;

static uint64_t next(void)
{
    uint64_t z = (rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double unit(void) /* [-1, 1) */
{
    return (double)(next() >> 11) / (double)(1ull << 52) - 1.0;
}

static const char *const names[] = {"rms_norm_kernel", "sm90_xmma_gemm_bf16_qkv",
                                    "flash_fwd_splitkv_kernel", "sm90_xmma_gemm_bf16_o",
                                    "silu_and_mul_kernel", "sm90_xmma_gemm_bf16_down"};

static void gpu_kernel(struct capw *w, uint64_t start, uint64_t end, uint64_t name,
                       uint64_t corr, uint64_t step, uint32_t index)
{
    const struct capw_gpu_kernel k = {
        .start_ns = start, .end_ns = end, .name = name, .stream = 7, .correlation = corr,
        .step = step, .join = TKP_JOIN_LAUNCH, .index = index, .graph = UINT64_MAX,
        .node = UINT64_MAX, .grid = {4, 4, 4}, .block = {128, 128, 128}};
    capw_gpu_kernel(w, &k);
}

static void gpu_info(struct capw *w, int on, uint64_t records)
{
    capw_gpu_info(w, on ? 0 : 1, on ? "always" : "off", on ? "" : "TOKPROF_GPU=off", records);
}

static int usage(void)
{
    fprintf(stderr, "usage: mkseries OUT [--steps N] [--seed S] [--no-gpu] [--host-noise PCT]\n"
                    "                [--load FROM:TO:FACTOR]... [--slow NAME:FROM:FACTOR]\n"
                    "                [--stall K:NS] [--gpu-jitter PCT]\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *out = NULL, *slow_name = NULL;
    uint64_t steps = 600, stall_k = 0, stall_ns = 0, slow_from = 0, seed = 1;
    double noise = 0, jitter = 0, slow_x = 1, load_x[MAX_LOADS];
    uint64_t load_from[MAX_LOADS], load_to[MAX_LOADS];
    int gpu = 1, nloads = 0;
    char slow_buf[64];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--no-gpu")) {
            gpu = 0;
            continue;
        }
        if (a[0] != '-') {
            out = a;
            continue;
        }
        if (!v) return usage();
        i++;
        if (!strcmp(a, "--steps")) steps = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--host-noise")) noise = atof(v);
        else if (!strcmp(a, "--gpu-jitter")) jitter = atof(v);
        else if (!strcmp(a, "--load") && nloads < MAX_LOADS &&
                 sscanf(v, "%" SCNu64 ":%" SCNu64 ":%lf", &load_from[nloads], &load_to[nloads],
                        &load_x[nloads]) == 3)
            nloads++;
        else if (!strcmp(a, "--slow") &&
                 sscanf(v, "%63[^:]:%" SCNu64 ":%lf", slow_buf, &slow_from, &slow_x) == 3)
            slow_name = slow_buf;
        else if (!strcmp(a, "--stall") && sscanf(v, "%" SCNu64 ":%" SCNu64, &stall_k, &stall_ns) == 2) {
        } else
            return usage();
    }
    if (!out || !steps) return usage();
    rng = seed;
    struct capw *w = capw_new();
    uint64_t t = 1000000000ull, corr = 1, gpu_end = 0, records = 0, prev = t;
    const uint32_t grid[3] = {4, 1, 1}, block[3] = {128, 1, 1};
    for (uint64_t s = 0; s < steps; s++) {
        if (s % 50 == 0) { /* a chunk every 50 steps, each self-contained */
            if (s) capw_chunk_end(w);
            capw_chunk_begin(w, t);
            prev = t; /* timed records: dt from the previous one, the first from the base */
            for (size_t k = 0; k < sizeof(names) / sizeof(*names); k++)
                capw_name(w, k + 1, names[k]);
            capw_meta(w, "mkseries", 4242);
            capw_thread(w, 0, 4242);
            gpu_info(w, gpu, records);
        }
        /* host time of this step: noise, a spike now and then, load episodes */
        double x = 1 + unit() * noise / 100;
        if (noise > 0 && next() % 20 == 0) x *= 2 + 8 * (unit() + 1) / 2;
        for (int l = 0; l < nloads; l++)
            if (s >= load_from[l] && s < load_to[l]) x *= load_x[l];
        uint64_t begin = t, last, kstart[LAUNCHES], kend[LAUNCHES], lt[LAUNCHES];
        t += (uint64_t)(200000 * x);
        for (int i = 0; i < LAUNCHES; i++) {
            int k = i % 6;
            t += (uint64_t)(20000 * x);
            lt[i] = t;
            uint64_t d = k % 2 ? 14000 : 10000;
            if (jitter > 0) d = (uint64_t)((double)d * (1 + unit() * jitter / 100));
            if (slow_name && s >= slow_from && strstr(names[k], slow_name))
                d = (uint64_t)((double)d * slow_x);
            uint64_t st = t + 5000 > gpu_end ? t + 5000 : gpu_end;
            if (stall_k && i == 0 && (s + 1) % stall_k == 0) st += stall_ns;
            kstart[i] = st, kend[i] = gpu_end = st + d;
        }
        last = t;
        uint64_t end = (last > gpu_end ? last : gpu_end) + (uint64_t)(30000 * x);
        for (int i = 0; i < LAUNCHES; i++) {
            capw_launch(w, (int64_t)(lt[i] - prev), 0, s, (uint64_t)(i % 6) + 1, 0x1000,
                        TKP_VIA_RUNTIME, grid, block, 0);
            prev = lt[i];
        }
        capw_sync(w, (int64_t)(last + 1000 - prev), 0, s, TKP_SYNC_STREAM, 0x1000,
                  end - last - 1000);
        prev = last + 1000;
        if (gpu)
            for (int i = 0; i < LAUNCHES; i++, records++)
                gpu_kernel(w, kstart[i], kend[i], (uint64_t)(i % 6) + 1, corr++, s, (uint32_t)i);
        capw_step(w, s, 0, TKP_STEP_TOKEN, begin, last, end, TKP_CLOSE_STREAM_SYNC, LAUNCHES, 0, 0);
        t = end + 10000; /* the host's gap to the next step */
    }
    capw_chunk_end(w);
    int err = capw_write_file(w, out);
    capw_free(w);
    if (err) {
        perror(out);
        return 1;
    }
    return 0;
}
