/* tokprof decoder: Kineto Chrome-trace JSON into a tokprof capture (see kineto.h). Three stages:
 * read (the JSON, streamed: the kept events into two arrays), join (correlation ids), and write
 * (segments per thread from the step source, then every record in time order). */
#include "import/kineto.h"

#include <errno.h>
#include <regex.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/hash.h"
#include "base/jsonr.h"
#include "import/capout.h"
#include "tokprof/format.h"
#include "tokprof/tokprof.h"

#define NONE UINT64_MAX /* a handle or stream the trace does not give */
#define DEVICES_MAX 16

/* host records: what a runtime call becomes */
enum { H_LAUNCH = 1, H_GRAPH, H_COPY, H_SYNC, H_EVREC, H_WAIT, H_PUSH, H_POP, H_OTHER };

struct hev {
    int64_t ts, dur;
    uint64_t corr;
    int64_t gpu;     /* the first GPU event of the same correlation, -1 none */
    uint32_t thread, name;
    uint8_t cls, sub, flags, has_corr; /* sub: via, sync kind or copy kind */
    uint32_t seg, index;
};

struct gev {
    int64_t ts, dur;
    uint64_t corr, stream, bytes;
    int64_t host; /* the host event of the same correlation, -1 none */
    uint32_t name, smem, grid[3], block[3];
    uint8_t copy, ckind, cdir, has_corr;
};

struct seg {
    uint32_t thread;
    uint32_t seg;
    int kind;
    uint32_t closed_by;
    int64_t begin, mark, end, gpu_end;
    uint64_t launches, graphs, copies;
};

struct item {
    int64_t key;
    uint32_t order; /* 0 host, 1 GPU, 2 STEP: a step's record after the records it closes */
    uint32_t idx;
    uint64_t tie;
};

struct names {
    char **s;
    size_t n, cap;
    uint32_t *h; /* index + 1 */
    size_t hcap;
};

struct imp {
    const struct tkp_import_opts *opts;
    struct tkp_import_stats *st;
    struct tkp_jsonr j;
    gzFile gz;
    const char *gzwhy;
    struct names nm;
    struct hev *h;
    size_t nh, caph;
    struct gev *g;
    size_t ng, capg;
    struct seg *segs;
    size_t nsegs, capsegs;
    uint64_t *tids; /* capture thread -> OS tid */
    size_t ntids, captids;
    /* the file's top-level facts */
    int64_t base_ns;
    uint64_t pid, rt_version, drv_version, hip_version;
    int has_pid;
    char *trace_name;
    char *devices[DEVICES_MAX];
    int ndevices;
    /* the event being read */
    char ph[8], cat[32], akind[16];
    char *name;
    size_t name_len, name_cap;
    char *why;
    size_t whylen;
};

/* ---- names ---- */

static int intern(struct names *t, const char *s, size_t len, uint32_t *id)
{
    uint64_t hv = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) hv = (hv ^ (uint8_t)s[i]) * 1099511628211ull;
    if (t->n * 2 >= t->hcap) {
        size_t nc = t->hcap ? t->hcap * 2 : 1024;
        uint32_t *nh = calloc(nc, sizeof(*nh));
        if (!nh) return TKP_ERR_NOMEM;
        for (size_t i = 0; i < t->hcap; i++) {
            if (!t->h[i]) continue;
            const char *o = t->s[t->h[i] - 1];
            uint64_t ov = 1469598103934665603ull;
            for (; *o; o++) ov = (ov ^ (uint8_t)*o) * 1099511628211ull;
            size_t k = tkp_hash_u64(ov) & (nc - 1);
            while (nh[k]) k = (k + 1) & (nc - 1);
            nh[k] = t->h[i];
        }
        free(t->h);
        t->h = nh, t->hcap = nc;
    }
    size_t k = tkp_hash_u64(hv) & (t->hcap - 1);
    for (; t->h[k]; k = (k + 1) & (t->hcap - 1)) {
        const char *o = t->s[t->h[k] - 1];
        if (!strncmp(o, s, len) && !o[len]) {
            *id = t->h[k] - 1;
            return 0;
        }
    }
    if (TKP_GROW(t->s, t->cap, t->n + 1)) return TKP_ERR_NOMEM;
    char *c = malloc(len + 1);
    if (!c) return TKP_ERR_NOMEM;
    memcpy(c, s, len);
    c[len] = 0;
    t->s[t->n] = c;
    t->h[k] = (uint32_t)++t->n;
    *id = (uint32_t)(t->n - 1);
    return 0;
}

/* ---- reading ---- */

static long gz_read(void *ctx, void *buf, size_t n)
{
    struct imp *im = ctx;
    int got = gzread(im->gz, buf, (unsigned)n);
    if (got < 0) {
        int e;
        im->gzwhy = gzerror(im->gz, &e);
        return -1;
    }
    im->st->bytes += (uint64_t)got;
    return got;
}

static int jfail(struct imp *im)
{
    if (im->gzwhy) return tkp_why(im->why, im->whylen, TKP_ERR_RECORD, "%s (%s)", im->j.why, im->gzwhy);
    return tkp_why(im->why, im->whylen, TKP_ERR_RECORD, "%s", im->j.why);
}

static int efail(struct imp *im, const char *what)
{
    return tkp_why(im->why, im->whylen, TKP_ERR_RECORD, "byte %llu: expected %s",
                   (unsigned long long)im->j.tok_off, what);
}

/* After a value's first token t: reads past the rest of it. */
static int skip_rest(struct imp *im, int t)
{
    if (t == TKP_J_OBJ || t == TKP_J_ARR) {
        int depth = im->j.depth - 1;
        while (im->j.depth > depth)
            if ((t = tkp_jsonr_next(&im->j)) <= 0) return t < 0 ? jfail(im) : efail(im, "a value");
    }
    return t < 0 ? jfail(im) : 0;
}

static int skip_value(struct imp *im)
{
    return tkp_jsonr_skip(&im->j) ? jfail(im) : 0;
}

/* A number value of a known key: 1 and *v when it is one that fits (scaled), 0 when the value is
 * of another type (skipped), or an error. */
