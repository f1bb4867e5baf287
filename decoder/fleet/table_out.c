/* tokprof decoder: rows in ClickHouse's formats, compressed (see table_out.h).
 *
 * Text formats write each value straight into a stage buffer; Native keeps one buffer per
 * column (and one for array offsets) until the block is full. Either way the bytes go through
 * one compressor (zstd stream, zlib gzip stream, or none) to the sink in pieces of at most
 * TKP_TAB_STAGE bytes. */
#include "fleet/table_out.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

#include "base/err.h"
#include "base/grow.h"

struct buf {
    uint8_t *p;
    size_t len, cap;
};

struct tkp_tab_out {
    const struct tkp_tab_col *cols;
    int ncols, fmt, z, col, err, started;
    size_t row_start; /* text: where the current row starts in stage */
    tkp_tab_sink_fn *sink;
    void *arg;
    uint64_t rows;
    struct buf stage; /* text, or a Native block being serialised */
    struct buf *colb; /* Native: per column values */
    struct buf *offs; /* Native: per array column, its rows' end offsets; per Nullable, its null
                         map */
    uint64_t *nelem;  /* Native: per array column, elements so far in the block */
    size_t block_rows;
    ZSTD_CStream *zs;
    z_stream gz;
    int gz_on;
    uint8_t *zbuf;
    size_t zcap;
};

static __attribute__((noinline)) int grow(struct tkp_tab_out *o, struct buf *b, size_t n)
{
    if (n > SIZE_MAX - b->len || TKP_GROW_FROM(b->p, b->cap, b->len + n, 4096))
        return o->err = o->err ? o->err : TKP_ERR_NOMEM;
    return 0;
}

/* Room for n more bytes at b->p + b->len: 0, or NOMEM (kept in o->err). */
static inline int room(struct tkp_tab_out *o, struct buf *b, size_t n)
{
    return b->len + n <= b->cap ? 0 : grow(o, b, n);
}

static inline int put(struct tkp_tab_out *o, struct buf *b, const void *p, size_t n)
{
    if (room(o, b, n)) return o->err;
    if (n) memcpy(b->p + b->len, p, n); /* an empty column: p may be NULL */
    b->len += n;
    return 0;
}

static inline void putc_(struct tkp_tab_out *o, struct buf *b, char c)
{
    if (room(o, b, 1)) return;
    b->p[b->len++] = (uint8_t)c;
}

static void puts_(struct tkp_tab_out *o, struct buf *b, const char *s)
{
    put(o, b, s, strlen(s));
}

const char *tkp_tab_type_name(int type)
{
    static const char *const n[] = {"UInt64", "Int64", "String", "Array(String)",
                                    "Nullable(UInt64)"};
    return type >= 0 && type <= TKP_COL_NU64 ? n[type] : "?";
}

const char *tkp_tab_fmt_name(int fmt)
{
    return fmt == TKP_FMT_JSON ? "JSONEachRow" : fmt == TKP_FMT_NATIVE ? "Native" : "TSVWithNames";
}

int tkp_tab_fmt_parse(const char *s)
{
    if (!strcmp(s, "tsv") || !strcmp(s, "TSVWithNames")) return TKP_FMT_TSV;
    if (!strcmp(s, "json") || !strcmp(s, "JSONEachRow")) return TKP_FMT_JSON;
    if (!strcmp(s, "native") || !strcmp(s, "Native")) return TKP_FMT_NATIVE;
    return -1;
}

int tkp_tab_z_parse(const char *s)
{
    return !strcmp(s, "zstd")   ? TKP_Z_ZSTD
           : !strcmp(s, "gzip") ? TKP_Z_GZIP
           : !strcmp(s, "none") ? TKP_Z_NONE
                                : -1;
}

