/* tokprof decoder: one msgpack record -> struct tkp_record, before name and thread resolution.
 * Internal to the reader. */
#ifndef TKP_RECORD_H
#define TKP_RECORD_H

#include <string.h>

#include "base/mp.h"
#include "capture/reader.h"

/* Templates (struct tkp_launch_tmpl, tkp_lib_tmpl): reader.h, whose RUN peek hands them over. */

/* A RUN being delivered (FORMAT.md "Runs"): cursors into its columns, which the reader's first
 * pass has checked whole, and the batch of records decoded from them last. */
#define TKP_RUN_BATCH 64
struct tkp_run_val {
    int64_t dt;
    uint64_t host;
};
struct tkp_run {
    uint32_t left; /* records not yet decoded into the batch */
    uint32_t i, n; /* the batch: the next record to deliver, and how many it holds */
    uint32_t fast_n; /* n when every template of the batch's RUN is resolved (the reader's
                      * run_uniform), so that its records need no check; else 0 */
    uint32_t call; /* the last library call's id, the base of the calls column */
    int small;     /* every template id and call step one byte */
    uint64_t step;
    const uint8_t *kind, *dt, *tmpl, *calls, *host;
    /* Version 4's repeating RUN (kinds and tmpls nil): it has the kinds and template ids of the
     * chunk's RUN before it, and its dts and host_ns are differences against that RUN's values */
    int rep;           /* the open run repeats */
    uint32_t pos, lib; /* records and library calls of the open run decoded so far */
    const uint8_t *pkind, *ptmpl; /* the chunk's last RUN (this pass): 0 records before the first */
    uint32_t pn, ptmpl_len;
    uint32_t plibs; /* its library calls (the first pass's check) */
    struct tkp_run_val *pv; /* its values: dt by record, host_ns by library call */
    uint32_t pcap;
    const uint8_t *bkind; /* the batch's kinds: the kinds column in place */
    const uint32_t *btmpl; /* the batch's template ids: tbuf, or the RUN's own in t32 */
    uint32_t tbuf[TKP_RUN_BATCH], bcall[TKP_RUN_BATCH];
    /* the ids of the chunk's (gen's) RUN whose one-byte tmpls column is t32_col, widened once
     * for it and the RUNs that repeat it (its usual batches point into them) */
    uint32_t *t32;
    uint32_t t32_cap, t32_n, t32_gen;
    const uint8_t *t32_col;
    uint64_t bns[TKP_RUN_BATCH]; /* host times: the record's dt added to the time before it */
    uint64_t bhost[TKP_RUN_BATCH];
};
/* Opens a run of n records with its base call id and five columns (kinds, dts, tmpls, calls,
 * host_ns) of len bytes. */
static inline void tkp_run_begin(struct tkp_run *u, uint32_t n, uint64_t step, uint32_t call0,
                                 const uint8_t **col, const uint32_t *len, int rep)
{
    u->small = len[2] == n && len[3] == n;
    u->left = n;
    u->i = u->n = u->fast_n = 0;
    u->call = call0;
    u->step = step;
    u->kind = col[0], u->dt = col[1], u->tmpl = col[2], u->calls = col[3], u->host = col[4];
    u->rep = rep;
    u->pos = u->lib = 0;
    u->pkind = col[0], u->ptmpl = col[2], u->pn = n, u->ptmpl_len = len[2];
}
/* A chunk's pass begins: no RUN before (a repeating RUN needs one of the same pass). */
static inline void tkp_run_chunk(struct tkp_run *u)
{
    u->left = u->n = u->i = u->fast_n = 0;
    u->pn = 0;
}
/* The kinds and tmpls columns of a repeating RUN: the last RUN's (the caller has checked that
 * there is one, of as many records). */
static inline void tkp_run_repeat(const struct tkp_run *u, const uint8_t **col, uint32_t *len)
{
    col[0] = u->pkind, len[0] = u->pn;
    col[2] = u->ptmpl, len[2] = u->ptmpl_len;
}
static inline int tkp_run_open(const struct tkp_run *u)
{
    return u->i < u->n || u->left;
}

/* A COLS being delivered (FORMAT.md "Columns"): cursors into the columns of the fields the
 * reader knows (extra columns are not read), which its first pass has checked whole, each
 * field's last value, and the batch decoded from them last: bv[field][record]. */