static int num(struct imp *im, int scale, int64_t *v)
{
    int t = tkp_jsonr_next(&im->j);
    if (t == TKP_J_NUM) return tkp_json_fixed(im->j.str, im->j.slen, scale, v) ? 0 : 1;
    int err = skip_rest(im, t);
    return err ? err : 0;
}

static int unum(struct imp *im, uint64_t *v)
{
    int64_t x;
    int r = num(im, 0, &x);
    if (r == 1) {
        if (x < 0) return 0;
        *v = (uint64_t)x;
    }
    return r;
}

/* A string value into dst (cut to cap - 1 bytes): 1, 0 when not a string (skipped), or an error. */
static int str(struct imp *im, char *dst, size_t cap)
{
    int t = tkp_jsonr_next(&im->j);
    if (t == TKP_J_STR) {
        size_t n = im->j.slen < cap - 1 ? im->j.slen : cap - 1;
        memcpy(dst, im->j.str, n);
        dst[n] = 0;
        return 1;
    }
    int err = skip_rest(im, t);
    return err ? err : 0;
}

static int dim3(struct imp *im, uint32_t d[3])
{
    int t = tkp_jsonr_next(&im->j);
    if (t != TKP_J_ARR) return skip_rest(im, t);
    for (int i = 0;; i++) {
        t = tkp_jsonr_next(&im->j);
        if (t == TKP_J_ARR_END) return 0;
        int64_t v;
        if (t == TKP_J_NUM && i < 3 && !tkp_json_fixed(im->j.str, im->j.slen, 0, &v) && v >= 0 &&
            v <= UINT32_MAX)
            d[i] = (uint32_t)v;
        else if (skip_rest(im, t))
            return TKP_ERR_RECORD;
    }
}

struct cur {
    int64_t ts, dur;
    uint64_t pid, tid, corr, stream, bytes, smem;
    uint32_t grid[3], block[3];
    int has_ts, has_dur, has_tid, has_pid, has_corr;
};

static int key_is(const struct imp *im, const char *k)
{
    return !strcmp(im->j.str, k);
}

static int read_args(struct imp *im, struct cur *c)
{
    int t = tkp_jsonr_next(&im->j);
    if (t != TKP_J_OBJ) return skip_rest(im, t);
    for (;;) {
        t = tkp_jsonr_next(&im->j);
        if (t == TKP_J_OBJ_END) return 0;
        if (t != TKP_J_KEY) return t < 0 ? jfail(im) : efail(im, "a member name");
        int r = 0;
        if (key_is(im, "correlation")) r = unum(im, &c->corr), c->has_corr = r == 1;
        else if (key_is(im, "stream")) r = unum(im, &c->stream);
        else if (key_is(im, "bytes")) r = unum(im, &c->bytes);
        else if (key_is(im, "shared memory")) r = unum(im, &c->smem);
        else if (key_is(im, "grid")) r = dim3(im, c->grid);
        else if (key_is(im, "block")) r = dim3(im, c->block);
        else if (key_is(im, "kind")) r = str(im, im->akind, sizeof(im->akind));
        else r = skip_value(im);
        if (r < 0) return r;
    }
}

/* The runtime or driver call `n`: its host record class and sub-kind (via, sync kind, copy kind). */
static int classify(const char *n, uint8_t *sub, uint8_t *flags)
{
    static const struct { const char *name; uint8_t cls, sub; } calls[] = {
        {"cudaLaunchKernel", H_LAUNCH, TKP_VIA_RUNTIME},
        {"cudaLaunchKernelExC", H_LAUNCH, TKP_VIA_RUNTIME_EX},
        {"cudaLaunchCooperativeKernel", H_LAUNCH, TKP_VIA_RUNTIME},
        {"cuLaunchKernel", H_LAUNCH, TKP_VIA_DRIVER},
        {"cuLaunchKernelEx", H_LAUNCH, TKP_VIA_DRIVER_EX},
        {"cuLaunchCooperativeKernel", H_LAUNCH, TKP_VIA_DRIVER},
        {"hipLaunchKernel", H_LAUNCH, TKP_VIA_RUNTIME},
        {"hipExtLaunchKernel", H_LAUNCH, TKP_VIA_RUNTIME_EX},
        {"hipLaunchCooperativeKernel", H_LAUNCH, TKP_VIA_RUNTIME},
        {"hipModuleLaunchKernel", H_LAUNCH, TKP_VIA_DRIVER},
        {"hipExtModuleLaunchKernel", H_LAUNCH, TKP_VIA_DRIVER_EX},
        {"hipHccModuleLaunchKernel", H_LAUNCH, TKP_VIA_DRIVER},
        {"hipModuleLaunchCooperativeKernel", H_LAUNCH, TKP_VIA_DRIVER},
        {"cudaGraphLaunch", H_GRAPH, TKP_VIA_GRAPH_RT},
        {"cuGraphLaunch", H_GRAPH, TKP_VIA_GRAPH_DRV},
        {"hipGraphLaunch", H_GRAPH, TKP_VIA_GRAPH_RT},
        {"cudaStreamSynchronize", H_SYNC, TKP_SYNC_STREAM},
        {"cuStreamSynchronize", H_SYNC, TKP_SYNC_STREAM},
        {"hipStreamSynchronize", H_SYNC, TKP_SYNC_STREAM},
        {"cudaEventSynchronize", H_SYNC, TKP_SYNC_EVENT},
        {"cuEventSynchronize", H_SYNC, TKP_SYNC_EVENT},
        {"hipEventSynchronize", H_SYNC, TKP_SYNC_EVENT},
        {"cudaDeviceSynchronize", H_SYNC, TKP_SYNC_DEVICE},
        {"hipDeviceSynchronize", H_SYNC, TKP_SYNC_DEVICE},
        {"cuCtxSynchronize", H_SYNC, TKP_SYNC_CTX},
        {"hipCtxSynchronize", H_SYNC, TKP_SYNC_CTX},
        {"cudaEventRecord", H_EVREC, 0},
        {"cudaEventRecordWithFlags", H_EVREC, 0},
        {"cuEventRecord", H_EVREC, 0},
        {"cuEventRecordWithFlags", H_EVREC, 0},
        {"hipEventRecord", H_EVREC, 0},
        {"hipEventRecordWithFlags", H_EVREC, 0},
        {"cudaStreamWaitEvent", H_WAIT, 0},
        {"cuStreamWaitEvent", H_WAIT, 0},
        {"hipStreamWaitEvent", H_WAIT, 0},
    };
    char base[96];
    size_t len = strlen(n);
    if (len >= sizeof(base)) return H_OTHER;
    memcpy(base, n, len + 1);
    *flags = 0;
    /* the per-thread-default-stream and versioned forms name the same call */
    static const char *const tails[] = {"_ptsz", "_ptds", "_spt", "_v2", "_v3"};
    for (int again = 1; again;) {
        again = 0;
        for (size_t i = 0; i < sizeof(tails) / sizeof(*tails); i++) {
            size_t tl = strlen(tails[i]);
            if (len > tl && !strcmp(base + len - tl, tails[i])) {
                if (i < 3) *flags |= TKP_VIA_PTSZ;
                base[len -= tl] = 0;
                again = 1;
            }
        }
    }
    for (size_t i = 0; i < sizeof(calls) / sizeof(*calls); i++) {
        if (strcmp(base, calls[i].name)) continue;
        *sub = calls[i].sub;
        if (calls[i].cls != H_LAUNCH && calls[i].cls != H_GRAPH) *flags = 0;
        return calls[i].cls;
    }
    if (!strncmp(base, "cudaMem", 7) || !strncmp(base, "cuMem", 5) || !strncmp(base, "hipMem", 6)) {
        const char *op = base + (base[1] == 'u' && base[2] == 'M' ? 5 : base[0] == 'h' ? 6 : 7);
        int set = !strncmp(op, "set", 3) || !strncmp(op, "Set", 3);
        if (set || !strncmp(op, "cpy", 3) || !strncmp(op, "Cpy", 3)) {
            *sub = set ? TKP_COPY_MEMSET : TKP_COPY_MEMCPY;
            *flags = strstr(base, "Async") ? TKP_COPY_ASYNC : 0;
            return H_COPY;
        }
    }
    *sub = 0;
    return H_OTHER;
}