int tkp_tab_out_new(const struct tkp_tab_col *cols, int ncols, int fmt, int z, int level,
                    tkp_tab_sink_fn *sink, void *arg, struct tkp_tab_out **out)
{
    struct tkp_tab_out *o = calloc(1, sizeof(*o));
    *out = NULL;
    if (!o) return TKP_ERR_NOMEM;
    o->cols = cols, o->ncols = ncols, o->fmt = fmt, o->z = z, o->sink = sink, o->arg = arg;
    if (fmt == TKP_FMT_NATIVE) {
        o->colb = calloc((size_t)ncols, sizeof(*o->colb));
        o->offs = calloc((size_t)ncols, sizeof(*o->offs));
        o->nelem = calloc((size_t)ncols, sizeof(*o->nelem));
        if (!o->colb || !o->offs || !o->nelem) goto nomem;
    }
    if (z == TKP_Z_ZSTD) {
        if (!(o->zs = ZSTD_createCStream())) goto nomem;
        ZSTD_CCtx_setParameter(o->zs, ZSTD_c_compressionLevel, level ? level : 1);
        o->zcap = ZSTD_CStreamOutSize();
    } else if (z == TKP_Z_GZIP) {
        /* windowBits 15 + 16: a gzip header and trailer, what Content-Encoding: gzip means */
        if (deflateInit2(&o->gz, level ? level : 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) !=
            Z_OK)
            goto nomem;
        o->gz_on = 1;
        o->zcap = 1u << 16;
    }
    if (o->zcap && !(o->zbuf = malloc(o->zcap))) goto nomem;
    *out = o;
    return 0;
nomem:
    tkp_tab_out_free(o);
    return TKP_ERR_NOMEM;
}

void tkp_tab_out_free(struct tkp_tab_out *o)
{
    if (!o) return;
    for (int c = 0; o->colb && c < o->ncols; c++)
        free(o->colb[c].p), free(o->offs[c].p);
    free(o->colb);
    free(o->offs);
    free(o->nelem);
    free(o->stage.p);
    ZSTD_freeCStream(o->zs);
    if (o->gz_on) deflateEnd(&o->gz);
    free(o->zbuf);
    free(o);
}

/* Compresses n bytes (end: finish the stream) and hands the output to the sink. */
static int emit(struct tkp_tab_out *o, const void *p, size_t n, int end)
{
    if (o->err) return o->err;
    if (o->z == TKP_Z_NONE) return n ? (o->err = o->sink(o->arg, p, n)) : 0;
    if (o->z == TKP_Z_ZSTD) {
        ZSTD_inBuffer in = {p, n, 0};
        for (;;) {
            ZSTD_outBuffer zo = {o->zbuf, o->zcap, 0};
            size_t left = ZSTD_compressStream2(o->zs, &zo, &in, end ? ZSTD_e_end : ZSTD_e_continue);
            if (ZSTD_isError(left)) return o->err = TKP_ERR_NOMEM;
            if (zo.pos && (o->err = o->sink(o->arg, o->zbuf, zo.pos))) return o->err;
            if (end ? left == 0 : in.pos == in.size) return 0;
        }
    }
    o->gz.next_in = (Bytef *)(uintptr_t)p;
    o->gz.avail_in = (uInt)n;
    for (;;) {
        o->gz.next_out = o->zbuf;
        o->gz.avail_out = (uInt)o->zcap;
        int rc = deflate(&o->gz, end ? Z_FINISH : Z_NO_FLUSH);
        if (rc == Z_STREAM_ERROR) return o->err = TKP_ERR_NOMEM;
        size_t got = o->zcap - o->gz.avail_out;
        if (got && (o->err = o->sink(o->arg, o->zbuf, got))) return o->err;
        if (end ? rc == Z_STREAM_END : o->gz.avail_in == 0 && o->gz.avail_out != 0) return 0;
    }
}

static int flush_stage(struct tkp_tab_out *o)
{
    int err = emit(o, o->stage.p, o->stage.len, 0);
    o->stage.len = 0;
    return err;
}

static void header(struct tkp_tab_out *o)
{
    o->started = 1;
    if (o->fmt != TKP_FMT_TSV) return;
    for (int c = 0; c < o->ncols; c++) {
        if (c) putc_(o, &o->stage, '\t');
        puts_(o, &o->stage, o->cols[c].name);
    }
    putc_(o, &o->stage, '\n');
}

