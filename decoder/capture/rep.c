/* tokprof decoder: REP records (rep.h; docs/FORMAT.md "Repeats"). */
#include "capture/rep.h"

#include <string.h>

#include "base/err.h"

void tkp_rep_chunk(struct tkp_rep *u)
{
    u->nh = u->nt = 0;
    u->wait = 0;
    u->xn = u->xi = 0;
}

int tkp_rep_is(const struct tkp_mp *c)
{
    const uint8_t *p = c->p;
    if (tkp_mp_left(c) < 2) return 0;
    if ((p[0] & 0xf0) == 0x90 && p[1] < 0x80) return p[1] == TKP_REC_REP; /* the usual form */
    struct tkp_mp d = *c;
    uint32_t n;
    uint64_t type;
    return !tkp_mp_array(&d, &n) && n && !tkp_mp_u64(&d, &type) && type == TKP_REC_REP;
}

static void push_time(struct tkp_rep *u, uint64_t t)
{
    u->t[u->nt++ % TKP_REP_TIMES] = t;
}

/* A record joins the history; its host times (FORMAT.md: a STEP's refs) the time list. */
static void push(struct tkp_rep *u, const struct tkp_rep_rec *r, uint64_t chain)
{
    u->h[u->nh++ % TKP_REP_MAX] = *r;
    if (!tkp_rep_timed(r->type)) return;
    push_time(u, chain);
    if (r->type == TKP_REC_SYNC) push_time(u, chain + r->v[6]); /* its end */
}

void tkp_rep_note(struct tkp_rep *u, const uint8_t *p, const uint8_t *end, uint64_t chain)
{
    struct tkp_mp c = {p, end};
    struct tkp_rep_rec r;
    uint32_t n;
    uint64_t type;
    if (tkp_mp_array(&c, &n) || n < 2 || n >= TKP_REP_NEL || tkp_mp_u64(&c, &type) ||
        !tkp_rep_times(type))
        return;
    r.type = (uint8_t)type;
    r.nel = (uint8_t)n;
    r.v[0] = 0;
    for (uint32_t k = 1; k < n; k++) {
        enum tkp_mp_type t = tkp_mp_peek(&c);
        int64_t s;
        if (t == TKP_MP_UINT ? tkp_mp_u64(&c, &r.v[k]) || r.v[k] >> 63
                             : t != TKP_MP_INT || tkp_mp_i64(&c, &s))
            return; /* not an integer, or above 2^63-1: not groupable */
        if (t == TKP_MP_INT) r.v[k] = (uint64_t)s;
    }
    if (r.type == TKP_REC_STEP) /* its times against the chain (refs 0) */
        for (int k = 4; k <= 6; k++) r.v[k] -= chain;
    else /* its dt against the end of a SYNC before it */
        r.v[1] -= u->wait, u->wait = r.type == TKP_REC_SYNC ? r.v[6] : 0;
    push(u, &r, chain);
}

/* One LEB128 varint of a column at p: past it, NULL at the column's end or past 64 bits. */
static const uint8_t *varint_at(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    uint64_t x = 0;
    for (unsigned s = 0; p < end && s < 70; s += 7) {
        uint8_t b = *p++;
        if (s == 63 && b > 1) return NULL;
        x |= (uint64_t)(b & 0x7f) << s;
        if (!(b & 0x80)) {
            *v = x;
            return p;
        }
    }
    return NULL;
}

/* msgpack's shortest form of an unsigned / a signed value (the record decoder reads any) */
static inline uint8_t *pack_be(uint8_t *o, uint8_t head, uint64_t v, int n)
{
    *o++ = head;
    uint64_t be = __builtin_bswap64(v << (64 - 8 * n)); /* its n low bytes, big-endian */
    memcpy(o, &be, 8); /* out has room past any record (TKP_REP_PAD) */
    return o + n;
}

