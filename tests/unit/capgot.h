/* Test-only: what RUN and COLS tests share (criterion tests): LEB128 columns written from
 * docs/FORMAT.md, and the records a reader delivers, collected for comparison. */
#ifndef CAPGOT_H
#define CAPGOT_H

#include <stdlib.h>
#include <string.h>

#include "capread.h"
#include "base/err.h"
#include "capture/multireader.h"

/* ---- columns of LEB128 varints ---- */

struct col {
    uint8_t *p;
    size_t n, cap;
};

static inline void col_byte(struct col *c, uint8_t b)
{
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 256;
        c->p = realloc(c->p, c->cap);
        cr_assert(c->p);
    }
    c->p[c->n++] = b;
}

static inline void col_var(struct col *c, uint64_t v)
{
    do {
        col_byte(c, (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
        v >>= 7;
    } while (v);
}

static inline uint64_t zz(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

/* ---- reading ---- */

/* A delivered record's fields that a RUN, a COLS, a REP or their single records set, names as
 * strings. */
struct seen {
    int type;
    uint64_t host_ns, step, x[17];
    uint32_t thread, tid;
    char name[48];
};

struct got {
    size_t n, cap;
    struct seen *s;
    int end;
    struct tkp_reader_err err;
    struct tkp_reader_stats stats;
};

static inline void got_free(struct got *g)
{
    free(g->s);
    memset(g, 0, sizeof(*g));
}

static inline void note(struct got *g, const struct tkp_record *r)
{
    if (r->type == TKP_REC_NAME || r->type == TKP_REC_THREAD) return;
    if (g->n == g->cap) {
        g->cap = g->cap ? g->cap * 2 : 1024;
        g->s = realloc(g->s, g->cap * sizeof(*g->s));
        cr_assert(g->s);
    }
    struct seen *s = &g->s[g->n++];
    memset(s, 0, sizeof(*s));
    s->type = r->type;
    s->host_ns = r->host_ns;
    s->step = r->step;
    s->thread = r->thread;
    s->tid = r->tid;
    uint64_t *x = s->x;
    if (r->type == TKP_REC_LAUNCH) {
        const __typeof__(r->launch) *l = &r->launch;
        uint64_t v[] = {l->name_id, l->stream, l->via,     l->grid[0], l->grid[1], l->grid[2],
                        l->block[0], l->block[1], l->block[2], l->smem, l->call,   l->stack};
        memcpy(x, v, sizeof(v));
        snprintf(s->name, sizeof(s->name), "%s", l->name);
    } else if (r->type == TKP_REC_LIB_CALL) {
        const __typeof__(r->lib_call) *c = &r->lib_call;
        uint64_t v[] = {c->call,  c->lib,  c->status, c->flags,
                        c->op_id, c->m,    c->n,      c->k,
                        c->batch, c->stream, c->a_ptr, c->call_ns,
                        (uint32_t)c->atype | (uint64_t)(uint32_t)c->btype << 32,
                        (uint32_t)c->ctype | (uint64_t)(uint32_t)c->compute << 32,
                        (uint32_t)c->transa | (uint64_t)(uint32_t)c->transb << 32};
        memcpy(x, v, sizeof(v));
        snprintf(s->name, sizeof(s->name), "%s", c->op);
    } else if (r->type == TKP_REC_GPU_KERNEL || r->type == TKP_REC_GPU_COPY) {
        const __typeof__(r->gpu) *q = &r->gpu;
        uint64_t v[17] = {q->start_ns, q->end_ns,  q->name_id,  q->stream,   q->correlation,
                          q->join,     q->index,   q->graph,    q->node,     q->grid[0],
                          q->grid[1],  q->grid[2], q->block[0], q->block[1], q->block[2],
                          q->kind | (uint64_t)q->dir << 32, q->bytes};
        memcpy(x, v, sizeof(v));
        snprintf(s->name, sizeof(s->name), "%s", q->name ? q->name : "(null)");
    } else if (r->type == TKP_REC_MARKER) {
        x[0] = r->marker.kind;
        x[1] = (uint64_t)r->marker.value;
    } else if (r->type == TKP_REC_COPY) {
        const __typeof__(r->copy) *q = &r->copy;
        uint64_t v[] = {q->kind, q->dir, q->bytes, q->stream, q->flags};
        memcpy(x, v, sizeof(v));
    } else if (r->type == TKP_REC_SYNC) {
        uint64_t v[] = {r->sync.kind, r->sync.handle, r->sync.wait_ns};
        memcpy(x, v, sizeof(v));
    } else if (r->type == TKP_REC_EVENT_RECORD || r->type == TKP_REC_STREAM_WAIT) {
        x[0] = r->type == TKP_REC_EVENT_RECORD ? r->event_record.event : r->stream_wait.event;
        x[1] = r->type == TKP_REC_EVENT_RECORD ? r->event_record.stream : r->stream_wait.stream;
    } else if (r->type == TKP_REC_STEP) {
        const __typeof__(r->step_rec) *q = &r->step_rec;
        uint64_t v[] = {q->kind,      q->begin_ns, q->mark_ns,        q->end_ns,
                        q->closed_by, q->launches, q->graph_launches, q->copies};
        memcpy(x, v, sizeof(v));
    } else if (r->type == TKP_REC_GRAPH_LAUNCH) {
        uint64_t v[] = {r->graph_launch.graph, r->graph_launch.stream, r->graph_launch.via};
        memcpy(x, v, sizeof(v));
    } else if (r->type == TKP_REC_CHUNK) {
        x[0] = r->chunk.seq;
        x[1] = r->chunk.base_ns;
    }
}

static inline void drain(struct tkp_reader *r, struct got *g)
{
    struct tkp_record rec;
    while ((g->end = tkp_reader_next(r, &rec)) == 1) note(g, &rec);
    if (tkp_reader_error(r)) g->err = *tkp_reader_error(r);
    g->stats = *tkp_reader_stats(r);
    tkp_reader_close(r);
}

static inline void read_all(struct capw *w, struct got *g)
{
    memset(g, 0, sizeof(*g));
    struct tkp_reader *r = capr_open(w);
    drain(r, g);
}

static inline void same(const struct got *a, const struct got *b, const char *what)
{
    cr_assert_eq(a->end, b->end, "%s: end %d vs %d (%s / %s)", what, a->end, b->end, a->err.msg,
                 b->err.msg);
    cr_assert_eq(a->n, b->n, "%s: %zu records vs %zu", what, a->n, b->n);
    for (size_t i = 0; i < a->n; i++) {
        const struct seen *x = &a->s[i], *y = &b->s[i];
        cr_assert_eq(x->type, y->type, "%s: record %zu: type %d vs %d", what, i, x->type, y->type);
        cr_assert_eq(x->host_ns, y->host_ns, "%s: record %zu: host_ns", what, i);
        cr_assert_eq(x->step, y->step, "%s: record %zu: step", what, i);
        cr_assert_eq(x->thread, y->thread, "%s: record %zu: thread", what, i);
        cr_assert_eq(x->tid, y->tid, "%s: record %zu: tid %u vs %u", what, i, x->tid, y->tid);
        cr_assert_str_eq(x->name, y->name, "%s: record %zu: name", what, i);
        for (int k = 0; k < 17; k++)
            cr_assert_eq(x->x[k], y->x[k], "%s: record %zu (type %d): field %d: %llu vs %llu",
                         what, i, x->type, k, (unsigned long long)x->x[k],
                         (unsigned long long)y->x[k]);
    }
    cr_assert_eq(a->stats.records, b->stats.records, "%s: stats.records", what);
    cr_assert_eq(a->stats.chunks, b->stats.chunks, "%s: stats.chunks", what);
    cr_assert_eq(a->stats.missing_names, b->stats.missing_names, "%s: missing_names %llu vs %llu",
                 what, (unsigned long long)a->stats.missing_names,
                 (unsigned long long)b->stats.missing_names);
    cr_assert_eq(a->stats.missing_threads, b->stats.missing_threads, "%s: missing_threads", what);
    cr_assert_eq(a->stats.unknown_records, b->stats.unknown_records, "%s: unknown_records", what);
}

/* Ends w's chunk and reads the capture into g: that chunk must be bad with a reason about a
 * `rec` record ("RUN record") that contains msg, and the n records before it delivered. */
static inline void expect_bad_last_chunk(struct capw *w, const char *what, const char *rec,
                                         const char *msg, size_t n, struct got *g)
{
    capw_chunk_end(w);
    read_all(w, g);
    cr_assert_eq(g->end, TKP_ERR_RECORD, "%s: end %d (%s)", what, g->end, g->err.msg);
    cr_assert_eq(g->n, n, "%s: only the chunks before: %zu records (got %zu)", what, n, g->n);
    cr_assert(strstr(g->err.msg, rec), "%s: %s", what, g->err.msg);
    cr_assert(strstr(g->err.msg, msg), "%s: '%s' lacks '%s'", what, g->err.msg, msg);
}

/* Reads the captures in directory dir merged (tkp_reader_open_many) into g: a clean end. */
static inline void read_merged(const char *dir, struct got *g)
{
    const char *paths[] = {dir};
    struct tkp_reader *r;
    char why[256];
    cr_assert_eq(tkp_reader_open_many(paths, 1, &r, why, sizeof(why)), 0, "%s", why);
    cr_assert(tkp_reader_is_merged(r));
    memset(g, 0, sizeof(*g));
    drain(r, g);
    cr_assert_eq(g->end, 0, "%s", g->err.msg);
}

#endif
