/* REP records (rep.h; docs/FORMAT.md "Repeats"). A group's records are packed as usual into a
 * buffer of their own and read back here (a few records a step: the parse is cheap), so that
 * what a REP stands for is by construction the bytes the records would have been. */
#include "writer/rep.h"

#include <string.h>

#include "record/col.h"
#include "tokprof/rep.h"

#define TYPE_NOT 0xffu

/* A groupable record as the REP codes it: its type, element count and values (v[k], element k;
 * v[0] a STEP's refs, unused otherwise). A STEP's times are v = time - T(ref). */
struct grec {
    uint8_t type, nel;
    uint64_t v[TKP_REP_NEL];
    uint64_t chain, t[3]; /* a STEP's: the dt chain at it, its times */
};

static struct {
    msgpack_packer *out;
    int mode;
    msgpack_sbuffer gsb; /* the group's records, packed */
    msgpack_packer gpk;
    uint32_t at[TKP_REP_MAX + 1]; /* where each record of the group begins in gsb */
    struct grec g[TKP_REP_MAX];   /* the group */
    uint32_t n;
    struct grec h[TKP_REP_MAX]; /* the chunk's last groupable records, a ring */
    uint32_t nh;                /* groupable records in the chunk so far */
    uint64_t t[TKP_REP_TIMES];  /* the chunk's last host times (FORMAT.md: a STEP's refs), a ring */
    uint32_t nt;
    uint64_t wait; /* the last timed groupable record's wait_ns if it is a SYNC, else 0 */
    uint32_t back; /* the last REP's */
    struct tkp_col times, others;
} R;

void tkp_wrep_init(msgpack_packer *out, int mode)
{
    R.out = out;
    R.mode = mode;
    msgpack_sbuffer_init(&R.gsb);
    msgpack_packer_init(&R.gpk, &R.gsb, msgpack_sbuffer_write);
}

int tkp_wrep_on(void)
{
    return R.out && R.mode != 1;
}

void tkp_wrep_chunk(void)
{
    R.nh = R.nt = 0;
    R.wait = 0;
    R.back = 0;
}

msgpack_packer *tkp_wrep_packer(void)
{
    return &R.gpk;
}

/* A msgpack integer at p (< end) into *v (two's complement); its length, 0 when it is not one or
 * is an unsigned value above 2^63-1 (FORMAT.md: such a record is not groupable). */
static inline uint32_t mp_int(const uint8_t *p, const uint8_t *end, uint64_t *v)
{
    uint8_t b = *p;
    if (b <= 0x7f || b >= 0xe0) { /* a fixint */
        *v = (uint64_t)(int64_t)(int8_t)b;
        if (b <= 0x7f) *v = b;
        return 1;
    }
    static const uint8_t len[] = {[0xcc - 0xcc] = 1, 2, 4, 8, [0xd0 - 0xcc] = 1, 2, 4, 8};
    if (b < 0xcc || b > 0xd3) return 0;
    uint32_t n = len[b - 0xcc];
    if ((size_t)(end - p) < 1 + n) return 0;
    uint64_t x = 0;
    if (n == 8) { /* a 64-bit value: its bytes big-endian */
        memcpy(&x, p + 1, 8);
        x = __builtin_bswap64(x);
    } else {
        for (uint32_t i = 0; i < n; i++) x = x << 8 | p[1 + i];
    }
    if (b >= 0xd0 && n < 8) { /* sign-extend */
        uint64_t sign = 1ull << (8 * n - 1);
        x = (x ^ sign) - sign;
    }
    if (b == 0xcf && x >> 63) return 0;
    *v = x;
    return 1 + n;
}

/* The record at [p, end) as a grec; 0 when it is not groupable. */
static int parse(const uint8_t *p, const uint8_t *end, struct grec *r)
{
    if (p >= end || (*p & 0xf0) != 0x90) return 0;
    uint32_t nel = *p++ & 0x0f;
    uint64_t type;
    uint32_t k = p < end ? mp_int(p, end, &type) : 0;
    if (nel < 2 || !k || !tkp_rep_times(type)) return 0;
    p += k;
    r->type = (uint8_t)type;
    r->nel = (uint8_t)nel;
    r->v[0] = 0;
    for (uint32_t e = 1; e < nel; e++) {
        if (p >= end || !(k = mp_int(p, end, &r->v[e]))) return 0;
        p += k;
    }
    return p == end;
}

static const struct grec *hist(uint32_t back_from_end)
{
    return &R.h[(R.nh - back_from_end) % TKP_REP_MAX];
}

static void push_time(uint64_t t)
{
    R.t[R.nt++ % TKP_REP_TIMES] = t;
}

/* A STEP's time as a difference against the nearest of the chain and the recent host times. */
static uint64_t step_time(uint64_t t, uint64_t chain, uint32_t *ref)
{
    uint64_t best = t - chain;
    *ref = 0;
    uint32_t m = R.nt < TKP_REP_TIMES - 1 ? R.nt : TKP_REP_TIMES - 1;
    for (uint32_t j = 1; j <= m && best; j++) {
        uint64_t d = t - R.t[(R.nt - j) % TKP_REP_TIMES];
        if ((d + (d >> 63 ? 0 - 2 * d : 0)) < (best + (best >> 63 ? 0 - 2 * best : 0)))
            best = d, *ref = j;
    }
    return best;
}