static inline uint8_t *pack_uint(uint8_t *o, uint64_t v)
{
    if (v < 0x80) {
        *o++ = (uint8_t)v;
        return o;
    }
    if (v <= 0xffffffffu)
        return v <= 0xff ? pack_be(o, 0xcc, v, 1) : v <= 0xffff ? pack_be(o, 0xcd, v, 2)
                                                                 : pack_be(o, 0xce, v, 4);
    return pack_be(o, 0xcf, v, 8);
}

static inline uint8_t *pack_int(uint8_t *o, int64_t v)
{
    if (v >= 0) return pack_uint(o, (uint64_t)v);
    if (v >= -32) {
        *o++ = (uint8_t)v;
        return o;
    }
    return v >= INT8_MIN    ? pack_be(o, 0xd0, (uint64_t)v, 1)
           : v >= INT16_MIN ? pack_be(o, 0xd1, (uint64_t)v, 2)
           : v >= INT32_MIN ? pack_be(o, 0xd2, (uint64_t)v, 4)
                            : pack_be(o, 0xd3, (uint64_t)v, 8);
}

int tkp_rep_expand(struct tkp_rep *u, struct tkp_mp *c, uint64_t chain, char *why, size_t whylen)
{
    uint32_t nel;
    uint64_t type, n, back;
    const uint8_t *col[2];
    uint32_t len[2];
    const uint8_t *p = c->p;
    size_t room = tkp_mp_left(c);
    /* the writer's form inline: a fixarray of 5, n and back fixints, two bin8 columns; anything
     * else is read the general way, with its reasons */
    if (room >= 8 && p[0] == 0x95 && p[1] == TKP_REC_REP && p[2] < 0x80 && p[3] < 0x80 &&
        p[4] == 0xc4 && room >= 8 + (size_t)p[5] && p[6 + p[5]] == 0xc4 &&
        room >= 8 + (size_t)p[5] + p[7 + p[5]]) {
        n = p[2], back = p[3];
        col[0] = p + 6, len[0] = p[5];
        col[1] = p + 8 + p[5], len[1] = p[7 + p[5]];
        c->p = col[1] + len[1];
    } else {
        if (tkp_mp_array(c, &nel) || nel < 5 || tkp_mp_u64(c, &type) || tkp_mp_u64(c, &n) ||
            tkp_mp_u64(c, &back) || tkp_mp_bin(c, &col[0], &len[0]) ||
            tkp_mp_bin(c, &col[1], &len[1]))
            return tkp_why(why, whylen, TKP_ERR_RECORD, "REP: [33, n, back, times, others] expected");
        for (uint32_t k = 5; k < nel; k++) /* a later writer's elements */
            if (tkp_mp_skip(c)) return tkp_why(why, whylen, TKP_ERR_RECORD, "REP: unreadable element");
    }
    if (!n || n > TKP_REP_MAX || !back || back > TKP_REP_MAX || back > u->nh)
        return tkp_why(why, whylen, TKP_ERR_RECORD,
                       "REP of %llu records %llu back, after %u groupable records (1..%u each)",
                       (unsigned long long)n, (unsigned long long)back, u->nh, TKP_REP_MAX);
    const uint8_t *pt = col[0], *po = col[1], *et = col[0] + len[0], *eo = col[1] + len[1];
    for (uint32_t i = 0; i < n; i++) {
        /* the record `back` before it, and its own slot in the history (the same one when back
         * is TKP_REP_MAX: each value is read before it is replaced) */
        const struct tkp_rep_rec *s = &u->h[(u->nh - back) % TKP_REP_MAX];
        struct tkp_rep_rec *r = &u->h[u->nh % TKP_REP_MAX];
        uint64_t *x = u->x[i];
        uint32_t tm = tkp_rep_times(s->type), nel = s->nel;
        int timed = tkp_rep_timed(s->type);
        r->type = s->type, r->nel = (uint8_t)nel;
        uint64_t d;
        uint32_t bits = tm >> 1; /* bit 0: element k is a time */
        for (uint32_t k = 1; k < nel; k++, bits >>= 1) {
            if (bits & 1) { /* a time */
                if (pt < et && *pt < 0x80) /* one byte: most values, unzigzagged by a table */
                    d = (uint64_t)tkp_unzz_byte[*pt++];
                else if ((pt = varint_at(pt, et, &d)))
                    d = tkp_rep_unzz(d);
                else
                    return tkp_why(why, whylen, TKP_ERR_RECORD, "REP: its times column ends early");
            } else {
                if (po < eo && *po < 0x80)
                    d = (uint64_t)tkp_unzz_byte[*po++];
                else if ((po = varint_at(po, eo, &d)))
                    d = tkp_rep_unzz(d);
                else
                    return tkp_why(why, whylen, TKP_ERR_RECORD, "REP: its others column ends early");
            }
            x[k] = r->v[k] = s->v[k] + d;
        }
        r->v[0] = s->v[0];
        if (timed) { /* a dt: after a SYNC, against its end; the dt chain */
            x[1] += u->wait;
            chain += x[1];
            u->wait = r->type == TKP_REC_SYNC ? r->v[6] : 0;
        } else { /* a STEP: its refs, its times against them */
            if (!(po = varint_at(po, eo, &d)))
                return tkp_why(why, whylen, TKP_ERR_RECORD, "REP: its others column ends early");
            r->v[0] += tkp_rep_unzz(d);
            if (r->v[0] >> 3 * TKP_REP_REF_BITS)
                return tkp_why(why, whylen, TKP_ERR_RECORD, "REP: a STEP's refs %llu",
                               (unsigned long long)r->v[0]);
            for (int k = 4; k <= 6; k++) {
                uint32_t j = (uint32_t)(r->v[0] >> (TKP_REP_REF_BITS * (k - 4))) & 31;
                if (j > u->nt)
                    return tkp_why(why, whylen, TKP_ERR_RECORD,
                                   "REP: a STEP time refers to host time %u of %u", j, u->nt);
                x[k] += j ? u->t[(u->nt - j) % TKP_REP_TIMES] : chain;
            }
        }
        u->nh++;
        if (timed) { /* the host times a STEP may refer to */
            push_time(u, chain);
            if (r->type == TKP_REC_SYNC) push_time(u, chain + r->v[6]); /* its end */
        }
    }
    if (pt != et || po != eo)
        return tkp_why(why, whylen, TKP_ERR_RECORD, "REP: bytes after its last value");
    u->xn = (uint32_t)n;
    u->xi = 0;
    return 0;
}

