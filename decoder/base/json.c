/* tokprof decoder: JSON writing helpers (see json.h). */
#include "base/json.h"

#include <inttypes.h>
#include <math.h>
#include <string.h>

#include "base/err.h"
#include "base/mp.h"

/* Length of the valid UTF-8 sequence at s (at most n bytes), or 0. */
static size_t utf8_len(const unsigned char *s, size_t n)
{
    unsigned c = s[0];
    size_t len;
    uint32_t cp;
    if (c < 0xc2 || c > 0xf4) return 0;
    len = c < 0xe0 ? 2 : c < 0xf0 ? 3 : 4;
    if (len > n) return 0;
    cp = c & (0x7f >> len);
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xc0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3f);
    }
    /* overlong forms, surrogates and values past U+10FFFF are not UTF-8 */
    if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) ||
        (cp >= 0xd800 && cp <= 0xdfff))
        return 0;
    return len;
}

void tkp_json_strn(FILE *f, const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    putc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        if (c == '"' || c == '\\') {
            putc('\\', f);
            putc(c, f);
        } else if (c == '\n') {
            fputs("\\n", f);
        } else if (c == '\t') {
            fputs("\\t", f);
        } else if (c < 0x20 || c == 0x7f) {
            fprintf(f, "\\u%04x", c);
        } else if (c >= 0x80) {
            size_t len = utf8_len(s + i, n - i);
            if (!len) {
                fputs("\\ufffd", f);
                i++;
                continue;
            }
            fwrite(s + i, 1, len, f);
            i += len;
            continue;
        } else {
            putc(c, f);
        }
        i++;
    }
    putc('"', f);
}

void tkp_json_str(FILE *f, const char *s)
{
    if (!s)
        fputs("null", f);
    else
        tkp_json_strn(f, s, strlen(s));
}

void tkp_json_hex(FILE *f, uint64_t v)
{
    fprintf(f, "\"0x%" PRIx64 "\"", v);
}

static int value(FILE *f, struct tkp_mp *c, int depth);

static int key(FILE *f, struct tkp_mp *c)
{
    const char *s;
    uint32_t n;
    uint64_t u;
    int64_t i;
    if (tkp_mp_str(c, &s, &n) == 0)
        tkp_json_strn(f, s, n);
    else if (tkp_mp_u64(c, &u) == 0)
        fprintf(f, "\"%" PRIu64 "\"", u);
    else if (tkp_mp_i64(c, &i) == 0)
        fprintf(f, "\"%" PRId64 "\"", i);
    else /* a composite key has no JSON spelling worth the trouble */
        return tkp_mp_skip(c) ? TKP_ERR_RECORD : (fputs("\"?\"", f), 0);
    return 0;
}

static int members(FILE *f, struct tkp_mp *c, uint32_t n, int depth, int first,
                   const char *const *skip)
{
    while (n--) {
        const char *s;
        uint32_t len;
        struct tkp_mp peek = *c;
        if (skip && tkp_mp_str(&peek, &s, &len) == 0) {
            int skipped = 0;
            for (const char *const *k = skip; *k; k++)
                if (strlen(*k) == len && !memcmp(*k, s, len)) skipped = 1;
            if (skipped) {
                *c = peek;
                if (tkp_mp_skip(c)) return TKP_ERR_RECORD;
                continue;
            }
        }
        if (!first) putc(',', f);
        first = 0;
        if (key(f, c)) return TKP_ERR_RECORD;
        putc(':', f);
        if (value(f, c, depth + 1)) return TKP_ERR_RECORD;
    }
    return 0;
}

static int value(FILE *f, struct tkp_mp *c, int depth)
{
    const char *s;
    const uint8_t *b;
    uint32_t n;
    uint64_t u;
    int64_t i;
    double d;
    int t;
    if (depth > TKP_MP_MAX_DEPTH) return TKP_ERR_RECORD;
    switch (tkp_mp_peek(c)) {
    case TKP_MP_NIL:
        c->p++;
        fputs("null", f);
        return 0;
    case TKP_MP_BOOL:
        tkp_mp_bool(c, &t);
        fputs(t ? "true" : "false", f);
        return 0;
    case TKP_MP_UINT:
        if (tkp_mp_u64(c, &u)) return TKP_ERR_RECORD;
        fprintf(f, "%" PRIu64, u);
        return 0;
    case TKP_MP_INT:
        if (tkp_mp_i64(c, &i)) return TKP_ERR_RECORD;
        fprintf(f, "%" PRId64, i);
        return 0;
    case TKP_MP_FLOAT:
        if (tkp_mp_f64(c, &d)) return TKP_ERR_RECORD;
        if (isfinite(d))
            fprintf(f, "%.17g", d);
        else
            fputs("null", f);
        return 0;
    case TKP_MP_STR:
        if (tkp_mp_str(c, &s, &n)) return TKP_ERR_RECORD;
        tkp_json_strn(f, s, n);
        return 0;
    case TKP_MP_BIN:
        if (tkp_mp_bin(c, &b, &n)) return TKP_ERR_RECORD;
        putc('"', f);
        for (uint32_t k = 0; k < n; k++)
            fprintf(f, "%02x", b[k]);
        putc('"', f);
        return 0;
    case TKP_MP_EXT:
        if (tkp_mp_skip(c)) return TKP_ERR_RECORD;
        fputs("null", f);
        return 0;
    case TKP_MP_ARRAY:
        if (tkp_mp_array(c, &n)) return TKP_ERR_RECORD;
        putc('[', f);
        for (uint32_t k = 0; k < n; k++) {
            if (k) putc(',', f);
            if (value(f, c, depth + 1)) return TKP_ERR_RECORD;
        }
        putc(']', f);
        return 0;
    case TKP_MP_MAP:
        if (tkp_mp_map(c, &n)) return TKP_ERR_RECORD;
        putc('{', f);
        if (members(f, c, n, depth, 1, NULL)) return TKP_ERR_RECORD;
        putc('}', f);
        return 0;
    case TKP_MP_INVALID:
        break;
    }
    return TKP_ERR_RECORD;
}

int tkp_json_msgpack(FILE *f, const uint8_t *p, size_t n)
{
    struct tkp_mp c;
    tkp_mp_init(&c, p, n);
    return value(f, &c, 0);
}

int tkp_json_msgpack_members(FILE *f, const uint8_t *p, size_t n, const char *const *skip)
{
    struct tkp_mp c;
    uint32_t count;
    tkp_mp_init(&c, p, n);
    if (tkp_mp_map(&c, &count)) return TKP_ERR_RECORD;
    /* first=0: the caller has already written at least "type" */
    return members(f, &c, count, 0, 0, skip);
}