/* The current column, checked against the type given; NULL (and the error kept) on mismatch. */
static inline const struct tkp_tab_col *next_col(struct tkp_tab_out *o, int type)
{
    if (!o->started) header(o);
    if (o->col >= o->ncols ||
        (o->cols[o->col].type != type &&
         !(type == TKP_COL_U64 && o->cols[o->col].type == TKP_COL_NU64))) {
        if (!o->err) o->err = TKP_ERR_USAGE;
        return NULL;
    }
    if (!o->col) o->row_start = o->stage.len;
    const struct tkp_tab_col *c = &o->cols[o->col++];
    if (o->fmt == TKP_FMT_TSV && o->col > 1) putc_(o, &o->stage, '\t');
    if (o->fmt == TKP_FMT_JSON) {
        puts_(o, &o->stage, o->col > 1 ? ",\"" : "{\"");
        puts_(o, &o->stage, c->name);
        puts_(o, &o->stage, "\":");
    }
    return c;
}

static void native_varint(struct tkp_tab_out *o, struct buf *b, uint64_t v)
{
    uint8_t t[10];
    size_t n = 0;
    do {
        t[n] = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) t[n] |= 0x80;
        n++;
    } while (v);
    put(o, b, t, n);
}

static void native_str(struct tkp_tab_out *o, struct buf *b, const char *s)
{
    size_t n = strlen(s);
    native_varint(o, b, n);
    put(o, b, s, n);
}

static const uint64_t pow10_[20] = {1ull,
                                     10ull,
                                     100ull,
                                     1000ull,
                                     10000ull,
                                     100000ull,
                                     1000000ull,
                                     10000000ull,
                                     100000000ull,
                                     1000000000ull,
                                     10000000000ull,
                                     100000000000ull,
                                     1000000000000ull,
                                     10000000000000ull,
                                     100000000000000ull,
                                     1000000000000000ull,
                                     10000000000000000ull,
                                     100000000000000000ull,
                                     1000000000000000000ull,
                                     10000000000000000000ull};

static const char d2[] = "00010203040506070809101112131415161718192021222324252627282930313233"
                         "34353637383940414243444546474849505152535455565758596061626364656667"
                         "68697071727374757677787980818283848586878889909192939495969798"
                         "99";

/* Decimal digits of v (1..20): log10 from the bit length, then one comparison. */
static inline unsigned ndigits(uint64_t v)
{
    unsigned t = (unsigned)(64 - __builtin_clzll(v | 1)) * 1233 >> 12;
    return t + (v >= pow10_[t]) + !v;
}

/* The n decimal digits of v, written backwards from p (two per division; below 10^8 in 32-bit
 * arithmetic, the tables being mostly small counts and 19-digit epoch times). */
static inline void digits_at(char *p, uint64_t v)
{
    while (v >= 100000000) {
        uint32_t lo = (uint32_t)(v % 100000000);
        v /= 100000000;
        for (int i = 0; i < 4; i++, lo /= 100)
            p -= 2, memcpy(p, d2 + 2 * (lo % 100), 2);
    }
    uint32_t w = (uint32_t)v;
    while (w >= 100)
        p -= 2, memcpy(p, d2 + 2 * (w % 100), 2), w /= 100;
    if (w >= 10) memcpy(p - 2, d2 + 2 * w, 2);
    else p[-1] = (char)('0' + w);
}

/* Decimal text of v, minus sign first when neg, straight into the stage (snprintf cost a third
 * of a table's time). */
static inline void num_text(struct tkp_tab_out *o, uint64_t v, int neg)
{
    if (room(o, &o->stage, 21)) return;
    char *p = (char *)o->stage.p + o->stage.len;
    if (neg) *p++ = '-';
    unsigned n = ndigits(v);
    digits_at(p + n, v);
    o->stage.len = (size_t)(p + n - (char *)o->stage.p);
}

