/* tokprof decoder: fast path of the record decoder (see record_fast.h for the contract).
 *
 * Each accepted record is read from a range checked once up front: every field it reads takes
 * at most 9 bytes, so a record whose fields could reach past the payload is declined rather
 * than checked field by field. The integer readers accept the unsigned encodings (positive
 * fixint, uint8..64) and, for signed fields, the negative fixint and int8..64 ones; a value out
 * of its field's range is declined, never clamped, so that tkp_record_decode() reports it. */
#include "capture/record_fast.h"

#include <string.h>

#include "base/grow.h"
#include "tokprof/format.h"

#define FIELD_MAX 9 /* the longest msgpack integer: a type byte and 8 bytes */

#if defined(__GNUC__)
#define INLINE static inline __attribute__((always_inline))
#else
#define INLINE static inline
#endif

INLINE uint16_t be16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

INLINE uint32_t be32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    return __builtin_bswap32(v);
#else
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
#endif
}

INLINE uint64_t be64(const uint8_t *p)
{
#if defined(__GNUC__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    uint64_t v;
    memcpy(&v, p, 8);
    return __builtin_bswap64(v);
#else
    return (uint64_t)be32(p) << 32 | be32(p + 4);
#endif
}

/* A template's fields into the record: word by word (a struct assignment of this size becomes
 * `rep movs`, whose start-up costs more than the whole copy). */
INLINE void copy_words(void *dst, const void *src, size_t n)
{
    uint64_t w;
#pragma GCC unroll 16
    for (size_t i = 0; i + 8 <= n; i += 8) {
        memcpy(&w, (const char *)src + i, 8);
        memcpy((char *)dst + i, &w, 8);
    }
}
_Static_assert(sizeof(((struct tkp_record *)0)->launch) % 8 == 0 &&
                   sizeof(((struct tkp_record *)0)->lib_call) % 8 == 0,
               "templates copy whole words");

/* Whether launch / library-call template id is defined in the chunk being decoded. */
INLINE int ltmpl_ok(const struct tkp_decode_buf *b, uint32_t id)
{
    return id < b->ltmpl_cap && b->ltmpl[id].gen == b->gen;
}
INLINE int ctmpl_ok(const struct tkp_decode_buf *b, uint32_t id)
{
    return id < b->ctmpl_cap && b->ctmpl[id].gen == b->gen;
}

/* r becomes the LAUNCH (LIB_CALL) that template id stands for; its own fields come after. */
INLINE void launch_from(struct tkp_record *r, const struct tkp_decode_buf *b, uint32_t id)
{
    r->type = TKP_REC_LAUNCH;
    r->thread = b->ltmpl[id].thread;
    copy_words(&r->launch, &b->ltmpl[id].launch, sizeof(r->launch));
}
INLINE void lib_call_from(struct tkp_record *r, const struct tkp_decode_buf *b, uint32_t id)
{
    r->type = TKP_REC_LIB_CALL;
    r->thread = b->ctmpl[id].thread;
    copy_words(&r->lib_call, &b->ctmpl[id].lib, sizeof(r->lib_call));
}

/* Each reader returns 1 and moves *pp past the value, or 0 (declined) leaving *pp alone. */
INLINE int ru64(const uint8_t **pp, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint8_t b = p[0];
    if (b <= 0x7f) {
        *v = b;
        *pp = p + 1;
        return 1;
    }
    if ((uint8_t)(b - 0xcc) <= 3) { /* uint8..64: the 8 bytes after b are in range */
        unsigned size = 1u << (b - 0xcc);
        *v = be64(p + 1) >> (64 - 8 * size);
        *pp = p + 1 + size;
        return 1;
    }
    return 0;
}

INLINE int ru32(const uint8_t **pp, uint32_t *v)
{
    const uint8_t *p = *pp;
    uint64_t u;
    if (*p <= 0x7f) { /* most 32-bit fields: small ids and dimensions */
        *v = *p;
        *pp = p + 1;
        return 1;
    }
    if (!ru64(pp, &u)) return 0;
    if (u > UINT32_MAX) {
        *pp = p;
        return 0;
    }
    *v = (uint32_t)u;
    return 1;
}

