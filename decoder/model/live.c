/* tokprof decoder: live figures of running processes (see live.h). */
#include "model/live.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"
#include "base/sort.h"
#include "model/figures.h"
#include "model/model.h"
#include "capture/reader.h"

const double tkp_live_hist_le[TKP_LIVE_HIST - 1] = {0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
                                                    0.1,    0.2,   0.5,   1,     2,    5,    10};

struct lstep {
    uint64_t seg;
    int used, closed, token;
    uint64_t begin, end, itl, tokens;
    uint64_t sync, launch_ns; /* the verdict's split (figures.h) */
    uint64_t gfirst, glast, busy, cover; /* kernels: span, union so far, the sweep's end */
    uint32_t cls_us[TKP_CLASSES_MAX];    /* kernel time per class, microseconds */
};

struct lthread {
    uint32_t tid;
    uint64_t cur_seg, cur_tok, cur_last; /* the open step's largest and last GEMM n */
    uint64_t last_seqs;                  /* the previous step with shapes: its last GEMM n */
    uint64_t last_token_end;
    uint64_t last_launch_seg, last_launch_ns; /* the previous launch: a step's launch gaps */
    uint64_t lgap_min1;                        /* tkp_launch_paced's */
    uint64_t loss;
    uint64_t steps;
    struct lstep ring[TKP_LIVE_RING];
};

struct lbucket {
    uint64_t sec; /* capture seconds + 1; 0 unused */
    uint64_t tokens, busy_ns, kernel_ns;
    uint64_t cls_ns[TKP_CLASSES_MAX];
};

struct lname {
    char *name;
    int cls;
    uint64_t ns[TKP_LIVE_SECONDS];
};

struct tkp_live_proc {
    struct tkp_lcount c;
    int has_shapes;
    struct lthread *t[TKP_LIVE_THREADS];
    struct lbucket b[TKP_LIVE_SECONDS];
    struct lname *names;
    size_t nnames;
    uint64_t other_ns[TKP_LIVE_SECONDS]; /* kernels past TKP_LIVE_NAMES */
    const char *last_name;               /* name_at's cache */
    struct lname *last_slot;
};

struct tkp_live {
    const struct tkp_classes *cl;
    struct tkp_live_proc **p;
    size_t np, capp;
    struct tkp_live_proc *last;
};

int tkp_live_new(const struct tkp_classes *cl, struct tkp_live **out)
{
    *out = calloc(1, sizeof(**out));
    if (!*out) return TKP_ERR_NOMEM;
    (*out)->cl = cl;
    return 0;
}

static void proc_free(struct tkp_live_proc *p)
{
    for (int i = 0; i < TKP_LIVE_THREADS; i++)
        free(p->t[i]);
    for (size_t i = 0; i < p->nnames; i++)
        free(p->names[i].name);
    free(p->names);
    free(p);
}

void tkp_live_free(struct tkp_live *l)
{
    if (!l) return;
    for (size_t i = 0; i < l->np; i++)
        proc_free(l->p[i]);
    free(l->p);
    free(l);
}

static struct tkp_live_proc *proc_of(struct tkp_live *l, uint64_t pid)
{
    if (l->last && l->last->c.pid == pid) return l->last;
    for (size_t i = 0; i < l->np; i++)
        if (l->p[i]->c.pid == pid) return l->last = l->p[i];
    if (TKP_GROW_FROM(l->p, l->capp, l->np + 1, 4)) return NULL;
    struct tkp_live_proc *p = calloc(1, sizeof(*p));
    if (!p) return NULL;
    p->c.pid = pid;
    l->p[l->np++] = p;
    return l->last = p;
}

void tkp_live_exited(struct tkp_live *l, uint64_t pid)
{
    for (size_t i = 0; i < l->np; i++)
        if (l->p[i]->c.pid == pid) l->p[i]->c.ended = 1;
}

void tkp_live_forget(struct tkp_live *l, uint64_t pid)
{
    for (size_t i = 0; i < l->np; i++) {
        if (l->p[i]->c.pid != pid) continue;
        proc_free(l->p[i]);
        memmove(&l->p[i], &l->p[i + 1], (l->np - i - 1) * sizeof(*l->p));
        l->np--;
        l->last = NULL;
        return;
    }
}

size_t tkp_live_nprocs(const struct tkp_live *l)
{
    return l->np;
}