#define TKP_COLS_FIELDS 17 /* GPU_KERNEL's; GPU_COPY has 13 */
struct tkp_cols {
    uint32_t left;     /* records not yet decoded into the batch */
    uint32_t i, n;     /* the batch: the next record to deliver, and how many it holds */
    uint32_t type;     /* enum tkp_rec: GPU_KERNEL or GPU_COPY */
    uint32_t nf;       /* fields decoded: the type's */
    uint32_t small;    /* bit k: column k's varints after the first are one byte each */
    int first;         /* the next batch is the first */
    int gpu_run;       /* a GPU_RUN (capture/gputmpl.h): col[0..3] its columns, prev[0..3] the
                          last record's end, correlation, step, index */
    uint64_t prev[TKP_COLS_FIELDS];
    const uint8_t *col[TKP_COLS_FIELDS];
    uint64_t bv[TKP_RUN_BATCH][TKP_COLS_FIELDS]; /* by record: its fields in payload order */
};
static inline int tkp_cols_open(const struct tkp_cols *u)
{
    return u->i < u->n || u->left;
}

/* r's type and fields become those of the GPU_KERNEL or GPU_COPY whose fields after the type
 * are v[] (in payload order, checked): the one place that knows where each goes, for records
 * read from msgpack and from COLS alike. The rest of r is left as it was. */
static inline void tkp_gpu_store(struct tkp_record *r, uint64_t type, const uint64_t *v)
{
    int kernel = type == TKP_REC_GPU_KERNEL;
    /* kernels: name, then the shared fields; copies: kind, dir, bytes, then the same */
    const uint64_t *t = v + (kernel ? 3 : 5); /* stream, correlation, thread, step, join, index,
                                                 graph, node */
    r->type = (enum tkp_rec)type;
    r->gpu.start_ns = v[0];
    r->gpu.end_ns = v[1];
    r->gpu.name_id = kernel ? v[2] : 0;
    r->gpu.kind = kernel ? 0 : (uint32_t)v[2];
    r->gpu.dir = kernel ? 0 : (uint32_t)v[3];
    r->gpu.bytes = kernel ? 0 : v[4];
    r->gpu.stream = (uint32_t)t[0];
    r->gpu.correlation = (uint32_t)t[1];
    r->thread = (uint32_t)t[2];
    r->step = t[3];
    r->gpu.join = (uint32_t)t[4];
    r->gpu.index = (uint32_t)t[5];
    r->gpu.graph = t[6];
    r->gpu.node = t[7];
    for (int i = 0; i < 3; i++) { /* kernels: gx, gy, gz, bx, by, bz after node */
        r->gpu.grid[i] = kernel ? (uint32_t)t[8 + i] : 0;
        r->gpu.block[i] = kernel ? (uint32_t)t[11 + i] : 0;
    }
}

/* LEB128 (FORMAT.md "Runs"): at most 10 bytes and 64 bits. Returns 1 with *pp moved past the
 * value, or 0 when the column ends first or the value is longer. */
static inline int tkp_uvar(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    uint64_t x = 0;
    for (unsigned s = 0; p < end && s < 64; s += 7) {
        uint8_t c = *p++;
        if (s == 63 && c > 1) return 0;
        x |= (uint64_t)(c & 0x7f) << s;
        if (!(c & 0x80)) {
            *v = x;
            *pp = p;
            return 1;
        }
    }
    return 0;
}
static inline int64_t tkp_unzigzag(uint64_t x)
{
    return (int64_t)(x >> 1) ^ -(int64_t)(x & 1);
}
/* tkp_unzigzag of a one-byte varint (below 128), looked up: one load for the formula's five
 * operations (record_fast.c) */
extern const int64_t tkp_unzz_byte[128];

static inline uint64_t tkp_load64(const uint8_t *p)
{
    uint64_t w;
    memcpy(&w, p, 8);
    return w; /* little-endian hosts: byte 0 lowest */
}

/* Whether [p, end) is exactly n varints of at most 10 bytes and 64 bits each, eight bytes at a
 * time: a byte without bit 7 ends a varint. Needs 8 readable bytes past end (the reader pads
 * its payload buffer). */