INLINE int ri64(const uint8_t **pp, int64_t *v)
{
    const uint8_t *p = *pp;
    uint8_t b = p[0];
    if (b <= 0x7f || b >= 0xe0) {
        *v = (int8_t)b; /* positive fixint reads the same as int8 */
        *pp = p + 1;
        return 1;
    }
    unsigned k = (uint8_t)(b - 0xcc); /* 0..3: uint8..64, 4..7: int8..64 */
    if (k > 7) return 0;
    unsigned size = 1u << (k & 3), shift = 64 - 8 * size;
    uint64_t u = be64(p + 1) >> shift; /* the 8 bytes after b are in range */
    if (k >= 4) {
        *v = (int64_t)(u << shift) >> shift; /* sign-extended */
    } else {
        if (u > INT64_MAX) return 0;
        *v = (int64_t)u;
    }
    *pp = p + 1 + size;
    return 1;
}

#define U64(dst)                                                                                   \
    if (!ru64(&p, &(dst))) return 0
#define U32(dst)                                                                                   \
    if (!ru32(&p, &(dst))) return 0
#define I64(dst)                                                                                   \
    if (!ri64(&p, &(dst))) return 0
#define THREAD(dst)                                                                                \
    if (!ru32(&p, &(dst)) || (dst) >= TKP_THREADS_MAX) return 0
/* LIB_CALL enum fields: a CUDA enum value or -1 */
#define ENUM(dst)                                                                                  \
    do {                                                                                           \
        int64_t e_;                                                                                \
        if (!ri64(&p, &e_) || e_ < -1 || e_ > INT32_MAX) return 0;                                 \
        (dst) = (int32_t)e_;                                                                       \
    } while (0)
/* dt, thread, step: the common head of the timed records */
#define READ_HEAD()                                                                                \
    do {                                                                                           \
        I64(b->dt);                                                                                \
        THREAD(r->thread);                                                                         \
        U64(r->step);                                                                              \
    } while (0)

/* Elements after the type that this path reads (FORMAT.md); 0: a type it declines. */
#define HEADN_HOST 3 /* dt, thread, step */
#define HEADN_STEP 2 /* step, thread */
#define HEADN_ANYTHREAD 1 /* thread */
#define NF_u32 1
#define NF_u64 1
#define NF_i64 1
#define NF_dim3 3
#define NF_cenum 1
#define NF_F(kind, name, wire) +NF_##kind
#define NF_X(ctype, name)
#define NF_R(T, member, head, fields, extra) [TKP_REC_##T] = HEADN_##head fields,
static const uint8_t fields[] = {
    [TKP_REC_GRAPH_LAUNCH] = 6,
    [TKP_REC_LAUNCH_T] = 3,             /* LIB_CALL_T: tmpl_fast() only */
    TKP_RECORDS_FIXED(NF_R, NF_F, NF_X) /* the fixed-layout types (records.def) */
};

/* The fast decode of a fixed-layout record (records.def): the same checks as the general
 * decoder, in the same order. */
#define FAST_HEAD_HOST READ_HEAD()
#define FAST_HEAD_STEP                                                                             \
    do {                                                                                           \
        U64(r->step);                                                                              \
        THREAD(r->thread);                                                                         \
    } while (0)
#define FAST_HEAD_ANYTHREAD                                                                        \
    do {                                                                                           \
        U32(r->thread);                                                                            \
        if (r->thread != TKP_THREAD_NONE && r->thread >= TKP_THREADS_MAX) return 0;                \
    } while (0)
#define FAST_u32 U32
#define FAST_u64 U64
#define FAST_i64 I64
#define FAST_cenum ENUM
#define FAST_dim3(m)                                                                               \
    U32((m)[0]);                                                                                   \
    U32((m)[1]);                                                                                   \
    U32((m)[2])
#define FAST_F(kind, name, wire) FAST_##kind(x_->name);
#define FAST_X(ctype, name) x_->name = 0;
#define FAST_R(T, member, head, fields, extra)                                                     \
    case TKP_REC_##T: {                                                                            \
        __typeof__(r->member) *x_ = &r->member;                                                    \
        FAST_HEAD_##head;                                                                          \
        fields extra break;                                                                        \
    }

/* The optional `call` of a launch: an unsigned int is it (anything else is declined here). */
#define IS_UINT(x) ((x) <= 0x7f || ((x) >= 0xcc && (x) <= 0xcf))

