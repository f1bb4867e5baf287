/* tokprof check: a RUN's records into the monitor in bulk (tkp_mon_read, tkp_mon_feed_run).
 *
 * The reader hands a RUN's launches and library calls over a batch at a time, by column: the
 * templates' fields by pointer, the call ids, the host times (reader.h tkp_reader_peek_full). A
 * launch or library call whose shape's plan reads nothing of it but its host time — the shape
 * decides every record-level assertion (struct tkp_shape col 1), or they are all straight
 * bounds `r.host_ts - prev r.host_ts OP k` (col 2) — is judged from the columns: no struct
 * tkp_record, nothing decoded unless a witness needs the record. One of another shape with a
 * plan (col 3) is decoded from the columns, judged by its plan and given to the step aggregates
 * without the rest of tkp_mon_feed's dispatch. A library call first sets what launches inside
 * it read (tkp_lib_call). Where nothing reads host records (no record-level assertion, no step
 * aggregate over them), a record is only counted in its step. Every other record (a step's
 * first record, shapes not planned yet) goes to tkp_mon_feed one by one, as the reader would
 * have delivered it. */
#include "check/bulk.h"

#include "check/eval.h"
#include "check/monitor_int.h"
#include "check/witness.h"

/* The probe of tkp_shape_find's cache alone, inline (the column loop's); NULL: ask the table. */
static inline struct tkp_shape *shape_recent(struct tkp_shapes *t, const struct tkp_srec *k)
{
    uint32_t c = t->recent[tkp_shape_slot(k->name, k->op, k->small)];
    if (!c) return NULL;
    struct tkp_shape *e = &t->v[c - 1];
    return e->name == k->name && e->op == k->op && e->small == k->small ? e : NULL;
}

/* Record i of b as the reader delivers it. */
static void bulk_record(const struct tkp_run_full *b, size_t i, struct tkp_record *rec)
{
    rec->offset = b->offset;
    rec->host_ns = b->host_ns[i];
    rec->thread = b->thread, rec->tid = b->tid;
    rec->pid = b->pid, rec->step = b->step;
    if (b->kind[i]) {
        rec->type = TKP_REC_LIB_CALL;
        rec->lib_call = *tkp_run_lib(b, i);
        rec->lib_call.call = b->call[i], rec->lib_call.call_ns = b->call_ns[i];
        return;
    }
    rec->type = TKP_REC_LAUNCH;
    rec->launch = *tkp_run_launch(b, i);
    rec->launch.call = b->call[i];
}

/* Launch or library call i of b, of shape e (key: its shape's fields, as tkp_decode_shape
 * decodes them), decoded into its open step's last record as host_record would. */
static struct tkp_srec *bulk_decode(struct tkp_mon *m, struct thr *h, struct open_step *o,
                                    const struct tkp_shape *e, const struct tkp_srec *key,
                                    const struct tkp_run_full *b, size_t i, uint32_t pos)
{
    struct tkp_srec *x = &o->last;
    x->token = key->token, x->kind = key->kind, x->name = key->name, x->op = key->op;
    x->lib = key->lib, x->has_lib = key->has_lib, x->small = key->small;
    x->dir = x->has_dir = x->sync = x->async = 0;
    if (b->kind[i])
        tkp_decode_lib(tkp_run_lib(b, i), b->host_ns[i], b->step, b->thread, m->next_id, x);
    else
        tkp_decode_launch(h, tkp_run_launch(b, i), b->host_ns[i], b->step, b->thread, m->next_id,
                          x);
    x->akn = e->kn, x->atr = e->tr, x->fast = e->fast;
    x->marks[0] = e->marks[0], x->marks[1] = e->marks[1];
    x->atoms_ok = 1;
    x->pos = pos;
    o->last_lazy = 0;
    return x;
}

/* Launch or library call i of b (a library call's tkp_lib_call done), of shape e (col), in
 * open step o at pos > 0 (not late): what host_record and shape_record or eval_shape do, from
 * the columns. Returns whether it decoded the record, or an
 * error (< 0). */