static inline int tkp_varints_ok(const uint8_t *p, const uint8_t *end, uint64_t n)
{
    const uint64_t hi = 0x8080808080808080ull;
    uint64_t ends = 0;
    unsigned run = 0, bad = 0; /* run: continuation bytes of the varint still open */
    for (; p < end; p += 8) {
        uint64_t w = tkp_load64(p), m = ~w & hi;
        size_t k = (size_t)(end - p);
        if (run <= 1 && k >= 8) {
            if (m == hi && !run) { /* eight one-byte varints, none open before them */
                ends += 8;
                continue;
            }
            /* one- and two-byte varints (no two continuation bytes in a row) after at most one
             * open byte: a last byte that continues leaves one open, which the words after count */
            uint64_t c = w & hi;
            if (!(c & c << 8)) { /* (a third continuation byte after the open one: valid) */
                ends += ((m >> 7) * 0x0101010101010101ull) >> 56;
                run = (unsigned)(c >> 63);
                continue;
            }
        }
        if (k < 8) m &= (1ull << 8 * k) - 1; /* bytes past the column do not count */
        if (!m) { /* eight continuation bytes (k >= 8 here: a torn tail has a terminator) */
            run += k < 8 ? (unsigned)k : 8;
            bad |= run >= 10;
            continue;
        }
        unsigned first = (unsigned)__builtin_ctzll(m) >> 3, last = 63 - __builtin_clzll(m);
        run += first;
        /* the varint ending in this word: 10 bytes at most, the 10th holding only bit 63 */
        bad |= run >= 10 || (run == 9 && p[first] > 1);
        ends += ((m >> 7) * 0x0101010101010101ull) >> 56; /* one bit per byte: their sum */
        /* the gaps between terminators inside the word are below 8 bytes: always short */
        run = k < 8 ? (unsigned)(k - 1 - (last >> 3)) : 7 - (last >> 3);
    }
    return !bad && !run && ends == n;
}

/* A varint of a column tkp_varints_ok() accepted: one and two bytes (template ids, call steps,
 * most times) inline. */
static inline uint64_t tkp_uvar_ok(const uint8_t **pp)
{
    const uint8_t *p = *pp;
    if (__builtin_expect(p[0] < 0x80, 1)) {
        *pp = p + 1;
        return p[0];
    }
    if (__builtin_expect(p[1] < 0x80, 1)) {
        *pp = p + 2;
        return (p[0] & 0x7fu) | (uint64_t)p[1] << 7;
    }
    uint64_t v = 0;
    unsigned s = 0;
    do
        v |= (uint64_t)(*p & 0x7f) << s, s += 7;
    while (*p++ & 0x80);
    *pp = p;
    return v;
}

/* A RUN's header read inline (FORMAT.md "Runs"), for both of the reader's passes: a fixarray of
 * 9, RUN, step, n and call as msgpack unsigned integers, then the five columns as bins, kinds and
 * tmpls both nil or both bins. Returns 1 with *h filled and *after past the record; 0 for
 * anything else (extra fields included), which the general decoder reads, with its reasons. */
struct tkp_run_head {
    uint64_t step, n, call;
    const uint8_t *col[5];
    uint32_t len[5];
    int rep; /* kinds and tmpls nil */
};
static inline int tkp_run_uint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    if (p >= end) return 0;
    if (*p <= 0x7f) {
        *v = *p, *pp = p + 1;
        return 1;
    }
    if (*p < 0xcc || *p > 0xcf) return 0;
    unsigned size = 1u << (*p - 0xcc);
    if ((size_t)(end - p) < 1 + size) return 0;
    uint64_t x = 0;
    for (unsigned i = 1; i <= size; i++) x = x << 8 | p[i];
    *v = x, *pp = p + 1 + size;
    return 1;
}
static inline int tkp_run_head(const uint8_t *p, const uint8_t *end, struct tkp_run_head *h,
                               const uint8_t **after)
{
    if (end - p < 2 || p[0] != 0x99 || p[1] != TKP_REC_RUN) return 0;
    p += 2;
    if (!tkp_run_uint(&p, end, &h->step) || !tkp_run_uint(&p, end, &h->n) ||
        !tkp_run_uint(&p, end, &h->call))
        return 0;
    h->rep = p < end && *p == 0xc0;
    for (int k = 0; k < 5; k++) {
        if (p >= end) return 0;
        if (*p == 0xc0) { /* nil: kinds and tmpls of a repeating RUN only */
            if (!h->rep || (k != 0 && k != 2)) return 0;
            h->col[k] = NULL, h->len[k] = 0, p++;
            continue;
        }
        if (h->rep && (k == 0 || k == 2)) return 0;
        size_t room = (size_t)(end - p), len, hl;
        if (*p == 0xc4 && room >= 2) len = p[1], hl = 2;
        else if (*p == 0xc5 && room >= 3) len = (size_t)p[1] << 8 | p[2], hl = 3;
        else if (*p == 0xc6 && room >= 5)
            len = (size_t)p[1] << 24 | (size_t)p[2] << 16 | (size_t)p[3] << 8 | p[4], hl = 5;
        else return 0;
        if (room - hl < len) return 0;
        h->col[k] = p + hl, h->len[k] = (uint32_t)len;
        p += hl + len;
    }
    *after = p;
    return 1;
}