/* The shortest path, for what a capture is mostly made of: LAUNCH_T without a stack
 * ([13, dt, step, tmpl] [, call]) and LIB_CALL_T ([26, dt, step, call, tmpl, host_ns]), without
 * extra fields. Returns 1 with *pp moved past the record, or 0 to take the general path. */
INLINE int tmpl_fast(const uint8_t **pp, const uint8_t *end, struct tkp_record *r,
                     struct tkp_decode_buf *b)
{
    const uint8_t *p = *pp;
    uint32_t id, call = 0;
    if (end - p < 2 + 5 * FIELD_MAX) return 0;
    if (p[1] == TKP_REC_LAUNCH_T && (p[0] == 0x94 || p[0] == 0x95)) {
        unsigned n = p[0] & 0x0f;
        p += 2;
        if (!ri64(&p, &b->dt) || !ru64(&p, &r->step) || !ru32(&p, &id)) return 0;
        if (n == 5 && (!IS_UINT(*p) || !ru32(&p, &call))) return 0;
        if (!ltmpl_ok(b, id)) return 0;
        launch_from(r, b, id);
        r->launch.call = call;
    } else if (p[0] == 0x96 && p[1] == TKP_REC_LIB_CALL_T) {
        uint64_t call_ns;
        p += 2;
        if (!ri64(&p, &b->dt) || !ru64(&p, &r->step) || !ru32(&p, &call) || !ru32(&p, &id) ||
            !ru64(&p, &call_ns))
            return 0;
        if (!ctmpl_ok(b, id)) return 0;
        lib_call_from(r, b, id);
        r->lib_call.call = call;
        r->lib_call.call_ns = call_ns;
    } else {
        return 0;
    }
    r->offset = r->host_ns = 0;
    r->tid = 0;
    *pp = p;
    return 1;
}

/* The same, checking only (tkp_record_check_fast): the record's type, or -1. */
INLINE int tmpl_check(const uint8_t **pp, const uint8_t *end, const struct tkp_decode_buf *b)
{
    const uint8_t *p = *pp;
    uint32_t id;
    int64_t dt;
    uint64_t u;
    if (end - p < 2 + 5 * FIELD_MAX) return -1;
    if (p[1] == TKP_REC_LAUNCH_T && (p[0] == 0x94 || p[0] == 0x95)) {
        unsigned n = p[0] & 0x0f;
        p += 2;
        uint32_t call;
        if (!ri64(&p, &dt) || !ru64(&p, &u) || !ru32(&p, &id)) return -1;
        if (!ltmpl_ok(b, id)) return -1;
        if (n == 5 && (!IS_UINT(*p) || !ru32(&p, &call))) return -1;
    } else if (p[0] == 0x96 && p[1] == TKP_REC_LIB_CALL_T) {
        p += 2;
        if (!ri64(&p, &dt) || !ru64(&p, &u) || !ru32(&p, &id) || !ru32(&p, &id) ||
            !ctmpl_ok(b, id) || !ru64(&p, &u))
            return -1;
    } else {
        return -1;
    }
    int type = (*pp)[1];
    *pp = p;
    return type;
}

/* A RUN's header, in the reader's second pass: its first pass has checked the whole record
 * (tkp_record_decode), so only the columns are located here. */
