/* tokprof decoder: the Kineto importer's reading half (see kineto_read.h). */
#include "import/kineto_read.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/map.h"
#include "tokprof/format.h"

/* ---- names ---- */

struct nkey {
    const char *s;
    size_t len;
};

static int eq_name(const void *ctx, uint32_t id, const void *key)
{
    const char *o = ((const struct tkp_kineto_names *)ctx)->s[id];
    const struct nkey *k = key;
    return !strncmp(o, k->s, k->len) && !o[k->len];
}

int tkp_kineto_intern(struct tkp_kineto_names *t, const char *s, size_t len, uint32_t *id)
{
    struct nkey key = {s, len};
    uint64_t hv = tkp_fnv64(TKP_FNV64_SEED, s, len);
    if (tkp_map_reserve(&t->ix, t->n + 1)) return TKP_ERR_NOMEM;
    struct tkp_map_slot *ms = tkp_map_probe(&t->ix, hv, eq_name, t, &key);
    if (ms->id1) {
        *id = ms->id1 - 1;
        return 0;
    }
    if (TKP_GROW(t->s, t->cap, t->n + 1)) return TKP_ERR_NOMEM;
    char *c = malloc(len + 1);
    if (!c) return TKP_ERR_NOMEM;
    memcpy(c, s, len);
    c[len] = 0;
    t->s[t->n] = c;
    tkp_map_put(&t->ix, ms, hv, (uint32_t)t->n);
    *id = (uint32_t)t->n++;
    return 0;
}

/* ---- reading ---- */

static long gz_read(void *ctx, void *buf, size_t n)
{
    struct tkp_kineto_imp *im = ctx;
    int got = gzread(im->gz, buf, (unsigned)n);
    if (got < 0) {
        int e;
        im->gzwhy = gzerror(im->gz, &e);
        return -1;
    }
    im->st->bytes += (uint64_t)got;
    return got;
}

static int jfail(struct tkp_kineto_imp *im)
{
    if (im->gzwhy)
        return tkp_why(im->why, im->whylen, TKP_ERR_RECORD, "%s (%s)", im->j.why, im->gzwhy);
    return tkp_why(im->why, im->whylen, TKP_ERR_RECORD, "%s", im->j.why);
}

static int efail(struct tkp_kineto_imp *im, const char *what)
{
    return tkp_why(im->why, im->whylen, TKP_ERR_RECORD, "byte %llu: expected %s",
                   (unsigned long long)im->j.tok_off, what);
}

/* After a value's first token t: reads past the rest of it. */
static int skip_rest(struct tkp_kineto_imp *im, int t)
{
    if (t == TKP_J_OBJ || t == TKP_J_ARR) {
        int depth = im->j.depth - 1;
        while (im->j.depth > depth)
            if ((t = tkp_jsonr_next(&im->j)) <= 0) return t < 0 ? jfail(im) : efail(im, "a value");
    }
    return t < 0 ? jfail(im) : 0;
}

static int skip_value(struct tkp_kineto_imp *im)
{
    return tkp_jsonr_skip(&im->j) ? jfail(im) : 0;
}

/* A number value of a known key: 1 and *v when it is one that fits (scaled), 0 when the value is
 * of another type (skipped), or an error. */
static int num(struct tkp_kineto_imp *im, int scale, int64_t *v)
{
    int t = tkp_jsonr_next(&im->j);
    if (t == TKP_J_NUM) return tkp_json_fixed(im->j.str, im->j.slen, scale, v) ? 0 : 1;
    int err = skip_rest(im, t);
    return err ? err : 0;
}

static int unum(struct tkp_kineto_imp *im, uint64_t *v)
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
static int str(struct tkp_kineto_imp *im, char *dst, size_t cap)
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

static int dim3(struct tkp_kineto_imp *im, uint32_t d[3])
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

static int key_is(const struct tkp_kineto_imp *im, const char *k)
{
    return !strcmp(im->j.str, k);
}

static int read_args(struct tkp_kineto_imp *im, struct cur *c)
{
    int t = tkp_jsonr_next(&im->j);
    if (t != TKP_J_OBJ) return skip_rest(im, t);
    for (;;) {
        t = tkp_jsonr_next(&im->j);
        if (t == TKP_J_OBJ_END) return 0;
        if (t != TKP_J_KEY) return t < 0 ? jfail(im) : efail(im, "a member name");
        int r = 0;
        if (key_is(im, "correlation"))
            r = unum(im, &c->corr), c->has_corr = r == 1;
        else if (key_is(im, "stream"))
            r = unum(im, &c->stream);
        else if (key_is(im, "bytes"))
            r = unum(im, &c->bytes);
        else if (key_is(im, "shared memory"))
            r = unum(im, &c->smem);
        else if (key_is(im, "grid"))
            r = dim3(im, c->grid);
        else if (key_is(im, "block"))
            r = dim3(im, c->block);
        else if (key_is(im, "kind"))
            r = str(im, im->akind, sizeof(im->akind));
        else
            r = skip_value(im);
        if (r < 0) return r;
    }
}

