/* tokprof decoder: Arrow C Data Interface export of columns built row by row (arrow.h). */
#include "views/arrow.h"

#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "base/grow.h"

int tkp_abuf_grow(struct tkp_abuf *b, size_t more, int *oom)
{
    /* Arrow wants 8-byte aligned buffers (64 recommended); realloc gives 16 */
    if (more > SIZE_MAX - b->len || TKP_GROW_FROM(b->p, b->cap, b->len + more, 256)) {
        *oom = 1;
        return -1;
    }
    return 0;
}

/* Room for `more` bytes; 0, or -1 after marking the table out of memory. */
static int reserve(struct tkp_abuf *b, size_t more, int *oom)
{
    return b->len + more <= b->cap ? 0 : tkp_abuf_grow(b, more, oom);
}

static void put(struct tkp_abuf *b, const void *v, size_t n, int *oom)
{
    if (reserve(b, n, oom)) return;
    memcpy(b->p + b->len, v, n);
    b->len += n;
}

int tkp_atab_init(struct tkp_atab *t, size_t ncols)
{
    memset(t, 0, sizeof(*t));
    t->cols = calloc(ncols ? ncols : 1, sizeof(*t->cols));
    if (!t->cols) return TKP_ERR_NOMEM;
    t->ncols = ncols;
    return 0;
}

void tkp_atab_col(struct tkp_atab *t, size_t i, const char *name, int kind, int nullable)
{
    struct tkp_acol *c = &t->cols[i];
    int32_t zero = 0;
    c->name = name;
    c->kind = kind;
    c->nullable = nullable;
    c->oom = &t->oom;
    if (kind == TKP_A_STR || kind == TKP_A_DICT) put(&c->offs, &zero, sizeof(zero), c->oom);
    /* no buffer is ever NULL, even for an empty table: some importers want them */
    reserve(&c->data, 8, c->oom);
    reserve(&c->chars, 8, c->oom);
}

static void buf_free(struct tkp_abuf *b)
{
    free(b->p);
    memset(b, 0, sizeof(*b));
}

void tkp_atab_free(struct tkp_atab *t)
{
    for (size_t i = 0; t->cols && i < t->ncols; i++) {
        buf_free(&t->cols[i].valid);
        buf_free(&t->cols[i].data);
        buf_free(&t->cols[i].chars);
        buf_free(&t->cols[i].offs);
    }
    free(t->cols);
    memset(t, 0, sizeof(*t));
}

/* The validity bit of row c->n. The bitmap exists only once a null was appended: rows before
 * it are all valid. */
void tkp_acol_valid(struct tkp_acol *c, int ok)
{
    if (!ok && !c->valid.p) {
        size_t bytes = c->n / 8 + 1;
        if (reserve(&c->valid, bytes, c->oom)) return;
        memset(c->valid.p, 0xff, bytes);
        c->valid.len = bytes;
    }
    if (c->valid.p) {
        size_t byte = c->n / 8;
        if (byte >= c->valid.len) {
            /* the bytes past the rows are zero (null), so appends only ever set bits */
            if (reserve(&c->valid, byte + 1 - c->valid.len, c->oom)) return;
            memset(c->valid.p + c->valid.len, 0, c->valid.cap - c->valid.len);
            c->valid.len = c->valid.cap;
        }
        if (ok) c->valid.p[byte] |= (uint8_t)(1u << (c->n % 8));
        else c->valid.p[byte] &= (uint8_t)~(1u << (c->n % 8));
    }
    if (!ok) c->nulls++;
    c->n++;
}

void tkp_acol_str(struct tkp_acol *c, const char *s)
{
    if (!s) {
        tkp_acol_null(c);
        return;
    }
    put(&c->chars, s, strlen(s), c->oom);
    int32_t end = (int32_t)c->chars.len;
    put(&c->offs, &end, sizeof(end), c->oom);
    tkp_acol_valid(c, 1);
}

void tkp_acol_null_slow(struct tkp_acol *c)
{
    static const uint8_t zero[8];
    if (c->kind == TKP_A_STR) {
        int32_t end = (int32_t)c->chars.len;
        put(&c->offs, &end, sizeof(end), c->oom);
    } else {
        put(&c->data, zero, c->kind == TKP_A_DICT ? 4 : 8, c->oom);
    }
    tkp_acol_valid(c, 0);
}

int32_t tkp_acol_dict_add(struct tkp_acol *c, const char *s)
{
    put(&c->chars, s, strlen(s), c->oom);
    int32_t end = (int32_t)c->chars.len;
    put(&c->offs, &end, sizeof(end), c->oom);
    return (int32_t)c->ndict++;
}

/* ---- export ---- */

/* What one exported array owns: its buffers, its children and dictionary. */
struct apriv {
    const void *bufs[3];
    void *own[3];
    struct ArrowArray **kids;
    int64_t nkids;
    struct ArrowArray *dict;
};

struct spriv {
    struct ArrowSchema **kids;
    int64_t nkids;
    struct ArrowSchema *dict;
};

/* The release callbacks of arrays and schemas: release and free the children and the
 * dictionary, then what the node owns; a released node has release == NULL (the C Data
 * Interface's rule). */