static int run_begin(struct tkp_mp *c, struct tkp_decode_buf *b)
{
    struct tkp_mp at = *c;
    uint32_t n, len[5], k;
    uint64_t type, step, nrec, call0;
    const uint8_t *col[5];
    struct tkp_run_head h; /* the usual header, inline */
    if (tkp_run_head(c->p, c->end, &h, &at.p) && h.n && h.n <= TKP_RUN_MAX &&
        h.call <= UINT32_MAX && h.n <= b->run.pcap && (!h.rep || b->run.pn == h.n)) {
        if (h.rep) tkp_run_repeat(&b->run, h.col, h.len);
        tkp_run_begin(&b->run, (uint32_t)h.n, h.step, (uint32_t)h.call, h.col, h.len, h.rep);
        c->p = at.p;
        return TKP_DECODE_RUN;
    }
    at = *c;
    if (tkp_mp_array(&at, &n) || n < 9 || tkp_mp_u64(&at, &type) || type != TKP_REC_RUN ||
        tkp_mp_u64(&at, &step) || tkp_mp_u64(&at, &nrec) || !nrec || nrec > TKP_RUN_MAX ||
        tkp_mp_u64(&at, &call0) || call0 > UINT32_MAX)
        return 0;
    int rep = 0;
    for (k = 0; k < 5; k++) {
        if (k == 0 && tkp_mp_peek(&at) == TKP_MP_NIL) { /* it repeats the last RUN's kinds */
            rep = 1;
            tkp_mp_skip(&at);
            continue;
        }
        if (k == 2 && rep) { /* and tmpls */
            if (tkp_mp_peek(&at) != TKP_MP_NIL) return 0;
            tkp_mp_skip(&at);
            continue;
        }
        if (tkp_mp_bin(&at, &col[k], &len[k])) return 0;
    }
    if (rep) {
        if (b->run.pn != nrec) return 0;
        tkp_run_repeat(&b->run, col, len);
    }
    if (nrec > b->run.pcap) return 0; /* the value array: grown by tkp_record_decode */
    for (k = 9; k < n; k++) /* extra fields of a later writer */
        if (tkp_mp_skip(&at)) return 0;
    tkp_run_begin(&b->run, (uint32_t)nrec, step, (uint32_t)call0, col, len, rep);
    *c = at;
    return TKP_DECODE_RUN;
}

/* A COLS's header, in the reader's second pass (checked whole by the first, as a RUN). */
static int cols_begin(struct tkp_mp *c, struct tkp_decode_buf *b)
{
    struct tkp_mp at = *c;
    uint32_t n, len, k;
    uint64_t type, nrec, nf;
    const uint8_t *col[TKP_COLS_FIELDS], *p;
    uint32_t lens[TKP_COLS_FIELDS];
    if (tkp_mp_array(&at, &n) || n < 4 || tkp_mp_u64(&at, &type) || type != TKP_REC_COLS ||
        tkp_mp_u64(&at, &type) || tkp_mp_u64(&at, &nrec) || !nrec || nrec > TKP_COLS_MAX ||
        tkp_mp_u64(&at, &nf))
        return 0;
    unsigned known = tkp_cols_fields(type);
    if (!known || nf < known || nf > n - 4) return 0;
    for (k = 0; k < nf; k++) {
        if (tkp_mp_bin(&at, &p, &len)) return 0;
        if (k < known) col[k] = p, lens[k] = len;
    }
    for (k = 4 + (uint32_t)nf; k < n; k++) /* elements after the columns */
        if (tkp_mp_skip(&at)) return 0;
    tkp_cols_begin(&b->cols, (uint32_t)type, (uint32_t)nrec, col, lens);
    *c = at;
    return TKP_DECODE_COLS;
}

/* A record's array header: fixarray or array16 (LIB_CALL has 22 elements): its element count
 * and header length; 0 for any other byte. */
static inline int array_head(const uint8_t *p, uint32_t *n, uint32_t *h)
{
    if ((p[0] & 0xf0) == 0x90) {
        *n = p[0] & 0x0f, *h = 1;
        return 1;
    }
    if (p[0] == 0xdc) {
        *n = be16(p + 1), *h = 3;
        return 1;
    }
    return 0;
}