/* The runtime or driver call `n`: its host record class and sub-kind (via, sync kind, copy kind).
 */
static int classify(const char *n, uint8_t *sub, uint8_t *flags)
{
    static const struct {
        const char *name;
        uint8_t cls, sub;
    } calls[] = {
        {"cudaLaunchKernel", TKP_KH_LAUNCH, TKP_VIA_RUNTIME},
        {"cudaLaunchKernelExC", TKP_KH_LAUNCH, TKP_VIA_RUNTIME_EX},
        {"cudaLaunchCooperativeKernel", TKP_KH_LAUNCH, TKP_VIA_RUNTIME},
        {"cuLaunchKernel", TKP_KH_LAUNCH, TKP_VIA_DRIVER},
        {"cuLaunchKernelEx", TKP_KH_LAUNCH, TKP_VIA_DRIVER_EX},
        {"cuLaunchCooperativeKernel", TKP_KH_LAUNCH, TKP_VIA_DRIVER},
        {"hipLaunchKernel", TKP_KH_LAUNCH, TKP_VIA_RUNTIME},
        {"hipExtLaunchKernel", TKP_KH_LAUNCH, TKP_VIA_RUNTIME_EX},
        {"hipLaunchCooperativeKernel", TKP_KH_LAUNCH, TKP_VIA_RUNTIME},
        {"hipModuleLaunchKernel", TKP_KH_LAUNCH, TKP_VIA_DRIVER},
        {"hipExtModuleLaunchKernel", TKP_KH_LAUNCH, TKP_VIA_DRIVER_EX},
        {"hipHccModuleLaunchKernel", TKP_KH_LAUNCH, TKP_VIA_DRIVER},
        {"hipModuleLaunchCooperativeKernel", TKP_KH_LAUNCH, TKP_VIA_DRIVER},
        {"cudaGraphLaunch", TKP_KH_GRAPH, TKP_VIA_GRAPH_RT},
        {"cuGraphLaunch", TKP_KH_GRAPH, TKP_VIA_GRAPH_DRV},
        {"hipGraphLaunch", TKP_KH_GRAPH, TKP_VIA_GRAPH_RT},
        {"cudaStreamSynchronize", TKP_KH_SYNC, TKP_SYNC_STREAM},
        {"cuStreamSynchronize", TKP_KH_SYNC, TKP_SYNC_STREAM},
        {"hipStreamSynchronize", TKP_KH_SYNC, TKP_SYNC_STREAM},
        {"cudaEventSynchronize", TKP_KH_SYNC, TKP_SYNC_EVENT},
        {"cuEventSynchronize", TKP_KH_SYNC, TKP_SYNC_EVENT},
        {"hipEventSynchronize", TKP_KH_SYNC, TKP_SYNC_EVENT},
        {"cudaDeviceSynchronize", TKP_KH_SYNC, TKP_SYNC_DEVICE},
        {"hipDeviceSynchronize", TKP_KH_SYNC, TKP_SYNC_DEVICE},
        {"cuCtxSynchronize", TKP_KH_SYNC, TKP_SYNC_CTX},
        {"hipCtxSynchronize", TKP_KH_SYNC, TKP_SYNC_CTX},
        {"cudaEventRecord", TKP_KH_EVREC, 0},
        {"cudaEventRecordWithFlags", TKP_KH_EVREC, 0},
        {"cuEventRecord", TKP_KH_EVREC, 0},
        {"cuEventRecordWithFlags", TKP_KH_EVREC, 0},
        {"hipEventRecord", TKP_KH_EVREC, 0},
        {"hipEventRecordWithFlags", TKP_KH_EVREC, 0},
        {"cudaStreamWaitEvent", TKP_KH_WAIT, 0},
        {"cuStreamWaitEvent", TKP_KH_WAIT, 0},
        {"hipStreamWaitEvent", TKP_KH_WAIT, 0},
    };
    char base[96];
    size_t len = strlen(n);
    if (len >= sizeof(base)) return TKP_KH_OTHER;
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
        if (calls[i].cls != TKP_KH_LAUNCH && calls[i].cls != TKP_KH_GRAPH) *flags = 0;
        return calls[i].cls;
    }
    if (!strncmp(base, "cudaMem", 7) || !strncmp(base, "cuMem", 5) || !strncmp(base, "hipMem", 6)) {
        const char *op = base + (base[1] == 'u' && base[2] == 'M' ? 5 : base[0] == 'h' ? 6 : 7);
        int set = !strncmp(op, "set", 3) || !strncmp(op, "Set", 3);
        if (set || !strncmp(op, "cpy", 3) || !strncmp(op, "Cpy", 3)) {
            *sub = set ? TKP_COPY_MEMSET : TKP_COPY_MEMCPY;
            *flags = strstr(base, "Async") ? TKP_COPY_ASYNC : 0;
            return TKP_KH_COPY;
        }
    }
    *sub = 0;
    return TKP_KH_OTHER;
}