static int ci_eq(const char *a, const char *b)
{
    return !strcasecmp(a, b);
}

static int thread_of(struct imp *im, uint64_t tid, uint32_t *thread)
{
    for (size_t i = im->ntids; i-- > 0;)
        if (im->tids[i] == tid) return *thread = (uint32_t)i, 0;
    if (im->ntids >= 65535)
        return tkp_why(im->why, im->whylen, TKP_ERR_RECORD, "more than 65535 host threads");
    if (TKP_GROW(im->tids, im->captids, im->ntids + 1)) return TKP_ERR_NOMEM;
    im->tids[im->ntids] = tid;
    *thread = (uint32_t)im->ntids++;
    return 0;
}

/* The copy direction of a GPU memcpy from its name ("Memcpy DtoH (Device -> Pinned)") or HIP's
 * args.kind ("DtoD"). */
static uint8_t copy_dir(const char *s)
{
    static const char *const dirs[] = {"HtoH", "HtoD", "DtoH", "DtoD"};
    for (int i = 0; i < 4; i++)
        if (strstr(s, dirs[i])) return (uint8_t)i;
    if (strstr(s, "PtoP")) return 3;
    return 4;
}

static int add_event(struct imp *im, struct cur *c)
{
    struct tkp_import_stats *st = im->st;
    st->events++;
    if (strcmp(im->ph, "X") || !c->has_ts || !c->has_dur || c->dur < 0) return 0;
    int kernel = !strcmp(im->cat, "kernel") || ci_eq(im->cat, "Kernel");
    int memcpy_ = !strcmp(im->cat, "gpu_memcpy") || ci_eq(im->cat, "Memcpy");
    int memset_ = !strcmp(im->cat, "gpu_memset") || ci_eq(im->cat, "Memset");
    int rt = !strcmp(im->cat, "cuda_runtime") || !strcmp(im->cat, "cuda_driver") ||
             ci_eq(im->cat, "Runtime") || ci_eq(im->cat, "Driver");
    int ann = !strcmp(im->cat, "user_annotation");
    uint32_t id;
    if (kernel || memcpy_ || memset_) {
        if (TKP_GROW(im->g, im->capg, im->ng + 1)) return TKP_ERR_NOMEM;
        if (intern(&im->nm, im->name, im->name_len, &id)) return TKP_ERR_NOMEM;
        struct gev *g = &im->g[im->ng++];
        memset(g, 0, sizeof(*g));
        g->ts = c->ts, g->dur = c->dur, g->corr = c->corr, g->has_corr = (uint8_t)c->has_corr;
        g->stream = c->stream, g->bytes = c->bytes, g->smem = (uint32_t)c->smem;
        g->name = id, g->host = -1;
        memcpy(g->grid, c->grid, sizeof(g->grid));
        memcpy(g->block, c->block, sizeof(g->block));
        g->copy = !kernel;
        g->ckind = memset_ ? TKP_COPY_MEMSET : TKP_COPY_MEMCPY;
        g->cdir = memset_ ? 3 : copy_dir(im->akind[0] ? im->akind : im->name);
        if (kernel) st->kernels++;
        else st->copies++;
        return 0;
    }
    if (!rt && !ann) return 0;
    if (!c->has_tid) return 0; /* a host event on a named row ("Spans"): not a thread */
    uint8_t sub = 0, flags = 0;
    int cls = ann ? H_PUSH : classify(im->name, &sub, &flags);
    if (cls == H_OTHER) {
        st->other_calls++;
        return 0;
    }
    uint32_t thread = 0;
    int err = thread_of(im, c->tid, &thread);
    if (err) return err;
    if (!im->has_pid && c->has_pid) im->pid = c->pid, im->has_pid = 1;
    if (intern(&im->nm, im->name, im->name_len, &id)) return TKP_ERR_NOMEM;
    for (int pop = 0; pop <= (cls == H_PUSH); pop++) {
        if (TKP_GROW(im->h, im->caph, im->nh + 1)) return TKP_ERR_NOMEM;
        struct hev *h = &im->h[im->nh++];
        memset(h, 0, sizeof(*h));
        h->ts = pop ? c->ts + c->dur : c->ts, h->dur = pop ? 0 : c->dur;
        h->corr = c->corr, h->has_corr = (uint8_t)(c->has_corr && !ann);
        h->thread = thread, h->name = id, h->gpu = -1;
        h->cls = (uint8_t)(pop ? H_POP : cls), h->sub = sub, h->flags = flags;
    }
    if (ann) st->annotations++;
    return 0;
}

