/* Helpers for the simgpu criterion tests: environment setup before the driver initialises, and
 * a minimal reader for the truth log (one flat JSON object per line; the fields used here are
 * numbers, strings and [x,y,z] arrays, so strstr + strtol is enough).
 *
 * Criterion runs every test in its own process, so each test sets its own SIMGPU_* variables
 * before its first CUDA call and the driver reads them once. */
#ifndef SIMGPU_UNIT_UTIL_H
#define SIMGPU_UNIT_UTIL_H

#include <criterion/criterion.h>
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "simgpu_ext.h"

/* A "gate" kernel lasts 10 s of simulated time: work queued behind it starts at exactly its end,
 * whatever the host's speed, as long as the host enqueues the rest within 10 s. Tests never
 * wait for a gate (processes exit without synchronising). */
#define GATE_NS 10000000000LL

#define CK(call) cr_assert_eq((call), CUDA_SUCCESS, "%s", #call)

struct rec {
    long long seq, start, end, stream, node, exec, grid[3];
    char kind[16], name[128], via[16], handle[32], dir[8];
    int pinned, faulted;
    double flops, bytes;
};

static char unit_log[256];

static inline long long jnum(const char *line, const char *key, long long dflt)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(line, k);
    if (!p)
        return dflt;
    p += strlen(k);
    if (!strncmp(p, "null", 4))
        return dflt;
    return strtoll(p, NULL, 10);
}

static inline double jdbl(const char *line, const char *key)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":", key);
    const char *p = strstr(line, k);
    return p ? strtod(p + strlen(k), NULL) : 0;
}

static inline void jstr(const char *line, const char *key, char *out, size_t n)
{
    char k[64];
    snprintf(k, sizeof k, "\"%s\":\"", key);
    const char *p = strstr(line, k);
    out[0] = 0;
    if (!p)
        return;
    p += strlen(k);
    size_t i = 0;
    while (p[i] && p[i] != '"' && i + 1 < n) {
        out[i] = p[i];
        i++;
    }
    out[i] = 0;
}

/* Sets up SIMGPU_LOG (fresh file) and SIMGPU_COST (gate family + `cost_extra`) and cuInit. */
static inline void unit_setup(const char *cost_extra)
{
    snprintf(unit_log, sizeof unit_log, "/tmp/simgpu-unit-%d.jsonl", (int)getpid());
    setenv("SIMGPU_LOG", unit_log, 1);
    char cost[256];
    snprintf(cost, sizeof cost, "/tmp/simgpu-unit-%d.cost", (int)getpid());
    FILE *f = fopen(cost, "w");
    cr_assert(f);
    fprintf(f, "gate ^gate %lld 0\n%s\n", GATE_NS, cost_extra ? cost_extra : "");
    fclose(f);
    setenv("SIMGPU_COST", cost, 1);
    CK(cuInit(0));
    CUcontext ctx;
    CK(cuDevicePrimaryCtxRetain(&ctx, 0));
    CK(cuCtxSetCurrent(ctx));
}

/* Reads the whole truth log. The log is flushed by synchronising calls; cuCtxSynchronize would
 * wait for the gates, so this synchronises a fresh, idle stream instead (which flushes without
 * waiting; it takes the next stream id, so call it last). Returns the number of records. */
static inline int read_log(struct rec *r, int max)
{
    CUstream idle;
    cuStreamCreate(&idle, CU_STREAM_NON_BLOCKING);
    cuStreamSynchronize(idle); /* flushes the log; the stream has no work */
    FILE *f = fopen(unit_log, "r");
    cr_assert(f, "no truth log %s", unit_log);
    char line[2048];
    int n = 0;
    while (n < max && fgets(line, sizeof line, f)) {
        struct rec *x = &r[n++];
        memset(x, 0, sizeof *x);
        x->seq = jnum(line, "seq", -1);
        x->start = jnum(line, "start_ns", -1);
        x->end = jnum(line, "end_ns", -1);
        x->stream = jnum(line, "stream", -1);
        x->node = jnum(line, "graph_node", 0);
        x->exec = jnum(line, "graph_exec", 0);
        const char *g = strstr(line, "\"grid\":[");
        if (g)
            sscanf(g, "\"grid\":[%lld,%lld,%lld]", &x->grid[0], &x->grid[1], &x->grid[2]);
        jstr(line, "kind", x->kind, sizeof x->kind);
        jstr(line, "name", x->name, sizeof x->name);
        jstr(line, "via", x->via, sizeof x->via);
        jstr(line, "handle", x->handle, sizeof x->handle);
        jstr(line, "dir", x->dir, sizeof x->dir);
        x->pinned = strstr(line, "\"pinned\":true") != NULL;
        x->faulted = strstr(line, "\"faulted\":true") != NULL;
        x->flops = jdbl(line, "flops");
        x->bytes = jdbl(line, "bytes");
    }
    fclose(f);
    return n;
}

static inline long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static inline CUfunction kernel(const char *name)
{
    static CUmodule mod;
    static const char image[] = "simgpu-unit-image";
    if (!mod)
        CK(cuModuleLoadData(&mod, image));
    CUfunction f;
    CK(cuModuleGetFunction(&f, mod, name));
    return f;
}

static inline void launch(CUfunction f, unsigned gx, CUstream s)
{
    CK(cuLaunchKernel(f, gx, 1, 1, 128, 1, 1, 0, s, NULL, NULL));
}

#endif