const struct tkp_lcount *tkp_live_proc(const struct tkp_live *l, size_t i)
{
    return i < l->np ? &l->p[i]->c : NULL;
}

static struct lthread *thread_of(struct tkp_live_proc *p, uint32_t t)
{
    if (t >= TKP_LIVE_THREADS) return NULL; /* beyond the bound: counted, not windowed */
    if (!p->t[t]) p->t[t] = calloc(1, sizeof(struct lthread));
    return p->t[t];
}

/* The bucket of capture time ns, recycled when its second is new; NULL when older than kept. */
static struct lbucket *bucket(struct tkp_live_proc *p, uint64_t ns, size_t *slot)
{
    uint64_t sec = ns / 1000000000ull + 1;
    size_t i = sec % TKP_LIVE_SECONDS;
    struct lbucket *b = &p->b[i];
    if (b->sec == sec) {
        *slot = i;
        return b;
    }
    if (b->sec > sec) return NULL;
    memset(b, 0, sizeof(*b));
    b->sec = sec;
    for (size_t k = 0; k < p->nnames; k++)
        p->names[k].ns[i] = 0;
    p->other_ns[i] = 0;
    *slot = i;
    return b;
}

static struct lstep *step_slot(struct lthread *t, uint64_t seg, int make)
{
    struct lstep *s = &t->ring[seg % TKP_LIVE_RING];
    if (s->used && s->seg == seg) return s;
    if (!make || (s->used && s->seg > seg)) return NULL;
    memset(s, 0, sizeof(*s));
    s->used = 1;
    s->seg = seg;
    return s;
}

static struct lname *name_at(struct tkp_live *l, struct tkp_live_proc *p, const char *name)
{
    if (name == p->last_name && p->last_slot) return p->last_slot;
    struct lname *n = NULL;
    for (size_t i = 0; i < p->nnames; i++)
        if (!strcmp(p->names[i].name, name)) {
            n = &p->names[i];
            break;
        }
    if (!n && p->nnames < TKP_LIVE_NAMES) {
        if (!(p->nnames & (p->nnames + 1)) || !p->names) { /* grow at 0, 1, 3, 7, ... */
            size_t cap = p->nnames + 1;                    /* to 2, 4, 8, 16, ... */
            if (TKP_GROW_FROM(p->names, cap, p->nnames + 2, 2)) return NULL;
        }
        n = &p->names[p->nnames];
        memset(n, 0, sizeof(*n));
        if (!(n->name = strdup(name))) return NULL;
        n->cls = tkp_classes_match(l->cl, name);
        p->nnames++;
    }
    p->last_name = name;
    p->last_slot = n;
    return n;
}

static void add_kernel(struct tkp_live *l, struct tkp_live_proc *p, const struct tkp_record *r)
{
    uint64_t s = r->gpu.start_ns, e = r->gpu.end_ns, d = e > s ? e - s : 0;
    int cls = TKP_CLASS_COPY;
    struct lname *n = NULL;
    if (r->type == TKP_REC_GPU_KERNEL) {
        n = name_at(l, p, r->gpu.name);
        cls = n ? n->cls : tkp_classes_match(l->cl, r->gpu.name);
        p->c.kernels++;
    }
    p->c.has_gpu = 1;
    p->c.cls_ns[cls] += d;
    uint64_t busy = d;
    struct lthread *t = r->thread != TKP_GPU_THREAD_NONE ? thread_of(p, r->thread) : NULL;
    struct lstep *st = t ? step_slot(t, r->step, 1) : NULL;
    if (st) {
        if (!st->gfirst && st->closed && st->token) p->c.timed_ns += st->end - st->begin;
        if (!st->gfirst || s < st->gfirst) st->gfirst = s;
        if (e > st->glast) st->glast = e;
        uint64_t from = s > st->cover ? s : st->cover;
        busy = e > from ? e - from : 0;
        if (e > st->cover) st->cover = e;
        st->busy += busy;
        st->cls_us[cls] += (uint32_t)(d / 1000);
    }
    p->c.busy_ns += busy;
    size_t slot;
    struct lbucket *b = bucket(p, e, &slot);
    if (!b) return;
    b->busy_ns += busy;
    b->kernel_ns += d;
    b->cls_ns[cls] += d;
    if (n)
        n->ns[slot] += d;
    else if (r->type == TKP_REC_GPU_KERNEL)
        p->other_ns[slot] += d;
}