static int read_event(struct imp *im)
{
    struct cur c;
    memset(&c, 0, sizeof(c));
    im->ph[0] = im->cat[0] = im->akind[0] = 0;
    im->name_len = 0;
    if (im->name) im->name[0] = 0;
    for (;;) {
        int t = tkp_jsonr_next(&im->j), r = 0;
        if (t == TKP_J_OBJ_END) break;
        if (t != TKP_J_KEY) return t < 0 ? jfail(im) : efail(im, "a member name");
        if (key_is(im, "ph")) r = str(im, im->ph, sizeof(im->ph));
        else if (key_is(im, "cat")) r = str(im, im->cat, sizeof(im->cat));
        else if (key_is(im, "name")) {
            t = tkp_jsonr_next(&im->j);
            if (t == TKP_J_STR) {
                if (TKP_GROW(im->name, im->name_cap, im->j.slen + 1)) return TKP_ERR_NOMEM;
                memcpy(im->name, im->j.str, im->j.slen + 1);
                im->name_len = im->j.slen;
            } else if ((r = skip_rest(im, t))) {
                return r;
            }
        } else if (key_is(im, "ts")) r = num(im, 3, &c.ts), c.has_ts = r == 1;
        else if (key_is(im, "dur")) r = num(im, 3, &c.dur), c.has_dur = r == 1;
        else if (key_is(im, "pid")) r = unum(im, &c.pid), c.has_pid = r == 1;
        else if (key_is(im, "tid")) r = unum(im, &c.tid), c.has_tid = r == 1;
        else if (key_is(im, "args")) r = read_args(im, &c);
        else r = skip_value(im);
        if (r < 0) return r;
    }
    if (!im->name) {
        if (TKP_GROW(im->name, im->name_cap, 1)) return TKP_ERR_NOMEM;
        im->name[0] = 0;
    }
    return add_event(im, &c);
}

static int read_events(struct imp *im, int t)
{
    if (t != TKP_J_ARR) return t < 0 ? jfail(im) : efail(im, "'[' (traceEvents is an array)");
    for (;;) {
        t = tkp_jsonr_next(&im->j);
        if (t == TKP_J_ARR_END) return 0;
        int err = t == TKP_J_OBJ ? read_event(im) : skip_rest(im, t);
        if (err) return err;
    }
}

static int read_devices(struct imp *im)
{
    int t = tkp_jsonr_next(&im->j);
    if (t != TKP_J_ARR) return skip_rest(im, t);
    for (;;) {
        t = tkp_jsonr_next(&im->j);
        if (t == TKP_J_ARR_END) return 0;
        if (t != TKP_J_OBJ) {
            if (skip_rest(im, t)) return TKP_ERR_RECORD;
            continue;
        }
        for (;;) {
            t = tkp_jsonr_next(&im->j);
            if (t == TKP_J_OBJ_END) break;
            if (t != TKP_J_KEY) return t < 0 ? jfail(im) : efail(im, "a member name");
            if (key_is(im, "name") && im->ndevices < DEVICES_MAX) {
                t = tkp_jsonr_next(&im->j);
                if (t == TKP_J_STR) {
                    if (!(im->devices[im->ndevices++] = strdup(im->j.str))) return TKP_ERR_NOMEM;
                } else if (skip_rest(im, t)) {
                    return TKP_ERR_RECORD;
                }
            } else if (skip_value(im)) {
                return TKP_ERR_RECORD;
            }
        }
    }
}

static int read_trace(struct imp *im)
{
    int t = tkp_jsonr_next(&im->j), err;
    if (t == TKP_J_ARR) { /* the Chrome trace format's bare array of events */
        if ((err = read_events(im, t))) return err;
    } else if (t != TKP_J_OBJ) {
        return t < 0 ? jfail(im) : efail(im, "'{' or '[' (a Chrome trace)");
    } else {
        for (;;) {
            t = tkp_jsonr_next(&im->j);
            if (t == TKP_J_OBJ_END) break;
            if (t != TKP_J_KEY) return t < 0 ? jfail(im) : efail(im, "a member name");
            if (key_is(im, "traceEvents")) err = read_events(im, tkp_jsonr_next(&im->j));
            else if (key_is(im, "baseTimeNanoseconds")) err = num(im, 0, &im->base_ns) < 0;
            else if (key_is(im, "cuda_runtime_version")) err = unum(im, &im->rt_version) < 0;
            else if (key_is(im, "cuda_driver_version")) err = unum(im, &im->drv_version) < 0;
            else if (key_is(im, "hip_runtime_version")) err = unum(im, &im->hip_version) < 0;
            else if (key_is(im, "deviceProperties")) err = read_devices(im);
            else if (key_is(im, "traceName")) {
                t = tkp_jsonr_next(&im->j);
                if (t == TKP_J_STR) {
                    free(im->trace_name);
                    if (!(im->trace_name = strdup(im->j.str))) return TKP_ERR_NOMEM;
                    err = 0;
                } else {
                    err = skip_rest(im, t);
                }
            } else err = skip_value(im);
            if (err) return err < 0 ? err : TKP_ERR_RECORD;
        }
    }
    t = tkp_jsonr_next(&im->j);
    if (t != TKP_J_END) return t < 0 ? jfail(im) : efail(im, "the end of the input");
    return 0;
}

/* ---- joining ---- */

