/* The fleet tables' row writer (decoder/fleet/table_out.c): numbers as printf writes them at
 * every digit count and sign, TSV and JSON string escapes byte for byte, the fast TSV path and
 * the general one giving the same bytes, and column type/count errors kept. The table commands'
 * tests compare whole tables with ClickHouse; this pins the encoder's edge values, which no
 * capture reaches (20-digit numbers, INT64_MIN, every escape inside an array). */
#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "fleet/table_out.h"

struct mem {
    char *p;
    size_t len, cap;
};

static int sink(void *arg, const void *buf, size_t n)
{
    struct mem *m = arg;
    if (m->len + n + 1 > m->cap) {
        m->cap = (m->len + n + 1) * 2;
        m->p = realloc(m->p, m->cap);
        cr_assert_not_null(m->p);
    }
    memcpy(m->p + m->len, buf, n);
    m->len += n;
    m->p[m->len] = 0;
    return 0;
}

/* Values around every power of ten and of two, and the extremes. */
static size_t edge_values(uint64_t *v, size_t cap)
{
    size_t n = 0;
    uint64_t p = 1;
    for (int i = 0; i < 20; i++, p *= 10) {
        v[n++] = p - 1, v[n++] = p, v[n++] = p + 1;
        if (i < 19) v[n++] = p * 10 - 1;
    }
    for (int i = 0; i < 64; i++)
        v[n++] = (uint64_t)1 << i, v[n++] = ((uint64_t)1 << i) - 1;
    v[n++] = UINT64_MAX, v[n++] = UINT64_MAX - 1, v[n++] = 10000000000000000000ull - 1;
    v[n++] = 1796156011636592728ull, v[n++] = 100000000, v[n++] = 99999999, v[n++] = 100000001;
    v[n++] = 10000000000000000ull, v[n++] = 100000000ull * 100000000ull + 7;
    cr_assert_leq(n, cap);
    return n;
}

static const struct tkp_tab_col cols3[] = {
    {"a", TKP_COL_U64}, {"b", TKP_COL_U64}, {"c", TKP_COL_I64}};

Test(tabout, numbers_as_printf_writes_them)
{
    uint64_t v[256];
    size_t n = edge_values(v, 256);
    for (int fmt = TKP_FMT_TSV; fmt <= TKP_FMT_JSON; fmt++) {
        struct mem m = {0};
        struct tkp_tab_out *o;
        cr_assert_eq(tkp_tab_out_new(cols3, 3, fmt, TKP_Z_NONE, 0, sink, &m, &o), 0);
        for (size_t i = 0; i < n; i++) {
            /* the first column takes the general path, the second the fast one */
            tkp_tab_u64(o, v[i]);
            tkp_tab_u64(o, v[i]);
            tkp_tab_i64(o, i % 2 ? -(int64_t)(v[i] >> 1) : (int64_t)(v[i] >> 1));
            cr_assert_eq(tkp_tab_row_end(o), 0);
        }
        tkp_tab_u64(o, 0), tkp_tab_u64(o, 0), tkp_tab_i64(o, INT64_MIN);
        cr_assert_eq(tkp_tab_row_end(o), 0);
        cr_assert_eq(tkp_tab_out_finish(o), 0);
        cr_assert(fmt != TKP_FMT_JSON || strstr(m.p, "\"c\":-9223372036854775808}\n"));
        tkp_tab_out_free(o);
        free(m.p);
    }
    /* the bytes, against snprintf */
    struct mem m = {0};
    struct tkp_tab_out *o;
    cr_assert_eq(tkp_tab_out_new(cols3, 3, TKP_FMT_TSV, TKP_Z_NONE, 0, sink, &m, &o), 0);
    size_t want_cap = 1 << 16, wl = 0;
    char *want = malloc(want_cap);
    wl += (size_t)snprintf(want + wl, want_cap - wl, "a\tb\tc\n");
    for (size_t i = 0; i < n; i++) {
        int64_t s = i % 2 ? -(int64_t)(v[i] >> 1) : (int64_t)(v[i] >> 1);
        tkp_tab_u64(o, v[i]), tkp_tab_u64(o, v[i]), tkp_tab_i64(o, s);
        cr_assert_eq(tkp_tab_row_end(o), 0);
        wl += (size_t)snprintf(want + wl, want_cap - wl, "%" PRIu64 "\t%" PRIu64 "\t%" PRId64 "\n",
                               v[i], v[i], s);
    }
    tkp_tab_u64(o, 0), tkp_tab_u64(o, UINT64_MAX), tkp_tab_i64(o, INT64_MIN);
    cr_assert_eq(tkp_tab_row_end(o), 0);
    wl += (size_t)snprintf(want + wl, want_cap - wl, "0\t18446744073709551615\t%" PRId64 "\n",
                           INT64_MIN);
    cr_assert_eq(tkp_tab_out_finish(o), 0);
    cr_assert_eq(m.len, wl);
    cr_assert_str_eq(m.p, want);
    tkp_tab_out_free(o);
    free(want), free(m.p);
}