/* A launch's part of the verdict's split (figures.h): the gap from the previous launch of the
 * same step (LAUNCH only: the model's rule). */
static void add_launch(struct tkp_live_proc *p, const struct tkp_record *r)
{
    struct lthread *t = thread_of(p, r->thread);
    struct lstep *s = t ? step_slot(t, r->step, 1) : NULL;
    if (!s || r->type != TKP_REC_LAUNCH) return;
    if (t->last_launch_ns && t->last_launch_seg == r->step && r->host_ns >= t->last_launch_ns)
        s->launch_ns += tkp_launch_paced(r->host_ns - t->last_launch_ns, &t->lgap_min1);
    t->last_launch_seg = r->step, t->last_launch_ns = r->host_ns;
}

static void add_step(struct tkp_live_proc *p, const struct tkp_record *r)
{
    struct lthread *t = thread_of(p, r->thread);
    p->c.steps++;
    if (r->step_rec.kind != TKP_STEP_TOKEN) return;
    uint64_t tok;
    if (t && t->cur_seg == r->step && t->cur_tok)
        tok = t->cur_tok;
    else if (p->has_shapes)
        tok = t && t->last_seqs ? t->last_seqs : 0;
    else
        tok = 1;
    uint64_t b = r->step_rec.begin_ns, e = r->step_rec.end_ns, d = e > b ? e - b : 0;
    p->c.token_steps++;
    p->c.tokens += tok;
    p->c.dur_sum_ns += d;
    int h = 0;
    while (h < TKP_LIVE_HIST - 1 && (double)d > tkp_live_hist_le[h] * 1e9)
        h++;
    p->c.hist[h]++;
    if (!t) return;
    t->tid = r->tid ? r->tid : t->tid;
    t->steps++;
    struct lstep *s = step_slot(t, r->step, 1);
    if (s) {
        s->closed = s->token = 1;
        s->begin = b;
        s->end = e;
        if (s->gfirst) p->c.timed_ns += e - b; /* its GPU records came first */
        s->tokens = tok;
        s->itl = tkp_itl_ns(t->last_token_end, e);
    }
    t->last_token_end = e;
    size_t slot;
    struct lbucket *bk = bucket(p, e, &slot);
    if (bk) bk->tokens += tok;
}

int tkp_live_add(struct tkp_live *l, const struct tkp_record *r)
{
    if (!r->pid) return 0; /* before any META: nothing to attribute it to */
    struct tkp_live_proc *p = proc_of(l, r->pid);
    if (!p) return TKP_ERR_NOMEM;
    if (tkp_record_has_time(r->type) && r->host_ns > p->c.now_ns) p->c.now_ns = r->host_ns;
    switch (r->type) {
    case TKP_REC_META:
        snprintf(p->c.program, sizeof(p->c.program), "%s", r->meta.program);
        break;
    case TKP_REC_LAUNCH:
    case TKP_REC_GRAPH_LAUNCH:
        p->c.launches++;
        add_launch(p, r);
        break;
    case TKP_REC_SYNC: {
        struct lthread *t = thread_of(p, r->thread);
        struct lstep *s = t ? step_slot(t, r->step, 1) : NULL;
        if (s) s->sync += r->sync.wait_ns;
        break;
    }
    case TKP_REC_LIB_CALL: {
        struct lthread *t = thread_of(p, r->thread);
        int exec = r->lib_call.status == 0 && !(r->lib_call.flags & TKP_LIBF_CAPTURED) &&
                   r->lib_call.m && r->lib_call.n && r->lib_call.k && r->lib_call.batch <= 1;
        if (!t || !exec) break;
        p->has_shapes = 1;
        if (t->cur_seg != r->step) {
            if (t->cur_last) t->last_seqs = t->cur_last;
            t->cur_seg = r->step;
            t->cur_tok = 0;
        }
        if (r->lib_call.n > t->cur_tok) t->cur_tok = r->lib_call.n;
        t->cur_last = r->lib_call.n;
        break;
    }
    case TKP_REC_STEP:
        add_step(p, r);
        if (r->step_rec.end_ns > p->c.now_ns) p->c.now_ns = r->step_rec.end_ns;
        break;
    case TKP_REC_LOSS: {
        struct lthread *t = r->thread != TKP_THREAD_NONE ? thread_of(p, r->thread) : NULL;
        if (t && r->loss.dropped > t->loss) {
            p->c.dropped += r->loss.dropped - t->loss;
            t->loss = r->loss.dropped;
        }
        break;
    }
    case TKP_REC_GPU_KERNEL:
    case TKP_REC_GPU_COPY:
        add_kernel(l, p, r);
        break;
    case TKP_REC_GPU_INFO:
        if (r->gpu_info.dropped > p->c.gpu_dropped) {
            p->c.dropped += r->gpu_info.dropped - p->c.gpu_dropped;
            p->c.gpu_dropped = r->gpu_info.dropped;
        }
        break;
    default:
        break;
    }
    return 0;
}