void tkp_rep_pack_next(struct tkp_rep *u)
{
    const struct tkp_rep_rec *r = &u->h[(u->nh - u->xn + u->xi) % TKP_REP_MAX];
    const uint64_t *x = u->x[u->xi++];
    uint8_t *o = u->out;
    *o++ = (uint8_t)(0x90 | r->nel);
    *o++ = r->type;
    for (uint32_t k = 1; k < r->nel; k++) {
        if (r->type == TKP_REC_STEP && k >= 4 && k <= 6) /* a time: unsigned */
            o = pack_uint(o, x[k]);
        else if (x[k] < 0x80 || x[k] >= (uint64_t)-32) /* a fixint, positive or negative */
            *o++ = (uint8_t)x[k];
        else
            o = pack_int(o, (int64_t)x[k]);
    }
    u->cur.p = u->out;
    u->cur.end = o + TKP_REP_PAD; /* within out: whatever bytes are there, no record reads them */
}

/* The fixed-layout records' fields from their elements' values, in wire order (records.def),
 * as tkp_record_decode_fast() sets them. */
#define ST_u32(dst) dst = (uint32_t)x[e++];
#define ST_u64(dst) dst = x[e++];
#define ST_i64(dst) dst = (int64_t)x[e++];
#define ST_cenum(dst) dst = (int32_t)x[e++];
#define ST_dim3(dst) dst[0] = (uint32_t)x[e], dst[1] = (uint32_t)x[e + 1], dst[2] = (uint32_t)x[e + 2], e += 3;
#define ST_HEAD_HOST b->dt = (int64_t)x[1], r->thread = (uint32_t)x[2], r->step = x[3], e = 4;
#define ST_HEAD_STEP r->step = x[1], r->thread = (uint32_t)x[2], e = 3;
#define ST_HEAD_ANYTHREAD r->thread = (uint32_t)x[1], e = 2;
#define ST_F(kind, name, wire) ST_##kind(x_->name)
#define ST_X(ctype, name) x_->name = 0;
#define ST_R(T, member, head, fields, extra)                                                       \
    case TKP_REC_##T: {                                                                            \
        __typeof__(r->member) *x_ = &r->member;                                                    \
        ST_HEAD_##head fields extra break;                                                         \
    }