/* Readable bytes a payload buffer needs past its end (tkp_varints_ok, tkp_uvar_ok). */
#define TKP_PAYLOAD_PAD 8

/* Scratch the decoder fills; owned by the reader and reused record after record. */
struct tkp_decode_buf {
    struct tkp_graph_node *nodes;
    uint32_t nodes_cap;
    uint64_t *deps;
    uint32_t deps_cap;
    int64_t dt;           /* the record's dt, for types with tkp_record_has_time() */
    const char *name_raw; /* NAME: the string in the payload, not NUL-terminated */
    uint32_t name_len;
    char program[TKP_NAME_MAX], hostname[256], version[64]; /* META strings */
    char gpu_str[3][192]; /* GPU_INFO mode, reason, clock */
    uint64_t *pcs;        /* STACK frames */
    uint32_t pcs_cap;
    char path[TKP_NAME_MAX], build_id[136]; /* MODULE strings */
    uint32_t gen; /* the chunk being decoded (the reader sets it), for templates */
    struct tkp_launch_tmpl *ltmpl; /* by id, < TKP_TMPL_MAX */
    uint32_t ltmpl_cap;
    struct tkp_lib_tmpl *ctmpl;
    uint32_t ctmpl_cap;
    struct tkp_run run;
    struct tkp_cols cols;
    struct tkp_gpu_tmpl { /* GPU_TMPL by id (format v6): a GPU_KERNEL's fields, gen as above */
        uint64_t v[TKP_COLS_FIELDS];
        uint32_t gen;
    } * gtmpl;
    uint32_t gtmpl_cap;
    uint32_t tmpl_id; /* the template a TKP_DECODE_DEFINED record defined */
    /* launch / library-call ids below TKP_TMPL_OK_IDS checked defined in chunk ... */
#define TKP_TMPL_OK_IDS 4096
    uint64_t tmpl_ok[2][TKP_TMPL_OK_IDS / 64];
    uint32_t tmpl_ok_gen; /* ... gen (a RUN's check) */
};

/* Decodes the object at the cursor. Name ids are left unresolved (names NULL), tid is 0 and
 * host_ns is 0 (the dt is in b->dt). LAUNCH_T and LIB_CALL_T come out as the LAUNCH and LIB_CALL
 * they stand for. Returns 1 for a known record, 0 when an unknown type was skipped, 2 for a
 * template definition (TMPL, LIB_TMPL: stored in b, nothing to deliver), or TKP_ERR_RECORD /
 * TKP_ERR_NOMEM with a reason in why. */
#define TKP_DECODE_DEFINED 2
/* ... or 3 for a RUN: checked whole and opened in b->run, whose records tkp_record_run_next()
 * (record_fast.h) delivers one by one. */
#define TKP_DECODE_RUN 3
/* ... or 4 for a COLS or a GPU_RUN: checked whole and opened in b->cols, whose records the reader
 * delivers from the batches tkp_cols_batch() (capture/gputmpl.h) decodes. A GPU_TMPL is a
 * definition (2). */
#define TKP_DECODE_COLS 4
int tkp_record_decode(struct tkp_mp *c, struct tkp_record *r, struct tkp_decode_buf *b, char *why,
                      size_t whylen);

void tkp_decode_buf_free(struct tkp_decode_buf *b);

/* The fields of a type a COLS may hold (GPU_KERNEL, GPU_COPY): how many a record has at least,
 * 0 for any other type. */
unsigned tkp_cols_fields(uint64_t type);
/* Opens b->cols on n records of type with the columns of its known fields at col[], len[]
 * bytes long. */
void tkp_cols_begin(struct tkp_cols *u, uint32_t type, uint32_t n, const uint8_t *const *col,
                    const uint32_t *len);

/* "LAUNCH", "GRAPH", ... or NULL for an unknown type. */
const char *tkp_record_type_name(uint64_t type);

/* META: puts *c at the value of config.KEY (docs/FORMAT.md "META") in a META record's map.
 * Returns 1 found, 0 absent or malformed. */
int tkp_meta_config(const struct tkp_record *r, const char *key, struct tkp_mp *c);
/* META: config.KEY as an unsigned integer; dflt when absent or not one. */
uint64_t tkp_meta_config_uint(const struct tkp_record *r, const char *key, uint64_t dflt);

#endif