static int ci_eq(const char *a, const char *b)
{
    return !strcasecmp(a, b);
}

static int thread_of(struct tkp_kineto_imp *im, uint64_t tid, uint32_t *thread)
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

static int add_event(struct tkp_kineto_imp *im, struct cur *c)
{
    struct tkp_import_stats *st = im->st;
    st->events++;
    if (strcmp(im->ph, "X") || !c->has_ts || !c->has_dur) return 0;
    /* a time before the base or past 2^62 ns (146 years): not a profiler's, and it could
     * overflow ts + dur */
    if (c->ts < 0 || c->dur < 0 || c->ts > TKP_KINETO_TIME_MAX || c->dur > TKP_KINETO_TIME_MAX) {
        st->bad_times++;
        return 0;
    }
    int kernel = !strcmp(im->cat, "kernel") || ci_eq(im->cat, "Kernel");
    int memcpy_ = !strcmp(im->cat, "gpu_memcpy") || ci_eq(im->cat, "Memcpy");
    int memset_ = !strcmp(im->cat, "gpu_memset") || ci_eq(im->cat, "Memset");
    int rt = !strcmp(im->cat, "cuda_runtime") || !strcmp(im->cat, "cuda_driver") ||
             ci_eq(im->cat, "Runtime") || ci_eq(im->cat, "Driver");
    int ann = !strcmp(im->cat, "user_annotation");
    uint32_t id;
    if (kernel || memcpy_ || memset_) {
        if (TKP_GROW(im->g, im->capg, im->ng + 1)) return TKP_ERR_NOMEM;
        if (tkp_kineto_intern(&im->nm, im->name, im->name_len, &id)) return TKP_ERR_NOMEM;
        struct tkp_kgpu *g = &im->g[im->ng++];
        memset(g, 0, sizeof(*g));
        g->ts = c->ts, g->dur = c->dur, g->corr = c->corr, g->has_corr = (uint8_t)c->has_corr;
        g->stream = c->stream, g->bytes = c->bytes, g->smem = (uint32_t)c->smem;
        g->name = id, g->host = -1;
        memcpy(g->grid, c->grid, sizeof(g->grid));
        memcpy(g->block, c->block, sizeof(g->block));
        g->copy = !kernel;
        g->ckind = memset_ ? TKP_COPY_MEMSET : TKP_COPY_MEMCPY;
        g->cdir = memset_ ? 3 : copy_dir(im->akind[0] ? im->akind : im->name);
        if (kernel)
            st->kernels++;
        else
            st->copies++;
        return 0;
    }
    if (!rt && !ann) return 0;
    if (!c->has_tid) return 0; /* a host event on a named row ("Spans"): not a thread */
    uint8_t sub = 0, flags = 0;
    int cls = ann ? TKP_KH_PUSH : classify(im->name, &sub, &flags);
    if (cls == TKP_KH_OTHER) {
        st->other_calls++;
        return 0;
    }
    uint32_t thread = 0;
    int err = thread_of(im, c->tid, &thread);
    if (err) return err;
    if (!im->has_pid && c->has_pid) im->pid = c->pid, im->has_pid = 1;
    if (tkp_kineto_intern(&im->nm, im->name, im->name_len, &id)) return TKP_ERR_NOMEM;
    for (int pop = 0; pop <= (cls == TKP_KH_PUSH); pop++) {
        if (TKP_GROW(im->h, im->caph, im->nh + 1)) return TKP_ERR_NOMEM;
        struct tkp_khost *h = &im->h[im->nh++];
        memset(h, 0, sizeof(*h));
        h->ts = pop ? c->ts + c->dur : c->ts, h->dur = pop ? 0 : c->dur;
        h->corr = c->corr, h->has_corr = (uint8_t)(c->has_corr && !ann);
        h->thread = thread, h->name = id, h->gpu = -1;
        h->cls = (uint8_t)(pop ? TKP_KH_POP : cls), h->sub = sub, h->flags = flags;
    }
    if (ann) st->annotations++;
    return 0;
}

