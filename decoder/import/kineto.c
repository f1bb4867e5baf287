/* tokprof decoder: Kineto Chrome-trace JSON into a tokprof capture (see kineto.h). Three stages:
 * read (the JSON, streamed: the kept events into two arrays), join (correlation ids), and write
 * (segments per thread from the step source, then every record in time order). */
#include "import/kineto.h"

#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/map.h"
#include "import/capout.h"
#include "import/kineto_read.h"
#include "tokprof/format.h"
#include "tokprof/tokprof.h"

struct item {
    int64_t key;
    uint32_t order; /* 0 host, 1 GPU, 2 STEP: a step's record after the records it closes */
    uint32_t idx;
    uint64_t tie;
};

/* ---- joining ---- */

static int join(struct tkp_kineto_imp *im)
{
    struct tkp_map64 tab = {0}; /* correlation id -> host call + 1 */
    for (size_t i = 0; i < im->nh; i++) {
        if (!im->h[i].has_corr || im->h[i].cls > TKP_KH_COPY) continue;
        uint64_t *v = tkp_map64_at(&tab, im->h[i].corr, 1);
        if (!v) {
            tkp_map64_free(&tab);
            return TKP_ERR_NOMEM;
        }
        if (!*v) *v = i + 1; /* a repeated id keeps its first call */
    }
    for (size_t i = 0; i < im->ng; i++) {
        struct tkp_kgpu *g = &im->g[i];
        if (!g->has_corr) continue;
        const uint64_t *v = tkp_map64_at(&tab, g->corr, 0);
        if (!v || !*v) continue;
        struct tkp_khost *h = &im->h[*v - 1];
        g->host = (int64_t)(*v - 1);
        if (h->gpu < 0) h->gpu = (int64_t)i;
        if (g->copy)
            im->st->copies_linked++;
        else
            im->st->kernels_linked++;
    }
    tkp_map64_free(&tab);
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
static int ranges(struct tkp_kineto_imp *im, struct range **out, size_t *n)
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
        const struct tkp_khost *h = &im->h[i];
        if (h->cls != TKP_KH_PUSH) continue;
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
    const struct tkp_khost *h = ctx;
    const struct tkp_khost *x = &h[*(const uint32_t *)a], *y = &h[*(const uint32_t *)b];
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    /* at the same instant a range closes before the next opens */
    int ox = x->cls == TKP_KH_POP ? 0 : x->cls == TKP_KH_PUSH ? 2 : 1;
    int oy = y->cls == TKP_KH_POP ? 0 : y->cls == TKP_KH_PUSH ? 2 : 1;
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
        if (r[mid].b <= ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo && ts < r[lo - 1].e) return 2 * (uint64_t)(lo - 1) + 1;
    return 2 * (uint64_t)lo;
}

static const uint32_t sync_closes[] = {[TKP_SYNC_STREAM] = TKP_CLOSE_STREAM_SYNC,
                                       [TKP_SYNC_EVENT] = TKP_CLOSE_EVENT_SYNC,
                                       [TKP_SYNC_DEVICE] = TKP_CLOSE_DEVICE_SYNC,
                                       [TKP_SYNC_CTX] = TKP_CLOSE_DEVICE_SYNC};

/* Segments per thread (FORMAT.md "Steps"): with ranges, a segment per range and per gap between
 * ranges that the thread has records in; without (auto on a trace without ProfilerStep), the
 * shim's sync rule: a stream, event, device or context sync after work closes a token step. */