static int join(struct imp *im)
{
    size_t cap = 1024;
    while (cap < im->nh * 2 + 2) cap *= 2;
    int64_t *tab = malloc(cap * sizeof(*tab));
    if (!tab) return TKP_ERR_NOMEM;
    memset(tab, 0xff, cap * sizeof(*tab));
    for (size_t i = 0; i < im->nh; i++) {
        if (!im->h[i].has_corr || im->h[i].cls > H_COPY) continue;
        size_t k = tkp_hash_u64(im->h[i].corr) & (cap - 1);
        while (tab[k] >= 0 && im->h[tab[k]].corr != im->h[i].corr) k = (k + 1) & (cap - 1);
        if (tab[k] < 0) tab[k] = (int64_t)i; /* a repeated id keeps its first call */
    }
    for (size_t i = 0; i < im->ng; i++) {
        struct gev *g = &im->g[i];
        if (!g->has_corr) continue;
        size_t k = tkp_hash_u64(g->corr) & (cap - 1);
        while (tab[k] >= 0 && im->h[tab[k]].corr != g->corr) k = (k + 1) & (cap - 1);
        if (tab[k] < 0) continue;
        struct hev *h = &im->h[tab[k]];
        g->host = tab[k];
        if (h->gpu < 0) h->gpu = (int64_t)i;
        if (g->copy) im->st->copies_linked++;
        else im->st->kernels_linked++;
    }
    free(tab);
    return 0;
}

/* ---- steps ---- */

struct range {
    int64_t b, e;
};

static int cmp_range(const void *a, const void *b)
{
    const struct range *x = a, *y = b;
    return x->b < y->b ? -1 : x->b > y->b ? 1 : (x->e > y->e) - (x->e < y->e);
}

/* The step ranges of the step source: user annotations matching it, outermost only, by start. */
static int ranges(struct imp *im, struct range **out, size_t *n)
{
    struct tkp_import_opts o_ = *im->opts, *o = &o_;
    regex_t re;
    if (o->step == TKP_IMPORT_STEP_AUTO) o->step = TKP_IMPORT_STEP_PROFILER;
    if (o->step == TKP_IMPORT_STEP_ANNOTATION) {
        int rc = regcomp(&re, o->pattern, REG_EXTENDED | REG_NOSUB);
        if (rc) {
            char e[128];
            regerror(rc, &re, e, sizeof(e));
            return tkp_why(im->why, im->whylen, TKP_ERR_USAGE, "--step annotation:%s: %s",
                           o->pattern, e);
        }
    }
    struct range *r = NULL;
    size_t nr = 0, cap = 0;
    for (size_t i = 0; i < im->nh; i++) {
        const struct hev *h = &im->h[i];
        if (h->cls != H_PUSH) continue;
        const char *name = im->nm.s[h->name];
        int hit = o->step == TKP_IMPORT_STEP_ANNOTATION ? !regexec(&re, name, 0, NULL, 0)
                                                        : !strncmp(name, "ProfilerStep#", 13);
        if (!hit) continue;
        if (TKP_GROW(r, cap, nr + 1)) {
            free(r);
            if (o->step == TKP_IMPORT_STEP_ANNOTATION) regfree(&re);
            return TKP_ERR_NOMEM;
        }
        r[nr++] = (struct range){h->ts, h->ts + h->dur};
    }
    if (o->step == TKP_IMPORT_STEP_ANNOTATION) regfree(&re);
    if (nr) qsort(r, nr, sizeof(*r), cmp_range);
    size_t k = 0;
    for (size_t i = 0; i < nr; i++)
        if (!k || r[i].b >= r[k - 1].e) r[k++] = r[i];
    *out = r, *n = k;
    return 0;
}

static int cmp_host(const void *a, const void *b, void *ctx)
{
    const struct hev *h = ctx;
    const struct hev *x = &h[*(const uint32_t *)a], *y = &h[*(const uint32_t *)b];
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    /* at the same instant a range closes before the next opens */
    int ox = x->cls == H_POP ? 0 : x->cls == H_PUSH ? 2 : 1;
    int oy = y->cls == H_POP ? 0 : y->cls == H_PUSH ? 2 : 1;
    if (ox != oy) return ox - oy;
    return *(const uint32_t *)a < *(const uint32_t *)b ? -1 : 1;
}

/* Which range a host record at ts falls in: 2r + 1 inside range r, 2r in the gap before it. A
 * pop at the very end of a range is its range's (the annotation's own end). */
static uint64_t range_key(const struct range *r, size_t n, int64_t ts, int pop)
{
    if (pop) {
        uint64_t k = range_key(r, n, ts - 1, 0);
        if ((k & 1) && r[k / 2].e == ts) return k;
    }
    size_t lo = 0, hi = n; /* the number of ranges with b <= ts */
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (r[mid].b <= ts) lo = mid + 1;
        else hi = mid;
    }
    if (lo && ts < r[lo - 1].e) return 2 * (uint64_t)(lo - 1) + 1;
    return 2 * (uint64_t)lo;
}

static const uint32_t sync_closes[] = {
    [TKP_SYNC_STREAM] = TKP_CLOSE_STREAM_SYNC, [TKP_SYNC_EVENT] = TKP_CLOSE_EVENT_SYNC,
    [TKP_SYNC_DEVICE] = TKP_CLOSE_DEVICE_SYNC, [TKP_SYNC_CTX] = TKP_CLOSE_DEVICE_SYNC};

/* Segments per thread (FORMAT.md "Steps"): with ranges, a segment per range and per gap between
 * ranges that the thread has records in; without (auto on a trace without ProfilerStep), the
 * shim's sync rule: a stream, event, device or context sync after work closes a token step. */