int tkp_record_decode_fast(struct tkp_mp *c, struct tkp_record *r, struct tkp_decode_buf *b)
{
    if (tmpl_fast(&c->p, c->end, r, b)) return 1;
    if (tkp_mp_left(c) > 1 && (c->p[0] & 0xf0) == 0x90 && c->p[1] == TKP_REC_RUN)
        return run_begin(c, b);
    /* a COLS of GPU_KERNEL (21 elements) or GPU_COPY (17): an array16 */
    if (tkp_mp_left(c) > 3 && c->p[0] == 0xdc && c->p[3] == TKP_REC_COLS) return cols_begin(c, b);
    const uint8_t *p = c->p, *end = c->end;
    uint32_t n, h;
    if (end - p < 4) return 0;
    /* the array header: fixarray, or array16 (LIB_CALL has 22 elements); then the type as a
     * positive fixint */
    if (!array_head(p, &n, &h)) return 0;
    if (p[h] >= sizeof(fields) || !fields[p[h]]) return 0;
    unsigned type = p[h], want = fields[type];
    /* the general decoder's checks: no more elements than bytes, not fewer than the type has */
    if (n == 0 || n > (size_t)(end - p) - h || n - 1 < want) return 0;
    /* room for every field read here (LAUNCH: and its optional `call` and `stack`) */
    if ((size_t)(end - p) < h + 1 + (size_t)(want + 2) * FIELD_MAX) return 0;
    p += h + 1;
    r->type = (enum tkp_rec)type;
    r->offset = r->host_ns = 0;
    r->tid = 0;
    r->step = 0;
    b->dt = 0;
    uint32_t id;
    switch (type) {
    case TKP_REC_LAUNCH_T: /* a template defined earlier in this chunk, else declined */
        I64(b->dt);
        U64(r->step);
        U32(id);
        if (!ltmpl_ok(b, id)) return 0;
        launch_from(r, b, id);
        break; /* its call and stack: after the switch */
    case TKP_REC_GRAPH_LAUNCH:
        READ_HEAD();
        if (*p == 0xff) { /* -1: a graph instantiated before capture started */
            r->graph_launch.graph = TKP_GRAPH_UNKNOWN;
            p++;
        } else {
            U64(r->graph_launch.graph);
        }
        U64(r->graph_launch.stream);
        U32(r->graph_launch.via);
        break;
        /* LAUNCH (its call and stack: below), COPY, SYNC, EVENT_RECORD, STREAM_WAIT, STEP, NVTX
         * (its string: the reader), MARKER, LIB_CALL, LOSS */
        TKP_RECORDS_FIXED(FAST_R, FAST_F, FAST_X)
    default:
        return 0;
    }
    /* a launch's optional `call`: an unsigned int there is it; anything else is an extra field.
     * A non-negative value in a signed encoding is an unsigned int to the general decoder */
    if ((type == TKP_REC_LAUNCH || type == TKP_REC_LAUNCH_T) && n > 1 + want) {
        uint8_t x = *p;
        if (x <= 0x7f || (x >= 0xcc && x <= 0xcf)) {
            U32(r->launch.call);
            n--;
            if (n > 1 + want) { /* then the optional `stack` (stacks.c), read the same way */
                x = *p;
                if (x <= 0x7f || (x >= 0xcc && x <= 0xcf)) {
                    U32(r->launch.stack);
                    n--;
                } else if (x >= 0xd0 && x <= 0xd3) {
                    return 0;
                }
            }
        } else if (x >= 0xd0 && x <= 0xd3) {
            return 0;
        }
    }
    /* extra trailing elements of a later writer: skipped, as the general decoder does */
    if (n > 1 + want) {
        struct tkp_mp x = {p, end};
        for (n -= 1 + want; n; n--)
            if (tkp_mp_skip(&x)) return 0;
        p = x.p;
    }
    c->p = p;
    return 1;
}

/* ---- the validating pass: encodings and ranges only, no values kept ---- */

/* Bytes a field of each kind takes, by its leading byte; 0 for an encoding this path leaves to
 * the general decoder (a value that may be out of range for the field, a non-negative value
 * written signed, or not an integer). */
#define X4(x) x, x, x, x
#define X16(x) X4(x), X4(x), X4(x), X4(x)
#define BYTE_TABLE(FIX, U8, U16, U32, U64, I8, I16, I32, I64, NEG, MINUS1)                         \
    {                                                                                              \
        X16(FIX), X16(FIX), X16(FIX), X16(FIX), X16(FIX), X16(FIX), X16(FIX), X16(FIX),            \
        X16(0), X16(0), X16(0), X16(0), X4(0), X4(0), X4(0), /* 0x80..0xcb */                     \
        U8, U16, U32, U64, I8, I16, I32, I64, X4(0), X4(0), X4(0), /* 0xcc..0xdf */                \
        X16(NEG), X4(NEG), X4(NEG), X4(NEG), NEG, NEG, NEG, MINUS1 /* 0xe0..0xff */                \
    }