size_t tkp_live_thread_list(const struct tkp_live *l, size_t i, uint32_t *idx, uint32_t *tid,
                            size_t max)
{
    size_t n = 0;
    if (i >= l->np) return 0;
    const struct tkp_live_proc *p = l->p[i];
    for (uint32_t t = 0; t < TKP_LIVE_THREADS && n < max; t++)
        if (p->t[t] && p->t[t]->steps) {
            idx[n] = t;
            tid[n] = p->t[t]->tid;
            n++;
        }
    return n;
}

static int by_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Inserts (key, val) into a top list sorted by decreasing val. */
static void top_insert(int *n, uint64_t *vals, void *keys, size_t ksize, const void *key,
                       uint64_t val)
{
    if (!val) return;
    int i = *n < TKP_LIVE_TOP ? (*n)++ : TKP_LIVE_TOP;
    if (i == TKP_LIVE_TOP && val <= vals[TKP_LIVE_TOP - 1]) return;
    if (i == TKP_LIVE_TOP) i--;
    while (i > 0 && vals[i - 1] < val) {
        vals[i] = vals[i - 1];
        memcpy((char *)keys + (size_t)i * ksize, (char *)keys + (size_t)(i - 1) * ksize, ksize);
        i--;
    }
    vals[i] = val;
    memcpy((char *)keys + (size_t)i * ksize, key, ksize);
}