static void plain(uint32_t from, uint32_t to)
{
    if (to > from) R.out->callback(R.out->data, R.gsb.data + R.at[from], R.at[to] - R.at[from]);
}

static void group_out(void);
static void group_clear(void)
{
    R.n = 0;
    msgpack_sbuffer_clear(&R.gsb);
    R.at[0] = 0;
}

void tkp_wrep_added(uint64_t chain)
{
    uint32_t i = R.n;
    const uint8_t *p = (const uint8_t *)R.gsb.data + R.at[i], *end = (const uint8_t *)R.gsb.data + R.gsb.size;
    struct grec *r = &R.g[i];
    if (!parse(p, end, r)) { /* after the group before it, as it is */
        R.at[i + 1] = (uint32_t)R.gsb.size;
        group_out();
        plain(i, i + 1);
        group_clear();
        return;
    }
    if (tkp_rep_timed(r->type)) { /* its dt against the end of a SYNC just before it */
        r->v[1] -= R.wait;
        R.wait = r->type == TKP_REC_SYNC ? r->v[6] : 0;
        push_time(chain);
        if (r->type == TKP_REC_SYNC) push_time(chain + r->v[6]); /* its end */
    } else { /* STEP: begin, mark, end against their refs */
        uint32_t ref[3];
        r->chain = chain;
        for (int k = 0; k < 3; k++)
            r->t[k] = r->v[4 + k], r->v[4 + k] = step_time(r->t[k], chain, &ref[k]);
        r->v[0] = ref[0] | ref[1] << TKP_REP_REF_BITS | ref[2] << 2 * TKP_REP_REF_BITS;
    }
    R.at[++R.n] = (uint32_t)R.gsb.size;
    if (R.n == TKP_REP_MAX) tkp_wrep_flush();
}

/* The record `back` before group record i: in the group or in the history. */
static const struct grec *before(uint32_t i, uint32_t back)
{
    return back <= i ? &R.g[i - back] : hist(back - i);
}

static int matches(uint32_t back)
{
    if (!back || back > TKP_REP_MAX || back > R.nh) return 0; /* record 0 refers to the history */
    for (uint32_t i = 0; i < R.n; i++) {
        const struct grec *a = &R.g[i], *b = before(i, back);
        if (a->type != b->type || a->nel != b->nel) return 0;
    }
    return 1;
}

static uint32_t find_back(void)
{
    if (matches(R.back)) return R.back;
    uint32_t m = R.nh < TKP_REP_MAX ? R.nh : TKP_REP_MAX;
    for (uint32_t b = 1; b <= m; b++)
        if (matches(b)) return b;
    return 0;
}

/* The group's R.n records into the chunk, a REP or as they are; they join the history. */
static void group_out(void)
{
    uint32_t n = R.n;
    if (!n) return;
    uint32_t back = find_back();
    if (back && !tkp_col_reserve(&R.times, n * TKP_REP_NEL * 10) &&
        !tkp_col_reserve(&R.others, n * TKP_REP_NEL * 10)) {
        for (uint32_t i = 0; i < n; i++) {
            const struct grec *a = &R.g[i], *b = before(i, back);
            uint32_t tm = tkp_rep_times(a->type);
            for (uint32_t k = 1; k < a->nel; k++)
                tkp_col_put(tm >> k & 1 ? &R.times : &R.others, tkp_rep_zz(a->v[k] - b->v[k]));
            if (a->type == TKP_REC_STEP) tkp_col_put(&R.others, tkp_rep_zz(a->v[0] - b->v[0]));
        }
        msgpack_packer *pk = R.out;
        msgpack_pack_array(pk, 5);
        msgpack_pack_int(pk, TKP_REC_REP);
        msgpack_pack_uint32(pk, n);
        msgpack_pack_uint32(pk, back);
        tkp_cols_pack(pk, &R.times, 1);
        tkp_cols_pack(pk, &R.others, 1);
        R.back = back;
        if (R.mode == 2) { /* the records it stands for, in a record readers skip */
            msgpack_pack_array(pk, 2);
            msgpack_pack_int(pk, TKP_REC_REP_SHADOW);
            msgpack_pack_bin(pk, R.at[n]);
            msgpack_pack_bin_body(pk, R.gsb.data, R.at[n]);
        }
    } else { /* a reader codes a plain STEP's times against the chain (refs 0), so does R.h */
        plain(0, n);
        for (uint32_t i = 0; i < n; i++) {
            struct grec *a = &R.g[i];
            if (a->type != TKP_REC_STEP) continue;
            for (int k = 0; k < 3; k++) a->v[4 + k] = a->t[k] - a->chain;
            a->v[0] = 0;
        }
    }
    for (uint32_t i = 0; i < n; i++) R.h[R.nh++ % TKP_REP_MAX] = R.g[i];
}

void tkp_wrep_flush(void)
{
    if (!R.n) return;
    group_out();
    group_clear();
}

void tkp_wrep_reset(void)
{
    R.n = 0;
    R.nh = R.nt = 0;
    R.wait = 0;
    R.back = 0;
    if (R.gsb.data) msgpack_sbuffer_destroy(&R.gsb); /* the parent's; init makes the child's */
    memset(&R.gsb, 0, sizeof R.gsb);
    R.out = NULL; /* groups off until the child's writer starts (tkp_wrep_init) */
    R.at[0] = 0;
}