static const uint8_t len_u64[] = BYTE_TABLE(1, 2, 3, 5, 9, 0, 0, 0, 0, 0, 0);
static const uint8_t len_u32[] = BYTE_TABLE(1, 2, 3, 5, 0, 0, 0, 0, 0, 0, 0);
static const uint8_t len_thread[] = BYTE_TABLE(1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0); /* < 65536 */
static const uint8_t len_i64[] = BYTE_TABLE(1, 2, 3, 5, 0, 2, 3, 5, 9, 1, 1);
static const uint8_t len_enum[] = BYTE_TABLE(1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 1); /* -1..INT32_MAX */
static const uint8_t len_graph[] = BYTE_TABLE(1, 2, 3, 5, 9, 0, 0, 0, 0, 0, 1);  /* u64 or -1 */
_Static_assert(sizeof(len_u64) == 256 && sizeof(len_graph) == 256, "one entry per byte");

/* The fixint test first: a predicted branch lets the next field's load start before this one's
 * table lookup returns (p += table[*p] alone makes one serial chain of loads per record). */
#define CK(table)                                                                                  \
    do {                                                                                           \
        if (*p <= 0x7f) {                                                                          \
            p++;                                                                                   \
        } else {                                                                                   \
            unsigned l_ = table[*p];                                                               \
            if (!l_) return -1;                                                                    \
            p += l_;                                                                               \
        }                                                                                          \
    } while (0)
#define CK_HEAD()                                                                                  \
    do {                                                                                           \
        CK(len_i64);                                                                               \
        CK(len_thread);                                                                            \
        CK(len_u64);                                                                               \
    } while (0)

/* The checking pass over a fixed-layout record (records.def). */
#define CK_HEAD_HOST CK_HEAD()
#define CK_HEAD_STEP                                                                               \
    do {                                                                                           \
        CK(len_u64);                                                                               \
        CK(len_thread);                                                                            \
    } while (0)
#define CK_HEAD_ANYTHREAD                                                                          \
    do {                                                                                           \
        uint32_t t_;                                                                               \
        if (!ru32(&p, &t_) || (t_ != TKP_THREAD_NONE && t_ >= TKP_THREADS_MAX)) return -1;         \
    } while (0)
#define CK_u32 CK(len_u32)
#define CK_u64 CK(len_u64)
#define CK_i64 CK(len_i64)
#define CK_cenum CK(len_enum)
#define CK_dim3                                                                                    \
    CK(len_u32);                                                                                   \
    CK(len_u32);                                                                                   \
    CK(len_u32)
#define CK_F(kind, name, wire) CK_##kind;
#define CK_X(ctype, name)
#define CK_R(T, member, head, fields, extra)                                                       \
    case TKP_REC_##T:                                                                              \
        CK_HEAD_##head;                                                                            \
        fields break;

/* The template id of a LAUNCH_T (with a stack): defined earlier in this chunk, else declined. */
#define CK_LTMPL()                                                                                 \
    do {                                                                                           \
        uint32_t id_;                                                                              \
        if (!ru32(&p, &id_) || !ltmpl_ok(b, id_)) return -1;                                      \
    } while (0)

int tkp_record_check_fast(struct tkp_mp *c, const struct tkp_decode_buf *b)
{
    int t = tmpl_check(&c->p, c->end, b);
    if (t >= 0) return t;
    const uint8_t *p = c->p, *end = c->end;
    uint32_t n, h;
    if (end - p < 4) return -1;
    if (!array_head(p, &n, &h)) return -1;
    if (p[h] >= sizeof(fields) || !fields[p[h]]) return -1;
    unsigned type = p[h], want = fields[type];
    if (n == 0 || n > (size_t)(end - p) - h || n - 1 < want) return -1;
    if ((size_t)(end - p) < h + 1 + (size_t)(want + 2) * FIELD_MAX) return -1;
    p += h + 1;
    switch (type) {
    case TKP_REC_LAUNCH_T: /* dt, step, tmpl */
        CK(len_i64);
        CK(len_u64);
        CK_LTMPL();
        break;
    case TKP_REC_GRAPH_LAUNCH:
        CK_HEAD();
        CK(len_graph);
        CK(len_u64);
        CK(len_u32);
        break;
        TKP_RECORDS_FIXED(CK_R, CK_F, CK_X)
    default:
        return -1;
    }
    n -= 1 + want;
    /* the optional `call`, as in the decoder above */
    if (n && (type == TKP_REC_LAUNCH || type == TKP_REC_LAUNCH_T)) {
        uint8_t x = *p;
        if (x <= 0x7f || (x >= 0xcc && x <= 0xcf)) {
            CK(len_u32);
            n--;
        } else if (x >= 0xd0 && x <= 0xd3) {
            return -1;
        }
    }
    if (n) {
        struct tkp_mp x = {p, end};
        for (; n; n--)
            if (tkp_mp_skip(&x)) return -1;
        p = x.p;
    }
    c->p = p;
    return (int)type;
}