static const struct tkp_tab_col cols_s[] = {
    {"n", TKP_COL_U64}, {"s", TKP_COL_STR}, {"v", TKP_COL_STRS}, {"t", TKP_COL_STR}};

static char *one_row(int fmt, const char *s, const char *const *v, size_t nv)
{
    struct mem m = {0};
    struct tkp_tab_out *o;
    cr_assert_eq(tkp_tab_out_new(cols_s, 4, fmt, TKP_Z_NONE, 0, sink, &m, &o), 0);
    tkp_tab_u64(o, 1);
    tkp_tab_str(o, s);
    tkp_tab_strs(o, v, nv);
    tkp_tab_str(o, NULL);
    cr_assert_eq(tkp_tab_row_end(o), 0);
    cr_assert_eq(tkp_tab_out_finish(o), 0);
    tkp_tab_out_free(o);
    return m.p;
}

Test(tabout, tsv_escapes_every_special_byte)
{
    const char *v[] = {"it's", "a\\b", "", "tab\there"};
    char *t = one_row(TKP_FMT_TSV, "a\tb\nc\rd\\e\bf\fg'h", v, 4);
    cr_assert_str_eq(t, "n\ts\tv\tt\n"
                        "1\ta\\tb\\nc\\rd\\\\e\\bf\\fg'h\t['it\\'s','a\\\\b','','tab\\there']\t\n");
    free(t);
    t = one_row(TKP_FMT_TSV, "plain, no escapes at all; long enough to pass sixteen bytes", v, 0);
    cr_assert_str_eq(t, "n\ts\tv\tt\n1\tplain, no escapes at all; long enough to pass sixteen "
                        "bytes\t[]\t\n");
    free(t);
    t = one_row(TKP_FMT_TSV, "\\", v, 1);
    cr_assert_str_eq(t, "n\ts\tv\tt\n1\t\\\\\t['it\\'s']\t\n");
    free(t);
}

Test(tabout, json_escapes_quotes_and_control_bytes)
{
    const char *v[] = {"q\"", "\x01"};
    char *t = one_row(TKP_FMT_JSON, "a\"b\\c\td\x1f\xc3\xa9", v, 2);
    cr_assert_str_eq(t, "{\"n\":1,\"s\":\"a\\\"b\\\\c\\u0009d\\u001f\xc3\xa9\","
                        "\"v\":[\"q\\\"\",\"\\u0001\"],\"t\":\"\"}\n");
    free(t);
}

Test(tabout, wrong_type_or_count_is_kept)
{
    struct mem m = {0};
    struct tkp_tab_out *o;
    cr_assert_eq(tkp_tab_out_new(cols3, 3, TKP_FMT_TSV, TKP_Z_NONE, 0, sink, &m, &o), 0);
    tkp_tab_u64(o, 1), tkp_tab_i64(o, 2); /* column b is U64: the fast path must not take it */
    tkp_tab_i64(o, 3);
    cr_assert_eq(tkp_tab_row_end(o), TKP_ERR_USAGE);
    tkp_tab_out_free(o);
    free(m.p);
    m = (struct mem){0};
    cr_assert_eq(tkp_tab_out_new(cols3, 3, TKP_FMT_TSV, TKP_Z_NONE, 0, sink, &m, &o), 0);
    tkp_tab_u64(o, 1), tkp_tab_u64(o, 2), tkp_tab_i64(o, 3), tkp_tab_u64(o, 4); /* one too many */
    cr_assert_eq(tkp_tab_row_end(o), TKP_ERR_USAGE);
    tkp_tab_out_free(o);
    free(m.p);
}