static int segment(struct tkp_kineto_imp *im, uint32_t **order_out)
{
    struct range *r = NULL;
    size_t nr = 0;
    int err = ranges(im, &r, &nr);
    if (err) return err;
    int by_sync = !nr && im->opts->step == TKP_IMPORT_STEP_AUTO;
    snprintf(im->st->step_source, sizeof(im->st->step_source), "%s",
             by_sync                                        ? "auto: host syncs"
             : im->opts->step == TKP_IMPORT_STEP_ANNOTATION ? "annotation"
                                                            : "ProfilerStep");
    uint32_t *ord = malloc((im->nh ? im->nh : 1) * sizeof(*ord));
    if (!ord) return free(r), TKP_ERR_NOMEM;
    for (size_t i = 0; i < im->nh; i++)
        ord[i] = (uint32_t)i;
    qsort_r(ord, im->nh, sizeof(*ord), cmp_host, im->h);
    struct tkp_kseg *s = NULL;
    uint64_t key = 0, nl = 0, ngr = 0, nc = 0;
    int close_next = 0;
    for (size_t i = 0; i < im->nh; i++) {
        struct tkp_khost *h = &im->h[ord[i]];
        uint64_t k = by_sync ? 0 : range_key(r, nr, h->ts, h->cls == TKP_KH_POP);
        if (!s || s->thread != h->thread || k != key || close_next) {
            if (TKP_GROW(im->segs, im->capsegs, im->nsegs + 1)) {
                err = TKP_ERR_NOMEM;
                break;
            }
            int first = !s || s->thread != h->thread;
            struct tkp_kseg *prev = s;
            s = &im->segs[im->nsegs++];
            memset(s, 0, sizeof(*s));
            s->thread = h->thread;
            s->seg = first ? 0 : prev->seg + 1;
            s->kind = by_sync || (k & 1) ? TKP_STEP_TOKEN : TKP_STEP_OUTSIDE;
            s->closed_by = by_sync   ? TKP_CLOSE_EXIT
                           : (k & 1) ? TKP_CLOSE_NVTX
                                     : TKP_CLOSE_NEXT_STEP;
            s->begin = (k & 1) ? r[k / 2].b : h->ts;
            s->end = (k & 1) ? r[k / 2].e : h->ts;
            s->mark = s->begin;
            s->gpu_end = INT64_MIN;
            key = k, nl = ngr = nc = 0, close_next = 0;
        }
        h->seg = s->seg;
        if (h->cls == TKP_KH_LAUNCH)
            h->index = (uint32_t)nl++, s->launches++, s->mark = h->ts;
        else if (h->cls == TKP_KH_GRAPH)
            h->index = (uint32_t)ngr++, s->graphs++, s->mark = h->ts;
        else if (h->cls == TKP_KH_COPY)
            h->index = (uint32_t)nc++, s->copies++, s->mark = h->ts;
        /* a host record ends when the call returns; an NVTX push is a point (its dur is the
         * range's) */
        int64_t end = h->cls >= TKP_KH_PUSH ? h->ts : h->ts + h->dur;
        if (!(key & 1) && end > s->end) s->end = end;
        if (by_sync && h->cls == TKP_KH_SYNC && h->sub <= TKP_SYNC_CTX &&
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
    for (size_t i = 0; i < im->nsegs; i++)
        im->st->steps += im->segs[i].kind == TKP_STEP_TOKEN;
    free(r);
    if (err) return free(ord), err;
    *order_out = ord;
    return 0;
}

/* The segment (index in im->segs) of each host event, by the order segment() walked. */
static int seg_index(struct tkp_kineto_imp *im, const uint32_t *ord, uint32_t **out)
{
    uint32_t *si = malloc((im->nh ? im->nh : 1) * sizeof(*si));
    if (!si) return TKP_ERR_NOMEM;
    size_t s = 0;
    for (size_t i = 0; i < im->nh; i++) {
        const struct tkp_khost *h = &im->h[ord[i]];
        while (im->segs[s].thread != h->thread || im->segs[s].seg != h->seg)
            s++;
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

static int write_meta(struct tkp_kineto_imp *im, struct tkp_capout *w, const char *in, int64_t t0)
{
    msgpack_packer *pk = tkp_capout_rec(w, TKP_REC_META, 1);
    const char *prog = strrchr(in, '/') ? strrchr(in, '/') + 1 : in;
    msgpack_pack_map(pk, 10);
    pack_str(pk, "program"), pack_str(pk, prog);
    pack_str(pk, "pid"), msgpack_pack_uint64(pk, im->pid);
    pack_str(pk, "start_realtime_ns"),
        msgpack_pack_uint64(pk, (uint64_t)im->base_ns + (uint64_t)t0);
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
    pack_str(pk, "kernels_without_launch"),
        msgpack_pack_uint64(pk, st->kernels - st->kernels_linked);
    pack_str(pk, "copies"), msgpack_pack_uint64(pk, st->copies);
    pack_str(pk, "copies_without_call"), msgpack_pack_uint64(pk, st->copies - st->copies_linked);
    pack_str(pk, "other_calls"), msgpack_pack_uint64(pk, st->other_calls);
    return 0;
}

static void write_gpu_info(struct tkp_kineto_imp *im, struct tkp_capout *w)
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

static int write_host(struct tkp_kineto_imp *im, struct tkp_capout *w, const struct tkp_khost *h)
{
    const struct tkp_kgpu *g = h->gpu >= 0 ? &im->g[h->gpu] : NULL;
    uint64_t ns = u(h->ts);
    msgpack_packer *pk;
    int err = tkp_capout_thread(w, h->thread, im->tids[h->thread]);
    switch (h->cls) {
    case TKP_KH_LAUNCH: {
        uint32_t name = g ? g->name : UINT32_MAX;
        if (!g && tkp_kineto_intern(&im->nm, "(kernel not in trace)", 21, &name))
            return TKP_ERR_NOMEM;
        err = err ? err : tkp_capout_name(w, name, im->nm.s[name]);
        pk = tkp_capout_host(w, TKP_REC_LAUNCH, 13, ns, h->thread, h->seg);
        msgpack_pack_uint64(pk, name);
        msgpack_pack_uint64(pk, g ? g->stream : TKP_KINETO_NONE);
        msgpack_pack_uint64(pk, (uint64_t)h->sub | h->flags);
        for (int i = 0; i < 3; i++)
            msgpack_pack_uint64(pk, g ? g->grid[i] : 0);
        for (int i = 0; i < 3; i++)
            msgpack_pack_uint64(pk, g ? g->block[i] : 0);
        msgpack_pack_uint64(pk, g ? g->smem : 0);
        break;
    }
    case TKP_KH_GRAPH:
        pk = tkp_capout_host(w, TKP_REC_GRAPH_LAUNCH, 6, ns, h->thread, h->seg);
        msgpack_pack_int64(pk, -1); /* the trace has no topology */
        msgpack_pack_uint64(pk, g ? g->stream : TKP_KINETO_NONE);
        msgpack_pack_uint64(pk, (uint64_t)h->sub | h->flags);
        break;
    case TKP_KH_COPY:
        pk = tkp_capout_host(w, TKP_REC_COPY, 8, ns, h->thread, h->seg);
        msgpack_pack_uint64(pk, h->sub);
        msgpack_pack_uint64(pk, g ? g->cdir : (h->sub == TKP_COPY_MEMSET ? 3 : 4));
        msgpack_pack_uint64(pk, g ? g->bytes : 0);
        msgpack_pack_uint64(pk, g ? g->stream : TKP_KINETO_NONE);
        msgpack_pack_uint64(pk, h->flags);
        break;
    case TKP_KH_SYNC:
        pk = tkp_capout_host(w, TKP_REC_SYNC, 6, ns, h->thread, h->seg);
        msgpack_pack_uint64(pk, h->sub);
        msgpack_pack_uint64(pk, TKP_KINETO_NONE);
        msgpack_pack_uint64(pk, u(h->dur));
        break;
    case TKP_KH_EVREC:
    case TKP_KH_WAIT:
        pk = tkp_capout_host(w, h->cls == TKP_KH_EVREC ? TKP_REC_EVENT_RECORD : TKP_REC_STREAM_WAIT,
                             5, ns, h->thread, h->seg);
        msgpack_pack_uint64(pk, TKP_KINETO_NONE);
        msgpack_pack_uint64(pk, TKP_KINETO_NONE);
        break;
    default: /* TKP_KH_PUSH, TKP_KH_POP */
        err = err ? err : tkp_capout_name(w, h->name, im->nm.s[h->name]);
        pk = tkp_capout_host(w, TKP_REC_NVTX, 6, ns, h->thread, h->seg);
        msgpack_pack_uint64(pk, h->cls == TKP_KH_PUSH ? TKP_NVTX_PUSH : TKP_NVTX_POP);
        msgpack_pack_uint64(pk, h->name);
        msgpack_pack_uint64(pk, 0);
        break;
    }
    return err;
}

static int write_gpu(struct tkp_kineto_imp *im, struct tkp_capout *w, const struct tkp_kgpu *g)
{
    const struct tkp_khost *h = g->host >= 0 ? &im->h[g->host] : NULL;
    uint32_t join = !h                        ? TKP_JOIN_NONE
                    : h->cls == TKP_KH_LAUNCH ? TKP_JOIN_LAUNCH
                    : h->cls == TKP_KH_GRAPH  ? TKP_JOIN_GRAPH_LAUNCH
                                              : TKP_JOIN_COPY;
    int err = h ? tkp_capout_thread(w, h->thread, im->tids[h->thread]) : 0;
    if (!g->copy && !err) err = tkp_capout_name(w, g->name, im->nm.s[g->name]);
    msgpack_packer *pk =
        tkp_capout_rec(w, g->copy ? TKP_REC_GPU_COPY : TKP_REC_GPU_KERNEL, g->copy ? 13 : 17);
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
        for (int i = 0; i < 3; i++)
            msgpack_pack_uint64(pk, g->grid[i]);
        for (int i = 0; i < 3; i++)
            msgpack_pack_uint64(pk, g->block[i]);
    }
    return err;
}

static int write_capture(struct tkp_kineto_imp *im, const char *in, const char *out)
{
    uint32_t *ord = NULL, *si = NULL;
    struct item *it = NULL;
    struct tkp_capout *w = NULL;
    int err = segment(im, &ord);
    if (!err) err = seg_index(im, ord, &si);
    /* a step's last GPU end: its STEP record follows its GPU records */
    for (size_t i = 0; !err && i < im->ng; i++) {
        const struct tkp_kgpu *g = &im->g[i];
        if (g->host < 0) continue;
        struct tkp_kseg *s = &im->segs[si[g->host]];
        if (g->ts + g->dur > s->gpu_end) s->gpu_end = g->ts + g->dur;
    }
    size_t n = im->nh + im->ng + im->nsegs, k = 0;
    if (!err && !(it = malloc((n ? n : 1) * sizeof(*it)))) err = TKP_ERR_NOMEM;
    int64_t t0 = INT64_MAX;
    for (size_t i = 0; !err && i < im->nh; i++) {
        const struct tkp_khost *h = &im->h[ord[i]];
        it[k++] = (struct item){h->ts, 0, ord[i], i};
        if (h->ts < t0) t0 = h->ts;
    }
    for (size_t i = 0; !err && i < im->ng; i++) {
        it[k++] = (struct item){im->g[i].ts, 1, (uint32_t)i, i};
        if (im->g[i].ts < t0) t0 = im->g[i].ts;
    }
    for (size_t i = 0; !err && i < im->nsegs; i++) {
        const struct tkp_kseg *s = &im->segs[i];
        it[k++] = (struct item){s->gpu_end > s->end ? s->gpu_end : s->end, 2, (uint32_t)i, i};
    }
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
            const struct tkp_kseg *s = &im->segs[x->idx];
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
            const struct tkp_khost *h = &im->h[i];
            im->st->launches += h->cls == TKP_KH_LAUNCH;
            im->st->graph_launches += h->cls == TKP_KH_GRAPH;
            im->st->host_copies += h->cls == TKP_KH_COPY;
            im->st->syncs += h->cls == TKP_KH_SYNC;
            im->st->events_rw += h->cls == TKP_KH_EVREC || h->cls == TKP_KH_WAIT;
        }
        im->st->threads = im->ntids;
    }
    if (w) {
        if (err)
            tkp_capout_abort(w);
        else
            err = tkp_capout_close(w, im->why, im->whylen);
    }
    free(it);
    free(si);
    free(ord);
    return err;
}

int tkp_import_kineto(const char *in, const char *out, const struct tkp_import_opts *opts,
                      struct tkp_import_stats *st, char *why, size_t n)
{
    struct tkp_kineto_imp im;
    memset(&im, 0, sizeof(im));
    memset(st, 0, sizeof(*st));
    im.opts = opts, im.st = st, im.why = why, im.whylen = n;
    int err = tkp_kineto_read(&im, in);
    if (!err) err = join(&im);
    if (!err) err = write_capture(&im, in, out);
    if (err == TKP_ERR_NOMEM) tkp_why(why, n, err, "out of memory");
    tkp_kineto_free(&im);
    return err;
}