/* ---- runs ---- */

/* The next n records of run u; `small`: every template id and call step is one byte (a
 * constant where it is called, so each case gets its own loop). */
INLINE void run_batch(struct tkp_run *u, uint32_t n, int small, int rep, uint64_t ns)
{
    const uint8_t *kind = u->kind, *dt = u->dt, *tm = u->tmpl, *ca = u->calls, *ho = u->host;
    int64_t call = u->call;
    /* the values of the RUN (version 4): a repeating RUN's are differences against the last
     * RUN's, which they replace there for the next (wrapping, as the dt chain does) */
    struct tkp_run_val *pv = u->pv + u->pos;
    uint32_t lib = u->lib;
    u->bkind = kind; /* checked 0 or 1 */
    u->btmpl = u->tbuf;
    for (uint32_t i = 0; i < n; i++) {
        unsigned k = kind[i];
        uint64_t c = small ? *ca++ : tkp_uvar_ok(&ca);
        uint64_t d = (uint64_t)tkp_unzigzag(tkp_uvar_ok(&dt));
        if (rep) d += (uint64_t)pv[i].dt;
        pv[i].dt = (int64_t)d;
        u->bns[i] = ns += d; /* unsigned wrap-around makes a negative dt subtract */
        u->tbuf[i] = (uint32_t)(small ? *tm++ : tkp_uvar_ok(&tm));
        if (k) {
            call += 1 + tkp_unzigzag(c);
            u->bcall[i] = (uint32_t)call;
            uint64_t h = tkp_uvar_ok(&ho);
            if (rep) h = (uint64_t)tkp_unzigzag(h) + u->pv[lib].host;
            u->pv[lib++].host = h;
            u->bhost[i] = h;
        } else {
            u->bcall[i] = c ? (uint32_t)(call + 1 + tkp_unzigzag(c - 1)) : 0;
        }
    }
    u->kind = kind + n, u->dt = dt, u->tmpl = tm, u->calls = ca, u->host = ho;
    u->call = (uint32_t)call;
    u->pos += n, u->lib = lib;
}

#define UNZZ(x) ((int64_t)((uint64_t)(x) >> 1) ^ -(int64_t)((x)&1))
#define UNZZ4(x) UNZZ(x), UNZZ((x) + 1), UNZZ((x) + 2), UNZZ((x) + 3)
#define UNZZ16(x) UNZZ4(x), UNZZ4((x) + 4), UNZZ4((x) + 8), UNZZ4((x) + 12)
#define UNZZ64(x) UNZZ16(x), UNZZ16((x) + 16), UNZZ16((x) + 32), UNZZ16((x) + 48)
const int64_t tkp_unzz_byte[128] = {UNZZ64(0), UNZZ64(64)};

/* The usual batch: a repeating RUN's whose template ids are one byte and whose call steps are 0
 * or 1 (each GEMM's kernels carry the next call id, the call follows them). A launch's call is
 * then the last call + 1 or 0, a library call's the last + 1 - its step: no zigzag, no branch;
 * the dts are one byte but for a test (two-byte ones: tkp_uvar_ok). */