void tkp_live_window(const struct tkp_live *l, size_t i, uint32_t thread, unsigned window_s,
                     struct tkp_lwin *w)
{
    memset(w, 0, sizeof(*w));
    w->verdict = "unknown";
    w->worst_cls = -1;
    if (i >= l->np) return;
    const struct tkp_live_proc *p = l->p[i];
    if (window_s < 1) window_s = 1;
    if (window_s > TKP_LIVE_SECONDS - 4) window_s = TKP_LIVE_SECONDS - 4;
    w->window_s = window_s;
    uint64_t now = p->c.now_ns,
             from = now > window_s * 1000000000ull ? now - window_s * 1000000000ull : 0;
    uint64_t itl[TKP_LIVE_RING], *itls = NULL;
    size_t nitl = 0, cap = 0;
    uint64_t first_end = UINT64_MAX, last_end = 0, tokens = 0, first_tok = 0;
    uint64_t dur = 0, busy = 0, in_idle = 0; /* over the timed steps (GPU records came) */
    struct tkp_split sp = {p->c.has_gpu, 0, 0, 0, 0}; /* the verdict's (figures.h) */
    for (uint32_t ti = 0; ti < TKP_LIVE_THREADS; ti++) {
        const struct lthread *t = p->t[ti];
        if (!t || (thread != TKP_LIVE_ALL && ti != thread)) continue;
        for (size_t k = 0; k < TKP_LIVE_RING; k++) {
            const struct lstep *s = &t->ring[k];
            if (!s->used || !s->closed || !s->token || s->end <= from) continue;
            w->steps++;
            tokens += s->tokens;
            if (s->end < first_end) first_end = s->end, first_tok = s->tokens;
            if (s->end > last_end) last_end = s->end;
            if (s->itl) {
                if (thread != TKP_LIVE_ALL)
                    itl[nitl++] = s->itl;
                else {
                    if (TKP_GROW_FROM(itls, cap, nitl + 1, 1024))
                        continue; /* a percentile over fewer steps */
                    itls[nitl++] = s->itl;
                }
            }
            uint64_t d = s->end - s->begin;
            /* a step without GPU records is unknown, not an idle GPU: neither in the verdict's
             * split nor in the busy share */
            if (!p->c.has_gpu || s->gfirst)
                tkp_split_add(&sp, s->itl ? s->itl : d, s->sync, s->busy, s->launch_ns);
            if (s->gfirst) {
                uint64_t span = s->glast - s->gfirst;
                w->timed_steps++;
                dur += d;
                busy += s->busy;
                in_idle += span > s->busy ? span - s->busy : 0;
            }
            if (!w->has_worst || d > w->worst_ns) {
                w->has_worst = 1;
                w->worst_ns = d;
                w->worst_seg = s->seg;
                w->worst_tid = t->tid;
                w->worst_busy_ns = s->busy;
                w->worst_timed = s->gfirst != 0;
                w->worst_cls = -1;
                uint32_t best = 0;
                for (int c = 0; c < TKP_CLASSES_MAX; c++)
                    if (s->cls_us[c] > best) best = s->cls_us[c], w->worst_cls = c;
            }
        }
    }
    /* rates between the first and the last step end of the window: the first step's own
     * tokens were made before the interval starts */
    if (w->steps > 1 && last_end > first_end) {
        double span = (double)(last_end - first_end) / 1e9;
        w->tok_s = (double)(tokens - first_tok) / span;
        w->steps_s = (double)(w->steps - 1) / span;
    }
    uint64_t *v = thread != TKP_LIVE_ALL ? itl : itls;
    if (nitl) {
        qsort(v, nitl, sizeof(*v), by_u64);
        w->itl_p50 = tkp_pct_sorted(v, nitl, 0.50);
        w->itl_p99 = tkp_pct_sorted(v, nitl, 0.99);
    }
    free(itls);
    w->has_gpu = p->c.has_gpu;
    if (w->has_worst)
        w->worst_cause = !w->has_gpu                     ? "no GPU time"
                         : !w->worst_timed                 ? "unknown (GPU not timed)"
                         : w->worst_cls < 0                ? "no GPU time"
                         : w->worst_busy_ns * 2 < w->worst_ns
                             ? "host (GPU mostly idle)"
                             : tkp_classes_name(l->cl, w->worst_cls);
    if (p->c.has_gpu && dur) {
        w->busy_share = (double)busy / (double)dur;
        if (w->busy_share > 1) w->busy_share = 1;
        uint64_t idle = dur > busy ? dur - busy : 0, out_idle = idle > in_idle ? idle - in_idle : 0;
        w->launch_idle_share = (double)in_idle / (double)dur;
        w->host_idle_share = (double)out_idle / (double)dur;
    }
    tkp_verdict_make(&sp, &w->v);
    w->verdict = w->v.word;
    /* classes and kernels over the window's buckets; the history over the last seconds */
    uint64_t nowsec = now / 1000000000ull + 1;
    uint64_t cls[TKP_CLASSES_MAX] = {0};
    for (size_t k = 0; k < TKP_LIVE_SECONDS; k++) {
        const struct lbucket *b = &p->b[k];
        if (!b->sec || b->sec + window_s <= nowsec || b->sec > nowsec) continue;
        for (int c = 0; c < TKP_CLASSES_MAX; c++)
            cls[c] += b->cls_ns[c];
        w->gpu_ns += b->kernel_ns;
    }
    for (int c = 0; c < TKP_CLASSES_MAX; c++)
        top_insert(&w->ncls, w->cls_ns, w->cls, sizeof(int), &c, cls[c]);
    for (size_t n = 0; n < p->nnames; n++) {
        uint64_t ns = 0;
        for (size_t k = 0; k < TKP_LIVE_SECONDS; k++)
            if (p->b[k].sec && p->b[k].sec + window_s > nowsec && p->b[k].sec <= nowsec)
                ns += p->names[n].ns[k];
        const char *name = p->names[n].name;
        top_insert(&w->nnames, w->name_ns, w->names, sizeof(char *), &name, ns);
    }
    for (int k = 0; k < TKP_LIVE_SPARK; k++) {
        uint64_t sec =
            nowsec >= (uint64_t)(TKP_LIVE_SPARK - 1 - k) ? nowsec - (TKP_LIVE_SPARK - 1 - k) : 0;
        const struct lbucket *b = &p->b[sec % TKP_LIVE_SECONDS];
        w->spark[k] = b->sec == sec ? (double)b->tokens : 0;
    }
}