/* The first pass's check of a fixed-layout record or a GRAPH_LAUNCH from its values: the range
 * of each field's kind (records.def), as the record decoder checks it (record.c: u32f, u64f,
 * threadf; a STEP's times are written unsigned, so any value is one). */
#define CK_u32(k) ok &= x[k] <= UINT32_MAX;
#define CK_u64(k) ok &= !(x[k] >> 63) || (h->type == TKP_REC_STEP && (k) >= 4 && (k) <= 6);
#define CK_i64(k)
#define CK_cenum(k) ok &= (int64_t)x[k] >= -1 && (int64_t)x[k] <= INT32_MAX;
#define CK_dim3(k) ok &= x[k] <= UINT32_MAX && x[k + 1] <= UINT32_MAX && x[k + 2] <= UINT32_MAX;
#define CK_N_u32 1
#define CK_N_u64 1
#define CK_N_i64 1
#define CK_N_cenum 1
#define CK_N_dim3 3
#define CK_HEAD_HOST ok &= x[2] < TKP_THREADS_MAX && !(x[3] >> 63), e = 4;
#define CK_HEAD_STEP ok &= !(x[1] >> 63) && x[2] < TKP_THREADS_MAX, e = 3;
#define CK_HEAD_ANYTHREAD ok &= x[1] < TKP_THREADS_MAX || x[1] == UINT32_MAX, e = 2;
#define CK_F(kind, name, wire) CK_##kind(e) e += CK_N_##kind;
#define CK_X(ctype, name)
#define CK_R(T, member, head, fields, extra)                                                       \
    case TKP_REC_##T:                                                                              \
        CK_HEAD_##head fields break;

int tkp_rep_check_next(struct tkp_rep *u)
{
    const struct tkp_rep_rec *h = &u->h[(u->nh - u->xn + u->xi) % TKP_REP_MAX];
    const uint64_t *x = u->x[u->xi];
    uint32_t e = 1;
    int ok = 1;
    switch (h->type) {
    case TKP_REC_GRAPH_LAUNCH: /* graph: unsigned or -1 */
        CK_HEAD_HOST ok &= !(x[4] >> 63) || x[4] == UINT64_MAX;
        ok &= !(x[5] >> 63) && x[6] <= UINT32_MAX;
        break;
        TKP_RECORDS_FIXED(CK_R, CK_F, CK_X)
    default:
        return 0; /* LAUNCH_T, LIB_CALL_T */
    }
    (void)e;
    if (!ok) return -1;
    u->xi++;
    return 1;
}

int tkp_rep_store_next(struct tkp_rep *u, struct tkp_record *r, struct tkp_decode_buf *b)
{
    const struct tkp_rep_rec *h = &u->h[(u->nh - u->xn + u->xi) % TKP_REP_MAX];
    const uint64_t *x = u->x[u->xi];
    uint32_t e = 1;
    r->type = (enum tkp_rec)h->type;
    r->offset = r->host_ns = 0;
    r->tid = 0;
    r->step = 0;
    b->dt = 0;
    switch (h->type) {
    case TKP_REC_GRAPH_LAUNCH:
        ST_HEAD_HOST
        r->graph_launch.graph = (int64_t)x[4] == -1 ? TKP_GRAPH_UNKNOWN : x[4];
        r->graph_launch.stream = x[5];
        r->graph_launch.via = (uint32_t)x[6];
        break;
        TKP_RECORDS_FIXED(ST_R, ST_F, ST_X)
    default:
        return 0; /* LAUNCH_T, LIB_CALL_T */
    }
    (void)e;
    u->xi++;
    return 1;
}