static int bulk_one(struct tkp_mon *m, struct thr *h, struct open_step *o, struct tkp_shape *e,
                    const struct tkp_srec *key, const struct tkp_run_full *b, size_t i)
{
    uint64_t token = key->token;
    uint32_t pos = (uint32_t)o->len++;
    o->launches += !b->kind[i], o->work += !b->kind[i];
    if (e->col == 3) { /* host_full's work, the record decoded from the columns */
        struct tkp_srec *x = bulk_decode(m, h, o, e, key, b, i, pos);
        if (m->nrec_host) tkp_eval_shape(m, h, x, e);
        int rc = m->nstream || m->nbuffered ? tkp_host_aggs(m, o, x, e) : 0;
        return rc < 0 ? rc : 1;
    }
    struct tkp_eval *E = &m->er;
    E->ts = h->ts, E->scope = (int64_t)b->step;
    if (e->marks[0]) tkp_shape_marks(E, e->marks[0]); /* one bit each (shape_col) */
    tkp_pdec_set(m, E, e);
    if (!m->rec_warm) e->npass++; /* counted once per shape at the end (pass_counts) */
    else
        for (uint64_t q = e->pass; q; q &= q - 1) {
            int j = __builtin_ctzll(q);
            m->res[m->rec_host[j]].evaluated += token >= m->rec_skip[j];
        }
    if (e->col == 1) {
        for (uint64_t q = e->counts; q; q &= q - 1)
            o->fold[m->stream[__builtin_ctzll(q)]].cnt++;
        return 0;
    }
    int dec = 0;
    uint64_t ns = b->host_ns[i];
    E->point = (int64_t)h->recs, E->now_ns = (int64_t)ns, E->cls_r = NULL;
    for (uint32_t q = e->run; q; q &= q - 1) {
        const struct rhost *a = &m->rh[__builtin_ctz(q)];
        int t = tkp_bound_delta(E, a->bound, ns ? VT_NUM : VT_UNK, (double)ns);
        if (token < a->skip) continue;
        if (t == 1) {
            m->res[a->as].evaluated++;
            continue;
        }
        if (!dec) E->r = bulk_decode(m, h, o, e, key, b, i, pos), dec = 1;
        tkp_evaluated(m, E, a->as, t, NULL, E->r, NULL);
    }
    return dec;
}

int tkp_mon_feed_run(struct tkp_mon *m, const struct tkp_run_full *b, size_t k)
{
    struct tkp_record rec;
    int rc;
    for (size_t i = 0; i < k;) {
        struct thr *h = b->thread < m->nt && m->t[b->thread].seen ? &m->t[b->thread] : NULL;
        struct open_step *o = h && h->cur && h->cur->used && h->cur->seg == b->step ? h->cur : NULL;
        size_t j = i;
        if (o && o->len && !(h->last_closed && b->step <= h->last_closed && h->tokens)) {
            uint64_t token = b->step > h->outside ? b->step - h->outside : 0;
            struct tkp_srec key;
            size_t dec = k; /* the record last decoded into o->last */
            key.token = token;
            key.has_dir = key.dir = key.sync = key.async = 0;
            for (; j < k; j++) {
                int lib = b->kind[j];
                __typeof__(tkp_run_lib(b, j)) lt = lib ? tkp_run_lib(b, j) : NULL;
                struct tkp_shape *e = NULL;
                if (!m->rec_none) {
                    if (lib) {
                        key.kind = RK_API, key.name = key.op = lt->op, key.has_lib = 1;
                        key.lib = lt->lib;
                    } else {
                        key.kind = RK_KERNEL, key.name = tkp_run_launch(b, j)->name;
                        key.has_lib = b->call[j] && b->call[j] == h->call;
                        key.op = key.has_lib ? h->lib.op : NULL;
                        key.lib = key.has_lib ? h->lib.lib : 0;
                    }
                    key.small = tkp_shape_small(&key);
                    e = shape_recent(m->shapes, &key);
                    if (!e) e = tkp_shape_find(m->shapes, &key);
                    if (!e || !e->col) break;
                }
                if (lib && (rc = tkp_lib_call(m, h, lt, b->call[j], b->step))) return rc;
                m->next_id++, m->st.records++, h->recs++;
                if (!e) {
                    /* nothing reads host records: counted (host_record's), the step's last kept
                     * raw */
                    o->len++, o->launches += !lib, o->work += !lib;
                    continue;
                }
                if ((rc = bulk_one(m, h, o, e, &key, b, j)) < 0) return rc;
                if (rc) dec = j;
            }
            if (j == k && j > i && dec != j - 1) {
                /* the step's last record, kept raw as shape_record keeps it (a record of the
                 * batch after the stretch, one by one, overwrites it) */
                bulk_record(b, j - 1, &o->last_raw);
                tkp_decode_shape(h, &o->last_raw, &o->last);
                o->last_id = m->next_id;
                o->last_lazy = 1;
            }
        }
        if (j == i) { /* one by one: the first of a step, a shape not planned */
            m->bulk_ones++;
            bulk_record(b, j++, &rec);
            if ((rc = tkp_mon_feed(m, &rec)) < 0) return rc;
        }
        i = j;
    }
    /* few from the columns: the copies cost more than they save (tkp_mon_read) */
    m->bulk_all += k;
    if (m->bulk_ones > 4096 && 5 * m->bulk_ones > 4 * m->bulk_all) m->bulk_off = 1;
    return 0;
}

int tkp_mon_read(struct tkp_mon *m, struct tkp_reader *r)
{
    struct tkp_record rec;
    struct tkp_run_full b;
    int rc;
    for (;;) {
        /* (no shape yet: nothing reads the records' shapes, or not so far; the bulk path
         * would only add the columns' copy to tkp_mon_feed's work; but where nothing reads host
         * records, launches are only counted) */
        size_t k = m->bulk_off || (!m->shapes->n && !m->rec_none) ? 0 : tkp_reader_peek_full(r, &b);
        if (k) {
            if ((rc = tkp_mon_feed_run(m, &b, k)) < 0) return rc;
            tkp_reader_take_full(r, &b, k);
            continue;
        }
        if ((rc = tkp_reader_next(r, &rec)) != 1) return rc;
        if ((rc = tkp_mon_feed(m, &rec)) < 0) return rc;
    }
}