static int segment(struct imp *im, uint32_t **order_out)
{
    struct range *r = NULL;
    size_t nr = 0;
    int err = ranges(im, &r, &nr);
    if (err) return err;
    int by_sync = !nr && im->opts->step == TKP_IMPORT_STEP_AUTO;
    snprintf(im->st->step_source, sizeof(im->st->step_source), "%s",
             by_sync ? "auto: host syncs"
             : im->opts->step == TKP_IMPORT_STEP_ANNOTATION ? "annotation"
                                                             : "ProfilerStep");
    uint32_t *ord = malloc((im->nh ? im->nh : 1) * sizeof(*ord));
    if (!ord) return free(r), TKP_ERR_NOMEM;
    for (size_t i = 0; i < im->nh; i++) ord[i] = (uint32_t)i;
    qsort_r(ord, im->nh, sizeof(*ord), cmp_host, im->h);
    struct seg *s = NULL;
    uint64_t key = 0, nl = 0, ngr = 0, nc = 0;
    int close_next = 0;
    for (size_t i = 0; i < im->nh; i++) {
        struct hev *h = &im->h[ord[i]];
        uint64_t k = by_sync ? 0 : range_key(r, nr, h->ts, h->cls == H_POP);
        if (!s || s->thread != h->thread || k != key || close_next) {
            if (TKP_GROW(im->segs, im->capsegs, im->nsegs + 1)) {
                err = TKP_ERR_NOMEM;
                break;
            }
            int first = !s || s->thread != h->thread;
            struct seg *prev = s;
            s = &im->segs[im->nsegs++];
            memset(s, 0, sizeof(*s));
            s->thread = h->thread;
            s->seg = first ? 0 : prev->seg + 1;
            s->kind = by_sync || (k & 1) ? TKP_STEP_TOKEN : TKP_STEP_OUTSIDE;
            s->closed_by = by_sync ? TKP_CLOSE_EXIT : (k & 1) ? TKP_CLOSE_NVTX : TKP_CLOSE_NEXT_STEP;
            s->begin = (k & 1) ? r[k / 2].b : h->ts;
            s->end = (k & 1) ? r[k / 2].e : h->ts;
            s->mark = s->begin;
            s->gpu_end = INT64_MIN;
            key = k, nl = ngr = nc = 0, close_next = 0;
        }
        h->seg = s->seg;
        if (h->cls == H_LAUNCH) h->index = (uint32_t)nl++, s->launches++, s->mark = h->ts;
        else if (h->cls == H_GRAPH) h->index = (uint32_t)ngr++, s->graphs++, s->mark = h->ts;
        else if (h->cls == H_COPY) h->index = (uint32_t)nc++, s->copies++, s->mark = h->ts;
        if (!(key & 1) && h->ts + h->dur > s->end) s->end = h->ts + h->dur;
        if (by_sync && h->cls == H_SYNC && h->sub <= TKP_SYNC_CTX &&
            s->launches + s->graphs + s->copies) {
            s->closed_by = sync_closes[h->sub];
            close_next = 1;
        }
    }
    /* by syncs: work the program never waited for is a step closed by the end (as the shim's
     * exit); a segment of no work at all is outside */
    for (size_t i = 0; by_sync && i < im->nsegs; i++)
        if (!(im->segs[i].launches + im->segs[i].graphs + im->segs[i].copies))
            im->segs[i].kind = TKP_STEP_OUTSIDE;
    for (size_t i = 0; i < im->nsegs; i++) im->st->steps += im->segs[i].kind == TKP_STEP_TOKEN;
    free(r);
    if (err) return free(ord), err;
    *order_out = ord;
    return 0;
}

/* The segment (index in im->segs) of each host event, by the order segment() walked. */
static int seg_index(struct imp *im, const uint32_t *ord, uint32_t **out)
{
    uint32_t *si = malloc((im->nh ? im->nh : 1) * sizeof(*si));
    if (!si) return TKP_ERR_NOMEM;
    size_t s = 0;
    for (size_t i = 0; i < im->nh; i++) {
        const struct hev *h = &im->h[ord[i]];
        while (im->segs[s].thread != h->thread || im->segs[s].seg != h->seg) s++;
        si[ord[i]] = (uint32_t)s;
    }
    *out = si;
    return 0;
}

/* ---- writing ---- */

static int cmp_item(const void *a, const void *b)
{
    const struct item *x = a, *y = b;
    if (x->key != y->key) return x->key < y->key ? -1 : 1;
    if (x->order != y->order) return x->order < y->order ? -1 : 1;
    return (x->tie > y->tie) - (x->tie < y->tie);
}

static uint64_t u(int64_t ns)
{
    return ns < 0 ? 0 : (uint64_t)ns;
}

static void pack_str(msgpack_packer *pk, const char *k)
{
    tkp_capout_str(pk, k);
}

static int write_meta(struct imp *im, struct tkp_capout *w, const char *in, int64_t t0)
{
    msgpack_packer *pk = tkp_capout_rec(w, TKP_REC_META, 1);
    const char *prog = strrchr(in, '/') ? strrchr(in, '/') + 1 : in;
    msgpack_pack_map(pk, 10);
    pack_str(pk, "program"), pack_str(pk, prog);
    pack_str(pk, "pid"), msgpack_pack_uint64(pk, im->pid);
    pack_str(pk, "start_realtime_ns"), msgpack_pack_uint64(pk, u(im->base_ns + t0));
    pack_str(pk, "start_monotonic_ns"), msgpack_pack_uint64(pk, u(t0));
    pack_str(pk, "tokprof_version"), pack_str(pk, TOKPROF_VERSION_STRING);
    pack_str(pk, "cuda_runtime_version"), msgpack_pack_uint64(pk, im->rt_version);
    pack_str(pk, "cuda_driver_version"), msgpack_pack_uint64(pk, im->drv_version);
    pack_str(pk, "devices"), msgpack_pack_array(pk, (size_t)im->ndevices);
    for (int i = 0; i < im->ndevices; i++) {
        msgpack_pack_map(pk, 2);
        pack_str(pk, "name"), pack_str(pk, im->devices[i]);
        pack_str(pk, "uuid"), pack_str(pk, "");
    }
    pack_str(pk, "config"), msgpack_pack_map(pk, 2);
    pack_str(pk, "mode"), pack_str(pk, "import");
    pack_str(pk, "step"), pack_str(pk, im->st->step_source);
    const struct tkp_import_stats *st = im->st;
    pack_str(pk, "source"), msgpack_pack_map(pk, 11);
    pack_str(pk, "format"), pack_str(pk, "kineto");
    pack_str(pk, "path"), pack_str(pk, in);
    pack_str(pk, "trace_name"), pack_str(pk, im->trace_name ? im->trace_name : "");
    pack_str(pk, "base_time_ns"), msgpack_pack_int64(pk, im->base_ns);
    pack_str(pk, "hip_runtime_version"), msgpack_pack_uint64(pk, im->hip_version);
    pack_str(pk, "events"), msgpack_pack_uint64(pk, st->events);
    pack_str(pk, "kernels"), msgpack_pack_uint64(pk, st->kernels);
    pack_str(pk, "kernels_without_launch"), msgpack_pack_uint64(pk, st->kernels - st->kernels_linked);
    pack_str(pk, "copies"), msgpack_pack_uint64(pk, st->copies);
    pack_str(pk, "copies_without_call"), msgpack_pack_uint64(pk, st->copies - st->copies_linked);
    pack_str(pk, "other_calls"), msgpack_pack_uint64(pk, st->other_calls);
    return 0;
}