INLINE void run_batch_usual(struct tkp_run *u, uint32_t n, uint64_t ns)
{
    const uint8_t *kind = u->kind, *dt = u->dt, *tm = u->tmpl, *ca = u->calls, *ho = u->host;
    uint32_t call = u->call, lib = u->lib;
    struct tkp_run_val *pv = u->pv + u->pos, *ph = u->pv;
    u->bkind = kind;
    u->btmpl = u->t32 + u->pos; /* run_t32 */
    for (uint32_t i = 0; i < n; i++) {
        uint64_t x = *dt, d;
        if (__builtin_expect(x < 0x80, 1))
            dt++, d = (uint64_t)tkp_unzz_byte[x];
        else
            d = (uint64_t)tkp_unzigzag(tkp_uvar_ok(&dt));
        d += (uint64_t)pv[i].dt;
        pv[i].dt = (int64_t)d;
        u->bns[i] = ns += d;
        uint32_t c = ca[i];
        if (__builtin_expect(!kind[i], 1)) {
            u->bcall[i] = -c & (call + 1); /* c is 0 or 1 */
        } else {
            call += 1 - c;
            u->bcall[i] = call;
            uint64_t h = (uint64_t)tkp_unzigzag(tkp_uvar_ok(&ho)) + ph[lib].host;
            ph[lib++].host = h;
            u->bhost[i] = h;
        }
    }
    u->kind = kind + n, u->dt = dt, u->tmpl = tm + n, u->calls = ca + n, u->host = ho;
    u->call = call;
    u->pos += n, u->lib = lib;
}

/* Whether the n bytes at p are each 0 or 1 (8 readable bytes past them: the payload's pad). */
INLINE int bytes01(const uint8_t *p, uint32_t n)
{
    uint64_t w = 0;
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        w |= tkp_load64(p + i);
    if (i < n) w |= tkp_load64(p + i) << 8 * (8 - (n - i)); /* the bytes past p + n out */
    return !(w & 0xfefefefefefefefeull);
}

/* The open RUN's one-byte template ids (u->small) widened in u->t32, once for the RUN and those
 * that repeat it (its tmpls column); 0 when out of memory. */
static int run_t32(struct tkp_decode_buf *b)
{
    struct tkp_run *u = &b->run;
    if (u->t32_col == u->ptmpl && u->t32_gen == b->gen && u->t32_n == u->pn) return 1;
    u->t32_col = NULL;
    if (TKP_GROW_FROM(u->t32, u->t32_cap, u->pn, 256)) return 0;
    for (uint32_t i = 0; i < u->pn; i++) u->t32[i] = u->ptmpl[i];
    u->t32_col = u->ptmpl, u->t32_gen = b->gen, u->t32_n = u->pn;
    return 1;
}

void tkp_record_run_batch(struct tkp_decode_buf *b, uint64_t ns)
{
    struct tkp_run *u = &b->run;
    uint32_t n = u->left < TKP_RUN_BATCH ? u->left : TKP_RUN_BATCH;
    if (u->rep && u->small && bytes01(u->calls, n) && run_t32(b)) /* the usual RUN */
        run_batch_usual(u, n, ns);
    else if (u->rep && u->small) /* each case its own loop */
        run_batch(u, n, 1, 1, ns);
    else if (u->rep)
        run_batch(u, n, 0, 1, ns);
    else if (u->small)
        run_batch(u, n, 1, 0, ns);
    else
        run_batch(u, n, 0, 0, ns);
    u->left -= n;
    u->i = u->fast_n = 0; /* the reader tells fast_n */
    u->n = n;
}

/* ---- columns ---- */

/* Column k's next n values into the batch: the running sum of its zigzag deltas; `small`: the
 * column's varints after the first are one byte (a field that moves by less than 64). */
INLINE void cols_column(struct tkp_cols *u, uint32_t k, uint32_t n, int small)
{
    const uint8_t *p = u->col[k];
    uint64_t v = u->prev[k];
    uint32_t i = 0;
    if (u->first) {
        v += (uint64_t)tkp_unzigzag(tkp_uvar_ok(&p));
        u->bv[i++][k] = v;
    }
    for (; i < n; i++) {
        v += (uint64_t)tkp_unzigzag(small ? *p++ : tkp_uvar_ok(&p));
        u->bv[i][k] = v;
    }
    u->col[k] = p;
    u->prev[k] = v;
}

void tkp_record_cols_batch(struct tkp_decode_buf *b)
{
    struct tkp_cols *u = &b->cols;
    uint32_t n = u->left < TKP_RUN_BATCH ? u->left : TKP_RUN_BATCH;
    for (uint32_t k = 0; k < u->nf; k++) {
        if (u->small >> k & 1)
            cols_column(u, k, n, 1);
        else
            cols_column(u, k, n, 0);
    }
    u->left -= n;
    u->first = 0;
    u->i = 0;
    u->n = n;
}