static int read_event(struct tkp_kineto_imp *im)
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
        if (key_is(im, "ph"))
            r = str(im, im->ph, sizeof(im->ph));
        else if (key_is(im, "cat"))
            r = str(im, im->cat, sizeof(im->cat));
        else if (key_is(im, "name")) {
            t = tkp_jsonr_next(&im->j);
            if (t == TKP_J_STR) {
                if (TKP_GROW(im->name, im->name_cap, im->j.slen + 1)) return TKP_ERR_NOMEM;
                memcpy(im->name, im->j.str, im->j.slen + 1);
                im->name_len = im->j.slen;
            } else if ((r = skip_rest(im, t))) {
                return r;
            }
        } else if (key_is(im, "ts"))
            r = num(im, 3, &c.ts), c.has_ts = r == 1;
        else if (key_is(im, "dur"))
            r = num(im, 3, &c.dur), c.has_dur = r == 1;
        else if (key_is(im, "pid"))
            r = unum(im, &c.pid), c.has_pid = r == 1;
        else if (key_is(im, "tid"))
            r = unum(im, &c.tid), c.has_tid = r == 1;
        else if (key_is(im, "args"))
            r = read_args(im, &c);
        else
            r = skip_value(im);
        if (r < 0) return r;
    }
    if (!im->name) {
        if (TKP_GROW(im->name, im->name_cap, 1)) return TKP_ERR_NOMEM;
        im->name[0] = 0;
    }
    return add_event(im, &c);
}

static int read_events(struct tkp_kineto_imp *im, int t)
{
    if (t != TKP_J_ARR) return t < 0 ? jfail(im) : efail(im, "'[' (traceEvents is an array)");
    for (;;) {
        t = tkp_jsonr_next(&im->j);
        if (t == TKP_J_ARR_END) return 0;
        int err = t == TKP_J_OBJ ? read_event(im) : skip_rest(im, t);
        if (err) return err;
    }
}

static int read_devices(struct tkp_kineto_imp *im)
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
            if (key_is(im, "name") && im->ndevices < TKP_KINETO_DEVICES_MAX) {
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

static int read_trace(struct tkp_kineto_imp *im)
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
            if (key_is(im, "traceEvents"))
                err = read_events(im, tkp_jsonr_next(&im->j));
            else if (key_is(im, "baseTimeNanoseconds"))
                err = num(im, 0, &im->base_ns) < 0;
            else if (key_is(im, "cuda_runtime_version"))
                err = unum(im, &im->rt_version) < 0;
            else if (key_is(im, "cuda_driver_version"))
                err = unum(im, &im->drv_version) < 0;
            else if (key_is(im, "hip_runtime_version"))
                err = unum(im, &im->hip_version) < 0;
            else if (key_is(im, "deviceProperties"))
                err = read_devices(im);
            else if (key_is(im, "traceName")) {
                t = tkp_jsonr_next(&im->j);
                if (t == TKP_J_STR) {
                    free(im->trace_name);
                    if (!(im->trace_name = strdup(im->j.str))) return TKP_ERR_NOMEM;
                    err = 0;
                } else {
                    err = skip_rest(im, t);
                }
            } else
                err = skip_value(im);
            if (err) return err < 0 ? err : TKP_ERR_RECORD;
        }
    }
    t = tkp_jsonr_next(&im->j);
    if (t != TKP_J_END) return t < 0 ? jfail(im) : efail(im, "the end of the input");
    return 0;
}

int tkp_kineto_read(struct tkp_kineto_imp *im, const char *in)
{
    if (!(im->gz = gzopen(in, "rb")))
        return tkp_why(im->why, im->whylen, TKP_ERR_IO, "%s: %s", in, strerror(errno));
    gzbuffer(im->gz, 1 << 17);
    int err = tkp_jsonr_init(&im->j, gz_read, im);
    if (!err) err = read_trace(im);
    if (err == TKP_ERR_RECORD) { /* name the file */
        char line[512];
        snprintf(line, sizeof(line), "%s: %s", in, im->why);
        tkp_why(im->why, im->whylen, err, "%s", line);
    }
    gzclose(im->gz);
    im->gz = NULL;
    tkp_jsonr_free(&im->j);
    return err;
}

void tkp_kineto_free(struct tkp_kineto_imp *im)
{
    for (size_t i = 0; i < im->nm.n; i++)
        free(im->nm.s[i]);
    free(im->nm.s);
    tkp_map_free(&im->nm.ix);
    free(im->h);
    free(im->g);
    free(im->segs);
    free(im->tids);
    free(im->name);
    free(im->trace_name);
    for (int i = 0; i < im->ndevices; i++)
        free(im->devices[i]);
}
