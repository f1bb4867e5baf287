/* tokprof decoder: the learned step definition (see steplearn.h for the rule and where it runs). */
#include "capture/steplearn.h"

#include <stdlib.h>
#include <string.h>

#include "base/grow.h"
#include "base/mp.h"
#include "capture/reader.h"
#include "capture/record.h"

/* Per thread: each serving thread has its own loop, streams and steady state. */
struct lthread {
    uint64_t seg[TKP_LEARN_RING]; /* seg + 1; 0 empty */
    struct tkp_endsig sig[TKP_LEARN_RING];
    int decided;   /* the window is learned */
    uint64_t seen; /* token STEP records fed in this pass */
    uint64_t skip; /* ... of which the prescan already learned from (the reader's pass) */
    uint32_t nwin, nwarm;
    struct tkp_endsig win[TKP_LEARN_WINDOW];
    struct tkp_endsig warm[TKP_LEARN_WINDOW]; /* the warm-up signatures */
};

struct tkp_steplearn {
    int off;        /* META says the steps are not auto's: nothing to learn */
    uint64_t total; /* token STEP records learned from, all threads */
    uint32_t open;  /* threads with a window still learning */
    struct lthread *th;
    size_t nth;
};

struct tkp_steplearn *tkp_steplearn_new(void)
{
    return calloc(1, sizeof(struct tkp_steplearn));
}

void tkp_steplearn_free(struct tkp_steplearn *l)
{
    if (!l) return;
    free(l->th);
    free(l);
}

static int sig_eq(const struct tkp_endsig *a, const struct tkp_endsig *b)
{
    return a->stream == b->stream && a->bytes == b->bytes && a->wait == b->wait;
}

static int sig_in(const struct tkp_endsig *set, uint32_t n, const struct tkp_endsig *s)
{
    for (uint32_t i = 0; i < n; i++)
        if (sig_eq(&set[i], s)) return 1;
    return 0;
}

/* Warm-up signatures: in the window's first half, never in its second (the steady state), and
 * a scalar read back (TKP_LEARN_SCALAR bytes at most: a flag, a count) or an event wait. A larger
 * copy is a loop's output (logits, a batch's sampled ids): a program that moves its loop to a new
 * stream keeps its tokens (llama-bench creates a context, and a stream, per test: its prompt
 * evaluations ended on another stream than its generated tokens). */
static void decide(struct tkp_steplearn *l, struct lthread *t)
{
    if (t->decided) return;
    t->decided = 1;
    l->open--;
    t->nwarm = 0;
    if (t->nwin < TKP_LEARN_MIN) return;
    uint32_t half = t->nwin / 2;
    /* a step whose end copy this file does not hold (a rotated file's first, its copy in the
     * previous file) says nothing: never a warm-up signature */
    for (uint32_t i = 0; i < half; i++)
        if (t->win[i].wait != 2 && t->win[i].bytes <= TKP_LEARN_SCALAR &&
            !sig_in(t->win + half, t->nwin - half, &t->win[i]) &&
            !sig_in(t->warm, t->nwarm, &t->win[i]))
            t->warm[t->nwarm++] = t->win[i];
}

/* META config.step: steps other than auto's (nvtx, marker, graph, ...) are the user's, kept;
 * a capture that does not say is auto's (the default). */
static int meta_step_auto(const struct tkp_record *r)
{
    struct tkp_mp c;
    const char *k;
    uint32_t len;
    if (!tkp_meta_config(r, "step", &c) || tkp_mp_peek(&c) != TKP_MP_STR) return 1;
    return !tkp_mp_str(&c, &k, &len) && len == 4 && !memcmp(k, "auto", 4);
}

static inline struct lthread *thread_of(struct tkp_steplearn *l, uint32_t t)
{
    if (t < l->nth) return &l->th[t];
    if (t >= TKP_THREADS_MAX) return NULL;
    if (t >= l->nth) {
        size_t cap = l->nth;
        if (tkp_grow_zeroed((void **)&l->th, &cap, (size_t)t + 1, sizeof(*l->th))) return NULL;
        l->nth = cap;
    }
    return &l->th[t];
}

static void on_step(struct tkp_steplearn *l, struct tkp_record *rec)
{
    struct lthread *t = thread_of(l, rec->thread);
    if (!t) return;
    struct tkp_endsig s = {0, 0, 2};
    uint32_t i = (uint32_t)(rec->step % TKP_LEARN_RING);
    if (t->seg[i] == rec->step + 1) s = t->sig[i];
    int cb = (int)rec->step_rec.closed_by;
    if (s.wait != 2 && (cb == TKP_CLOSE_EVENT_SYNC || cb == TKP_CLOSE_EVENT_QUERY))
        s.wait = 1, s.bytes = 0; /* an async server's output copy: its size is the batch's */
    if (!t->decided && ++t->seen > t->skip) {
        if (!t->nwin) l->open++;
        t->win[t->nwin++] = s;
        l->total++;
        if (t->nwin == TKP_LEARN_WINDOW) decide(l, t);
    }
    if (t->nwarm && sig_in(t->warm, t->nwarm, &s)) rec->step_rec.kind = TKP_STEP_WARMUP;
}

void tkp_steplearn_feed(struct tkp_steplearn *l, struct tkp_record *rec)
{
    if (rec->type == TKP_REC_META) {
        l->off = !meta_step_auto(rec);
        return;
    }
    if (l->off) return;
    if (rec->type == TKP_REC_COPY) {
        if (rec->copy.dir != TKP_DIR_DTOH) return;
        struct lthread *t = thread_of(l, rec->thread);
        if (!t) return;
        uint32_t i = (uint32_t)(rec->step % TKP_LEARN_RING);
        t->seg[i] = rec->step + 1;
        t->sig[i] = (struct tkp_endsig){rec->copy.stream, rec->copy.bytes, 0};
    } else if (rec->type == TKP_REC_STEP && rec->step_rec.kind == TKP_STEP_TOKEN) {
        on_step(l, rec);
    }
}

void tkp_steplearn_rewind(struct tkp_steplearn *l)
{
    for (size_t i = 0; i < l->nth; i++) {
        struct lthread *t = &l->th[i];
        if (!t->decided && t->nwin >= TKP_LEARN_MIN) decide(l, t);
        t->skip = t->seen;
        t->seen = 0;
        memset(t->seg, 0, sizeof(t->seg));
    }
}

int tkp_steplearn_done(const struct tkp_steplearn *l)
{
    /* every thread that has steps learned, or enough steps read: a thread whose steps start
     * later learns in the reader's pass */
    return l->off || (l->total && !l->open) || l->total >= TKP_LEARN_PRESCAN_MAX;
}
