/* tokprof decoder: columns built in C and handed over by the Arrow C Data Interface
 * (tokprof/decoder.h has the two structs). A table is a fixed list of columns that grow row by
 * row; exporting moves their buffers into a struct array that the consumer releases.
 *
 *     struct tkp_atab t;
 *     tkp_atab_init(&t, 2);
 *     tkp_atab_col(&t, 0, "tid", TKP_A_U64, 0);
 *     tkp_atab_col(&t, 1, "name", TKP_A_DICT, 1);
 *     ... tkp_acol_u64(&t.cols[0], tid); tkp_acol_dict(&t.cols[1], idx); t.nrows++; ...
 *     err = tkp_atab_export(&t, &array, &schema);   // t is empty afterwards
 *
 * Column kinds: 64-bit integers (every count and time of the decoder fits one), UTF-8 strings,
 * and dictionary-encoded strings (int32 indices into a table of distinct strings: kernel names,
 * record types) whose dictionary is filled with tkp_acol_dict_add. Nulls are a validity bitmap,
 * allocated at the first null. Appends never fail: an allocation failure marks the table, and
 * export returns TKP_ERR_NOMEM. */
#ifndef TKP_ARROW_H
#define TKP_ARROW_H

#include <stddef.h>
#include <stdint.h>

#include "tokprof/decoder.h"

enum tkp_akind { TKP_A_I64, TKP_A_U64, TKP_A_STR, TKP_A_DICT };

struct tkp_abuf { /* a growable byte buffer */
    uint8_t *p;
    size_t len, cap;
};

struct tkp_acol {
    const char *name; /* static */
    int kind, nullable;
    size_t n, nulls;
    struct tkp_abuf valid, data, chars; /* chars: string bytes (STR, and DICT's dictionary) */
    struct tkp_abuf offs;               /* DICT: the dictionary's int32 offsets */
    size_t ndict;                       /* DICT: strings in the dictionary */
    int *oom;                           /* the table's failure flag */
};

struct tkp_atab {
    struct tkp_acol *cols;
    size_t ncols, nrows;
    int oom;
};

/* Returns 0 or TKP_ERR_NOMEM. */
int tkp_atab_init(struct tkp_atab *t, size_t ncols);
/* Declares column i (name is not copied: a string literal). */
void tkp_atab_col(struct tkp_atab *t, size_t i, const char *name, int kind, int nullable);
void tkp_atab_free(struct tkp_atab *t); /* what export did not take */

/* Appends one value (the column's kind decides which call applies). The fixed-size ones are
 * inline: a records table calls them for every record and column. */
static inline void tkp_acol_i64(struct tkp_acol *c, int64_t v);
static inline void tkp_acol_u64(struct tkp_acol *c, uint64_t v);
static inline void tkp_acol_dict(struct tkp_acol *c, int32_t idx); /* from tkp_acol_dict_add */
void tkp_acol_str(struct tkp_acol *c, const char *s); /* NULL: null */
static inline void tkp_acol_null(struct tkp_acol *c);
/* Adds s to a DICT column's dictionary; returns its index (the caller dedups). */
int32_t tkp_acol_dict_add(struct tkp_acol *c, const char *s);

/* Moves the columns into *out (a struct array of t->nrows rows) and *schema. Returns 0, or
 * TKP_ERR_NOMEM (nothing exported, t freed). */
int tkp_atab_export(struct tkp_atab *t, struct ArrowArray *out, struct ArrowSchema *schema);

/* ---- internal: the inline appends' slow paths (arrow.c) ---- */
int tkp_abuf_grow(struct tkp_abuf *b, size_t more, int *oom); /* 0, or -1 with *oom set */
void tkp_acol_valid(struct tkp_acol *c, int ok);               /* the next row's validity */
void tkp_acol_null_slow(struct tkp_acol *c);

static inline void tkp_acol_put(struct tkp_acol *c, const void *v, size_t n)
{
    struct tkp_abuf *b = &c->data;
    if (b->len + n > b->cap && tkp_abuf_grow(b, n, c->oom)) return;
    __builtin_memcpy(b->p + b->len, v, n);
    b->len += n;
    /* most columns never see a null: no bitmap then */
    if (!c->valid.p) {
        c->n++;
    } else if ((c->n >> 3) < c->valid.len) {
        c->valid.p[c->n >> 3] |= (uint8_t)(1u << (c->n & 7));
        c->n++;
    } else {
        tkp_acol_valid(c, 1);
    }
}

static inline void tkp_acol_i64(struct tkp_acol *c, int64_t v)
{
    tkp_acol_put(c, &v, 8);
}

static inline void tkp_acol_u64(struct tkp_acol *c, uint64_t v)
{
    tkp_acol_put(c, &v, 8);
}

static inline void tkp_acol_dict(struct tkp_acol *c, int32_t idx)
{
    tkp_acol_put(c, &idx, 4);
}

/* A wide records table is mostly nulls (a launch has no GPU times, no GEMM shape): the common
 * case, a fixed-width column whose bitmap and buffer have room, stays inline. */
static inline void tkp_acol_null(struct tkp_acol *c)
{
    struct tkp_abuf *b = &c->data;
    size_t w = c->kind == TKP_A_DICT ? 4 : 8;
    if (c->kind == TKP_A_STR || !c->valid.p || (c->n >> 3) >= c->valid.len ||
        b->len + w > b->cap) {
        tkp_acol_null_slow(c);
        return;
    }
    __builtin_memset(b->p + b->len, 0, w);
    b->len += w;
    c->valid.p[c->n >> 3] &= (uint8_t)~(1u << (c->n & 7));
    c->nulls++;
    c->n++;
}

#endif