/* A TSV value after the first column of a column of this type, with room for a tab: the common
 * case, which the value functions take without next_col()'s cases. */
static inline int tsv_next(struct tkp_tab_out *o, int type)
{
    if (o->fmt != TKP_FMT_TSV || o->col <= 0 || o->col >= o->ncols ||
        o->cols[o->col].type != type || room(o, &o->stage, 1))
        return 0;
    o->col++;
    o->stage.p[o->stage.len++] = '\t';
    return 1;
}

void tkp_tab_u64(struct tkp_tab_out *o, uint64_t v)
{
    if (tsv_next(o, TKP_COL_U64)) {
        num_text(o, v, 0);
        return;
    }
    const struct tkp_tab_col *c = next_col(o, TKP_COL_U64);
    if (!c) return;
    if (o->fmt == TKP_FMT_NATIVE) {
        put(o, &o->colb[o->col - 1], &v, 8); /* x86-64: little end */
        if (c->type == TKP_COL_NU64) putc_(o, &o->offs[o->col - 1], 0); /* not NULL */
    } else {
        num_text(o, v, 0);
    }
}

void tkp_tab_null(struct tkp_tab_out *o)
{
    static const uint64_t zero = 0;
    if (!next_col(o, TKP_COL_NU64)) return;
    if (o->fmt == TKP_FMT_NATIVE) {
        put(o, &o->colb[o->col - 1], &zero, 8);
        putc_(o, &o->offs[o->col - 1], 1);
    } else {
        puts_(o, &o->stage, o->fmt == TKP_FMT_JSON ? "null" : "\\N");
    }
}

void tkp_tab_i64(struct tkp_tab_out *o, int64_t v)
{
    uint64_t a = v < 0 ? -(uint64_t)v : (uint64_t)v;
    if (tsv_next(o, TKP_COL_I64)) {
        num_text(o, a, v < 0);
        return;
    }
    if (!next_col(o, TKP_COL_I64)) return;
    if (o->fmt == TKP_FMT_NATIVE)
        put(o, &o->colb[o->col - 1], &v, 8);
    else
        num_text(o, a, v < 0);
}

/* Bytes TSV escapes (1), and in a quoted array element also ' (2); NUL ends the scan (3). */
static const uint8_t tsv_esc[256] = {
    [0] = 3, ['\\'] = 3, ['\t'] = 3, ['\n'] = 3, ['\r'] = 3, ['\b'] = 3, ['\f'] = 3, ['\''] = 2};

/* TSV escaping (quoted: inside an array, ' is escaped too); plain runs are copied whole. */
static void tsv_str(struct tkp_tab_out *o, const char *s, int quoted)
{
    const uint8_t stop = quoted ? 3 : 1;
    for (;;) {
        size_t n = 0;
        while (!(tsv_esc[(uint8_t)s[n]] & stop))
            n++;
        put(o, &o->stage, s, n);
        s += n;
        if (!*s) return;
        const char *e = NULL;
        switch (*s++) {
        case '\\':
            e = "\\\\";
            break;
        case '\t':
            e = "\\t";
            break;
        case '\n':
            e = "\\n";
            break;
        case '\r':
            e = "\\r";
            break;
        case '\b':
            e = "\\b";
            break;
        case '\f':
            e = "\\f";
            break;
        default:
            e = "\\'";
            break;
        }
        put(o, &o->stage, e, 2);
    }
}

static void json_str(struct tkp_tab_out *o, const char *s)
{
    putc_(o, &o->stage, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            putc_(o, &o->stage, '\\');
            putc_(o, &o->stage, (char)c);
        } else if (c < 0x20) {
            char t[8];
            snprintf(t, sizeof(t), "\\u%04x", c);
            puts_(o, &o->stage, t);
        } else {
            putc_(o, &o->stage, (char)c);
        }
    }
    putc_(o, &o->stage, '"');
}