#define TKP_RELEASE(fn, T, P, extra)                                                               \
    static void fn(T *x)                                                                           \
    {                                                                                              \
        P *p = x->private_data;                                                                    \
        for (int64_t i = 0; i < p->nkids; i++) {                                                   \
            if (p->kids[i]->release) p->kids[i]->release(p->kids[i]);                              \
            free(p->kids[i]);                                                                      \
        }                                                                                          \
        if (p->dict) {                                                                             \
            if (p->dict->release) p->dict->release(p->dict);                                       \
            free(p->dict);                                                                         \
        }                                                                                          \
        extra;                                                                                     \
        free(p->kids);                                                                             \
        free(p);                                                                                   \
        x->release = NULL;                                                                         \
    }
TKP_RELEASE(arr_release, struct ArrowArray, struct apriv, for (int i = 0; i < 3; i++) free(p->own[i]))
TKP_RELEASE(sch_release, struct ArrowSchema, struct spriv, (void)0)

/* Fills a and s with an array of n_buffers buffers taken from bufs (ownership moves). */
static int node(struct ArrowArray *a, struct ArrowSchema *s, const char *format,
                const char *name, int64_t flags, int64_t len, int64_t nulls, int nbufs,
                struct tkp_abuf *bufs[3], int64_t nkids)
{
    struct apriv *ap = calloc(1, sizeof(*ap));
    struct spriv *sp = calloc(1, sizeof(*sp));
    if (ap && sp && nkids) {
        ap->kids = calloc((size_t)nkids, sizeof(*ap->kids));
        sp->kids = calloc((size_t)nkids, sizeof(*sp->kids));
    }
    if (!ap || !sp || (nkids && (!ap->kids || !sp->kids))) {
        if (ap) free(ap->kids);
        if (sp) free(sp->kids);
        free(ap);
        free(sp);
        return TKP_ERR_NOMEM;
    }
    for (int i = 0; i < nbufs; i++) {
        ap->own[i] = bufs[i] ? bufs[i]->p : NULL;
        ap->bufs[i] = ap->own[i];
        if (bufs[i]) memset(bufs[i], 0, sizeof(*bufs[i]));
    }
    *a = (struct ArrowArray){.length = len, .null_count = nulls, .n_buffers = nbufs,
                             .n_children = nkids, .buffers = ap->bufs, .children = ap->kids,
                             .release = arr_release, .private_data = ap};
    *s = (struct ArrowSchema){.format = format, .name = name, .flags = flags,
                              .n_children = nkids, .children = sp->kids,
                              .release = sch_release, .private_data = sp};
    return 0;
}

static int col_export(struct tkp_acol *c, struct ArrowArray *a, struct ArrowSchema *s)
{
    int64_t flags = c->nullable ? ARROW_FLAG_NULLABLE : 0, n = (int64_t)c->n;
    struct tkp_abuf *valid = c->nulls ? &c->valid : NULL;
    int err;
    if (c->kind == TKP_A_I64 || c->kind == TKP_A_U64) {
        struct tkp_abuf *b[3] = {valid, &c->data, NULL};
        return node(a, s, c->kind == TKP_A_I64 ? "l" : "L", c->name, flags, n,
                    (int64_t)c->nulls, 2, b, 0);
    }
    if (c->kind == TKP_A_STR) {
        struct tkp_abuf *b[3] = {valid, &c->offs, &c->chars};
        return node(a, s, "u", c->name, flags, n, (int64_t)c->nulls, 3, b, 0);
    }
    /* DICT: int32 indices, and the dictionary as a utf8 array of its own */
    struct ArrowArray *da = calloc(1, sizeof(*da));
    struct ArrowSchema *ds = calloc(1, sizeof(*ds));
    struct tkp_abuf *db[3] = {NULL, &c->offs, &c->chars};
    if (!da || !ds || (err = node(da, ds, "u", NULL, 0, (int64_t)c->ndict, 0, 3, db, 0))) {
        free(da);
        free(ds);
        return TKP_ERR_NOMEM;
    }
    struct tkp_abuf *b[3] = {valid, &c->data, NULL};
    if ((err = node(a, s, "i", c->name, flags, n, (int64_t)c->nulls, 2, b, 0))) {
        da->release(da);
        ds->release(ds);
        free(da);
        free(ds);
        return err;
    }
    ((struct apriv *)a->private_data)->dict = da;
    a->dictionary = da;
    ((struct spriv *)s->private_data)->dict = ds;
    s->dictionary = ds;
    return 0;
}

int tkp_atab_export(struct tkp_atab *t, struct ArrowArray *out, struct ArrowSchema *schema)
{
    struct tkp_abuf *none[3] = {NULL, NULL, NULL};
    int err = t->oom ? TKP_ERR_NOMEM : 0;
    if (!err) err = node(out, schema, "+s", "", 0, (int64_t)t->nrows, 0, 1, none, (int64_t)t->ncols);
    if (err) {
        tkp_atab_free(t);
        return err;
    }
    struct apriv *ap = out->private_data;
    struct spriv *sp = schema->private_data;
    for (size_t i = 0; i < t->ncols; i++) {
        struct ArrowArray *a = calloc(1, sizeof(*a));
        struct ArrowSchema *s = calloc(1, sizeof(*s));
        if (a && s && !(err = col_export(&t->cols[i], a, s))) {
            ap->kids[ap->nkids++] = a;
            sp->kids[sp->nkids++] = s;
            continue;
        }
        free(a);
        free(s);
        /* children exported so far are released with the parents */
        out->n_children = ap->nkids;
        schema->n_children = sp->nkids;
        out->release(out);
        schema->release(schema);
        tkp_atab_free(t);
        return TKP_ERR_NOMEM;
    }
    tkp_atab_free(t);
    return 0;
}