static void write_gpu_info(struct imp *im, struct tkp_capout *w)
{
    const struct tkp_import_stats *st = im->st;
    msgpack_packer *pk = tkp_capout_rec(w, TKP_REC_GPU_INFO, 10);
    msgpack_pack_uint64(pk, TKP_GPU_ON);
    pack_str(pk, "import");
    pack_str(pk, "imported from a PyTorch profiler (Kineto) trace");
    pack_str(pk, "kineto");
    msgpack_pack_uint64(pk, st->kernels + st->copies);
    msgpack_pack_uint64(pk, 0);
    msgpack_pack_uint64(pk, 0);
    msgpack_pack_uint64(pk, st->kernels - st->kernels_linked + st->copies - st->copies_linked);
    msgpack_pack_uint64(pk, 0);
    msgpack_pack_uint64(pk, 0);
}

static int write_host(struct imp *im, struct tkp_capout *w, const struct hev *h)
{
    const struct gev *g = h->gpu >= 0 ? &im->g[h->gpu] : NULL;
    uint64_t ns = u(h->ts);
    msgpack_packer *pk;
    int err = tkp_capout_thread(w, h->thread, im->tids[h->thread]);
    switch (h->cls) {
    case H_LAUNCH: {
        uint32_t name = g ? g->name : UINT32_MAX;
        if (!g && intern(&im->nm, "(kernel not in trace)", 21, &name)) return TKP_ERR_NOMEM;
        err = err ? err : tkp_capout_name(w, name, im->nm.s[name]);
        pk = tkp_capout_host(w, TKP_REC_LAUNCH, 13, ns, h->thread, h->seg);
        msgpack_pack_uint64(pk, name);
        msgpack_pack_uint64(pk, g ? g->stream : NONE);
        msgpack_pack_uint64(pk, (uint64_t)h->sub | h->flags);
        for (int i = 0; i < 3; i++) msgpack_pack_uint64(pk, g ? g->grid[i] : 0);
        for (int i = 0; i < 3; i++) msgpack_pack_uint64(pk, g ? g->block[i] : 0);
        msgpack_pack_uint64(pk, g ? g->smem : 0);
        break;
    }
    case H_GRAPH:
        pk = tkp_capout_host(w, TKP_REC_GRAPH_LAUNCH, 6, ns, h->thread, h->seg);
        msgpack_pack_int64(pk, -1); /* the trace has no topology */
        msgpack_pack_uint64(pk, g ? g->stream : NONE);
        msgpack_pack_uint64(pk, (uint64_t)h->sub | h->flags);
        break;
    case H_COPY:
        pk = tkp_capout_host(w, TKP_REC_COPY, 8, ns, h->thread, h->seg);
        msgpack_pack_uint64(pk, h->sub);
        msgpack_pack_uint64(pk, g ? g->cdir : (h->sub == TKP_COPY_MEMSET ? 3 : 4));
        msgpack_pack_uint64(pk, g ? g->bytes : 0);
        msgpack_pack_uint64(pk, g ? g->stream : NONE);
        msgpack_pack_uint64(pk, h->flags);
        break;
    case H_SYNC:
        pk = tkp_capout_host(w, TKP_REC_SYNC, 6, ns, h->thread, h->seg);
        msgpack_pack_uint64(pk, h->sub);
        msgpack_pack_uint64(pk, NONE);
        msgpack_pack_uint64(pk, u(h->dur));
        break;
    case H_EVREC:
    case H_WAIT:
        pk = tkp_capout_host(w, h->cls == H_EVREC ? TKP_REC_EVENT_RECORD : TKP_REC_STREAM_WAIT, 5,
                             ns, h->thread, h->seg);
        msgpack_pack_uint64(pk, NONE);
        msgpack_pack_uint64(pk, NONE);
        break;
    default: /* H_PUSH, H_POP */
        err = err ? err : tkp_capout_name(w, h->name, im->nm.s[h->name]);
        pk = tkp_capout_host(w, TKP_REC_NVTX, 6, ns, h->thread, h->seg);
        msgpack_pack_uint64(pk, h->cls == H_PUSH ? TKP_NVTX_PUSH : TKP_NVTX_POP);
        msgpack_pack_uint64(pk, h->name);
        msgpack_pack_uint64(pk, 0);
        break;
    }
    return err;
}

static int write_gpu(struct imp *im, struct tkp_capout *w, const struct gev *g)
{
    const struct hev *h = g->host >= 0 ? &im->h[g->host] : NULL;
    uint32_t join = !h ? TKP_JOIN_NONE
                  : h->cls == H_LAUNCH ? TKP_JOIN_LAUNCH
                  : h->cls == H_GRAPH ? TKP_JOIN_GRAPH_LAUNCH : TKP_JOIN_COPY;
    int err = h ? tkp_capout_thread(w, h->thread, im->tids[h->thread]) : 0;
    if (!g->copy && !err) err = tkp_capout_name(w, g->name, im->nm.s[g->name]);
    msgpack_packer *pk = tkp_capout_rec(w, g->copy ? TKP_REC_GPU_COPY : TKP_REC_GPU_KERNEL,
                                        g->copy ? 13 : 17);
    msgpack_pack_uint64(pk, u(g->ts));
    msgpack_pack_uint64(pk, u(g->ts + g->dur));
    if (g->copy) {
        msgpack_pack_uint64(pk, g->ckind);
        msgpack_pack_uint64(pk, g->cdir);
        msgpack_pack_uint64(pk, g->bytes);
    } else {
        msgpack_pack_uint64(pk, g->name);
    }
    msgpack_pack_uint64(pk, g->stream);
    msgpack_pack_uint64(pk, g->corr);
    msgpack_pack_uint64(pk, h ? h->thread : TKP_GPU_THREAD_NONE);
    msgpack_pack_uint64(pk, h ? h->seg : 0);
    msgpack_pack_uint64(pk, join);
    msgpack_pack_uint64(pk, h ? h->index : 0);
    msgpack_pack_int64(pk, -1); /* graph and node: the trace has no topology */
    msgpack_pack_int64(pk, -1);
    if (!g->copy) {
        for (int i = 0; i < 3; i++) msgpack_pack_uint64(pk, g->grid[i]);
        for (int i = 0; i < 3; i++) msgpack_pack_uint64(pk, g->block[i]);
    }
    return err;
}