void tkp_tab_str(struct tkp_tab_out *o, const char *s)
{
    if (!s) s = "";
    if (tsv_next(o, TKP_COL_STR)) {
        tsv_str(o, s, 0);
        return;
    }
    if (!next_col(o, TKP_COL_STR)) return;
    if (o->fmt == TKP_FMT_NATIVE)
        native_str(o, &o->colb[o->col - 1], s);
    else if (o->fmt == TKP_FMT_JSON)
        json_str(o, s);
    else
        tsv_str(o, s, 0);
}

void tkp_tab_strs(struct tkp_tab_out *o, const char *const *v, size_t n)
{
    if (!next_col(o, TKP_COL_STRS)) return;
    int c = o->col - 1;
    if (o->fmt == TKP_FMT_NATIVE) {
        o->nelem[c] += n;
        put(o, &o->offs[c], &o->nelem[c], 8);
        for (size_t i = 0; i < n; i++)
            native_str(o, &o->colb[c], v[i]);
        return;
    }
    putc_(o, &o->stage, '[');
    for (size_t i = 0; i < n; i++) {
        if (i) putc_(o, &o->stage, ',');
        if (o->fmt == TKP_FMT_JSON) {
            json_str(o, v[i]);
        } else {
            putc_(o, &o->stage, '\'');
            tsv_str(o, v[i], 1);
            putc_(o, &o->stage, '\'');
        }
    }
    putc_(o, &o->stage, ']');
}

/* Serialises the Native block into the stage and emits it. */
static int native_block(struct tkp_tab_out *o)
{
    if (!o->block_rows) return o->err;
    native_varint(o, &o->stage, (uint64_t)o->ncols);
    native_varint(o, &o->stage, o->block_rows);
    for (int c = 0; c < o->ncols; c++) {
        native_str(o, &o->stage, o->cols[c].name);
        native_str(o, &o->stage, tkp_tab_type_name(o->cols[c].type));
        if (o->cols[c].type == TKP_COL_STRS || o->cols[c].type == TKP_COL_NU64)
            put(o, &o->stage, o->offs[c].p, o->offs[c].len); /* offsets; a null map */
        put(o, &o->stage, o->colb[c].p, o->colb[c].len);
        o->colb[c].len = o->offs[c].len = 0;
        o->nelem[c] = 0;
    }
    o->block_rows = 0;
    return flush_stage(o);
}

const void *tkp_tab_row_text(const struct tkp_tab_out *o, size_t *len, int *ncols)
{
    if (o->fmt == TKP_FMT_NATIVE || o->err || !o->col) return NULL;
    *len = o->stage.len - o->row_start;
    *ncols = o->col;
    return o->stage.p + o->row_start;
}

void tkp_tab_row_again(struct tkp_tab_out *o, const void *text, size_t len, int ncols)
{
    if (!o->started) header(o);
    if (o->col || ncols > o->ncols || o->fmt == TKP_FMT_NATIVE) {
        if (!o->err) o->err = TKP_ERR_USAGE;
        return;
    }
    o->row_start = o->stage.len;
    put(o, &o->stage, text, len);
    o->col = ncols;
}

int tkp_tab_row_end(struct tkp_tab_out *o)
{
    if (o->col != o->ncols && !o->err) o->err = TKP_ERR_USAGE;
    o->col = 0;
    if (o->err) return o->err;
    o->rows++;
    if (o->fmt == TKP_FMT_NATIVE) {
        if (++o->block_rows == TKP_TAB_BLOCK_ROWS) return native_block(o);
        return o->err;
    }
    if (o->fmt == TKP_FMT_JSON) putc_(o, &o->stage, '}');
    putc_(o, &o->stage, '\n');
    if (o->stage.len >= TKP_TAB_STAGE) return flush_stage(o);
    return o->err;
}

uint64_t tkp_tab_rows(const struct tkp_tab_out *o)
{
    return o->rows;
}

int tkp_tab_out_finish(struct tkp_tab_out *o)
{
    if (!o->started) header(o);
    if (o->fmt == TKP_FMT_NATIVE)
        native_block(o);
    else
        flush_stage(o);
    return emit(o, NULL, 0, 1);
}