static int write_capture(struct imp *im, const char *in, const char *out)
{
    uint32_t *ord = NULL, *si = NULL;
    struct item *it = NULL;
    struct tkp_capout *w = NULL;
    int err = segment(im, &ord);
    if (!err) err = seg_index(im, ord, &si);
    /* a step's last GPU end: its STEP record follows its GPU records */
    for (size_t i = 0; !err && i < im->ng; i++) {
        const struct gev *g = &im->g[i];
        if (g->host < 0) continue;
        struct seg *s = &im->segs[si[g->host]];
        if (g->ts + g->dur > s->gpu_end) s->gpu_end = g->ts + g->dur;
    }
    size_t n = im->nh + im->ng + im->nsegs, k = 0;
    if (!err && !(it = malloc((n ? n : 1) * sizeof(*it)))) err = TKP_ERR_NOMEM;
    int64_t t0 = INT64_MAX;
    for (size_t i = 0; !err && i < im->nh; i++) {
        const struct hev *h = &im->h[ord[i]];
        it[k++] = (struct item){h->ts, 0, ord[i], i};
        if (h->ts < t0) t0 = h->ts;
    }
    for (size_t i = 0; !err && i < im->ng; i++) {
        it[k++] = (struct item){im->g[i].ts, 1, (uint32_t)i, i};
        if (im->g[i].ts < t0) t0 = im->g[i].ts;
    }
    for (size_t i = 0; !err && i < im->nsegs; i++) {
        const struct seg *s = &im->segs[i];
        it[k++] = (struct item){s->gpu_end > s->end ? s->gpu_end : s->end, 2, (uint32_t)i, i};
    }
    if (!err && t0 < 0)
        err = tkp_why(im->why, im->whylen, TKP_ERR_RECORD,
                      "a timestamp before the trace's base time (ts < 0): not supported");
    if (t0 == INT64_MAX) t0 = 0;
    if (!err) {
        qsort(it, k, sizeof(*it), cmp_item);
        err = tkp_capout_open(&w, out, im->why, im->whylen);
    }
    if (!err && !(err = tkp_capout_chunk(w, u(t0)))) {
        write_meta(im, w, in, t0);
        write_gpu_info(im, w);
    }
    for (size_t i = 0; !err && i < k; i++) {
        const struct item *x = &it[i];
        if ((err = tkp_capout_chunk(w, u(x->key)))) break;
        if (x->order == 0) {
            err = write_host(im, w, &im->h[x->idx]);
        } else if (x->order == 1) {
            err = write_gpu(im, w, &im->g[x->idx]);
        } else {
            const struct seg *s = &im->segs[x->idx];
            if ((err = tkp_capout_thread(w, s->thread, im->tids[s->thread]))) break;
            msgpack_packer *pk = tkp_capout_rec(w, TKP_REC_STEP, 10);
            msgpack_pack_uint64(pk, s->seg);
            msgpack_pack_uint64(pk, s->thread);
            msgpack_pack_uint64(pk, (uint64_t)s->kind);
            msgpack_pack_uint64(pk, u(s->begin));
            msgpack_pack_uint64(pk, u(s->mark));
            msgpack_pack_uint64(pk, u(s->end));
            msgpack_pack_uint64(pk, s->closed_by);
            msgpack_pack_uint64(pk, s->launches);
            msgpack_pack_uint64(pk, s->graphs);
            msgpack_pack_uint64(pk, s->copies);
        }
    }
    if (!err) {
        for (size_t i = 0; i < im->nh; i++) {
            const struct hev *h = &im->h[i];
            im->st->launches += h->cls == H_LAUNCH;
            im->st->graph_launches += h->cls == H_GRAPH;
            im->st->host_copies += h->cls == H_COPY;
            im->st->syncs += h->cls == H_SYNC;
            im->st->events_rw += h->cls == H_EVREC || h->cls == H_WAIT;
        }
        im->st->threads = im->ntids;
    }
    if (w) {
        if (err) tkp_capout_abort(w);
        else err = tkp_capout_close(w, im->why, im->whylen);
    }
    free(it);
    free(si);
    free(ord);
    return err;
}

int tkp_import_kineto(const char *in, const char *out, const struct tkp_import_opts *opts,
                      struct tkp_import_stats *st, char *why, size_t n)
{
    struct imp im;
    memset(&im, 0, sizeof(im));
    memset(st, 0, sizeof(*st));
    im.opts = opts, im.st = st, im.why = why, im.whylen = n;
    if (!(im.gz = gzopen(in, "rb")))
        return tkp_why(why, n, TKP_ERR_IO, "%s: %s", in, strerror(errno));
    gzbuffer(im.gz, 1 << 17);
    int err = tkp_jsonr_init(&im.j, gz_read, &im);
    if (!err) err = read_trace(&im);
    if (err == TKP_ERR_RECORD) { /* name the file */
        char line[512];
        snprintf(line, sizeof(line), "%s: %s", in, why);
        tkp_why(why, n, err, "%s", line);
    }
    gzclose(im.gz);
    tkp_jsonr_free(&im.j);
    if (!err) err = join(&im);
    if (!err) err = write_capture(&im, in, out);
    if (err == TKP_ERR_NOMEM) tkp_why(why, n, err, "out of memory");
    for (size_t i = 0; i < im.nm.n; i++) free(im.nm.s[i]);
    free(im.nm.s);
    free(im.nm.h);
    free(im.h);
    free(im.g);
    free(im.segs);
    free(im.tids);
    free(im.name);
    free(im.trace_name);
    for (int i = 0; i < im.ndevices; i++) free(im.devices[i]);
    return err;
}
