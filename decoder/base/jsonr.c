/* tokprof decoder: the streaming JSON reader (see jsonr.h). */
#include "base/jsonr.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"

#define BLOCK 65536

enum { ST_VALUE, ST_VALUE_OR_CLOSE, ST_KEY, ST_KEY_OR_CLOSE, ST_SEP, ST_DONE };
enum { IN_OBJ = 1, IN_ARR = 2 };

int tkp_jsonr_init(struct tkp_jsonr *j, tkp_jsonr_read_fn *rd, void *ctx)
{
    memset(j, 0, sizeof(*j));
    j->rd = rd, j->ctx = ctx;
    j->buf = malloc(BLOCK);
    j->str = malloc(TKP_JSONR_STR_MAX + 1);
    if (!j->buf || !j->str) {
        tkp_jsonr_free(j);
        return TKP_ERR_NOMEM;
    }
    j->str[0] = 0;
    return 0;
}

void tkp_jsonr_free(struct tkp_jsonr *j)
{
    free(j->buf);
    free(j->str);
    j->buf = NULL, j->str = NULL;
}

static int fail(struct tkp_jsonr *j, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int fail(struct tkp_jsonr *j, uint64_t off, const char *fmt, ...)
{
    if (j->err) return TKP_J_ERR;
    int n = snprintf(j->why, sizeof(j->why), "byte %llu: ", (unsigned long long)off);
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(j->why + n, sizeof(j->why) - (size_t)n, fmt, ap);
    va_end(ap);
    j->err = 1;
    return TKP_J_ERR;
}

static uint64_t here(const struct tkp_jsonr *j)
{
    return j->off + j->pos;
}

/* The next byte without taking it; -1 at the end, -2 on a read error. */
static int peek(struct tkp_jsonr *j)
{
    if (j->pos < j->len) return j->buf[j->pos];
    if (j->eof) return -1;
    j->off += j->len;
    j->pos = j->len = 0;
    long n = j->rd(j->ctx, j->buf, BLOCK);
    if (n < 0) return -2;
    if (n == 0) {
        j->eof = 1;
        return -1;
    }
    j->len = (size_t)n;
    return j->buf[0];
}

static int take(struct tkp_jsonr *j)
{
    int c = peek(j);
    if (c >= 0) j->pos++;
    return c;
}

static int ws(struct tkp_jsonr *j)
{
    for (;;) {
        int c = peek(j);
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r') return c;
        j->pos++;
    }
}

static int cut(struct tkp_jsonr *j, int c, const char *what)
{
    if (c == -2) return fail(j, here(j), "read error");
    return fail(j, here(j), "unexpected end of input, expected %s", what);
}

static void put(struct tkp_jsonr *j, uint32_t b)
{
    if (j->slen < TKP_JSONR_STR_MAX)
        j->str[j->slen++] = (char)b;
    else
        j->truncated = 1;
}

static void put_utf8(struct tkp_jsonr *j, uint32_t cp)
{
    if (cp < 0x80) {
        put(j, cp);
    } else if (cp < 0x800) {
        put(j, 0xc0 | (cp >> 6)), put(j, 0x80 | (cp & 0x3f));
    } else if (cp < 0x10000) {
        put(j, 0xe0 | (cp >> 12)), put(j, 0x80 | ((cp >> 6) & 0x3f)), put(j, 0x80 | (cp & 0x3f));
    } else {
        put(j, 0xf0 | (cp >> 18)), put(j, 0x80 | ((cp >> 12) & 0x3f));
        put(j, 0x80 | ((cp >> 6) & 0x3f)), put(j, 0x80 | (cp & 0x3f));
    }
}

static int hex4(struct tkp_jsonr *j, uint32_t *v)
{
    *v = 0;
    for (int i = 0; i < 4; i++) {
        int c = take(j);
        if (c < 0) return cut(j, c, "4 hex digits after \\u");
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;
        if (d < 0) return fail(j, here(j) - 1, "expected a hex digit in a \\u escape");
        *v = *v << 4 | (uint32_t)d;
    }
    return 0;
}

/* A string after its opening quote, into str. */
static int string(struct tkp_jsonr *j)
{
    j->slen = 0, j->truncated = 0;
    for (;;) {
        /* the common case: a run of plain bytes inside the block */
        size_t p = j->pos;
        while (p < j->len && j->buf[p] != '"' && j->buf[p] != '\\' && j->buf[p] >= 0x20)
            p++;
        size_t n = p - j->pos, room = TKP_JSONR_STR_MAX - j->slen;
        if (n > room) j->truncated = 1;
        memcpy(j->str + j->slen, j->buf + j->pos, n < room ? n : room);
        j->slen += n < room ? n : room;
        j->pos = p;
        if (p == j->len) { /* the block ended inside the string */
            int c = peek(j);
            if (c < 0) return cut(j, c, "'\"' to end the string");
            continue;
        }
        int c = j->buf[j->pos++];
        if (c == '"') break;
        if (c < 0x20) return fail(j, here(j) - 1, "control character %#x in a string", c);
        c = take(j); /* after a backslash */
        if (c < 0) return cut(j, c, "an escape");
        uint32_t cp;
        switch (c) {
        case '"':
        case '\\':
        case '/':
            put(j, (uint32_t)c);
            break;
        case 'b':
            put(j, '\b');
            break;
        case 'f':
            put(j, '\f');
            break;
        case 'n':
            put(j, '\n');
            break;
        case 'r':
            put(j, '\r');
            break;
        case 't':
            put(j, '\t');
            break;
        case 'u':
            if (hex4(j, &cp)) return TKP_J_ERR;
            if (cp >= 0xd800 && cp < 0xdc00) { /* a surrogate pair: the low half must follow */
                uint32_t lo;
                if (take(j) != '\\' || take(j) != 'u')
                    return fail(j, here(j), "expected the low half of a \\u surrogate pair");
                if (hex4(j, &lo)) return TKP_J_ERR;
                if (lo < 0xdc00 || lo > 0xdfff)
                    return fail(j, here(j), "expected the low half of a \\u surrogate pair");
                cp = 0x10000 + ((cp - 0xd800) << 10) + (lo - 0xdc00);
            } else if (cp >= 0xdc00 && cp < 0xe000) {
                return fail(j, here(j), "a lone low surrogate in a \\u escape");
            }
            put_utf8(j, cp);
            break;
        default:
            if (c <= 0x20 || c >= 0x7f) return fail(j, here(j) - 1, "unknown escape (byte %#x)", c);
            return fail(j, here(j) - 1, "unknown escape '\\%c'", c);
        }
    }
    j->str[j->slen] = 0;
    return 0;
}

static int is_digit(int c)
{
    return c >= '0' && c <= '9';
}

/* A number starting at its first character (not yet taken), its text into str. */
static int number(struct tkp_jsonr *j)
{
    uint64_t at = here(j);
    j->slen = 0, j->truncated = 0;
    for (;;) {
        int c = peek(j);
        if (c == -2) return cut(j, c, "");
        if (!(is_digit(c) || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E')) break;
        if (j->slen >= 400) return fail(j, at, "a number longer than 400 characters");
        j->str[j->slen++] = (char)c;
        j->pos++;
    }
    j->str[j->slen] = 0;
    /* the grammar (RFC 8259 section 6) */
    const char *s = j->str, *e = s + j->slen;
    if (s < e && *s == '-') s++;
    if (s == e || !is_digit(*s)) goto bad;
    if (*s == '0')
        s++;
    else
        while (s < e && is_digit(*s))
            s++;
    if (s < e && *s == '.') {
        s++;
        if (s == e || !is_digit(*s)) goto bad;
        while (s < e && is_digit(*s))
            s++;
    }
    if (s < e && (*s == 'e' || *s == 'E')) {
        s++;
        if (s < e && (*s == '+' || *s == '-')) s++;
        if (s == e || !is_digit(*s)) goto bad;
        while (s < e && is_digit(*s))
            s++;
    }
    if (s != e) goto bad;
    return 0;
bad:
    return fail(j, at, "malformed number '%.40s'", j->str);
}

static int literal(struct tkp_jsonr *j, const char *w, int tok)
{
    uint64_t at = here(j);
    for (const char *p = w; *p; p++) {
        int c = take(j);
        if (c < 0) return cut(j, c, w);
        if (c != *p) return fail(j, at, "expected a value (a bad literal, not '%s')", w);
    }
    return tok;
}

static void after_value(struct tkp_jsonr *j)
{
    j->state = j->depth ? ST_SEP : ST_DONE;
}

static int value(struct tkp_jsonr *j, int c)
{
    j->tok_off = here(j);
    switch (c) {
    case '{':
    case '[':
        if (j->depth == TKP_JSONR_DEPTH_MAX)
            return fail(j, here(j), "nesting deeper than %d", TKP_JSONR_DEPTH_MAX);
        j->pos++;
        j->stack[j->depth++] = c == '{' ? IN_OBJ : IN_ARR;
        j->state = c == '{' ? ST_KEY_OR_CLOSE : ST_VALUE_OR_CLOSE;
        return c == '{' ? TKP_J_OBJ : TKP_J_ARR;
    case '"':
        j->pos++;
        if (string(j)) return TKP_J_ERR;
        after_value(j);
        return TKP_J_STR;
    case 't':
    case 'f':
    case 'n': {
        int t = literal(j,
                        c == 't'   ? "true"
                        : c == 'f' ? "false"
                                   : "null",
                        c == 't'   ? TKP_J_TRUE
                        : c == 'f' ? TKP_J_FALSE
                                   : TKP_J_NULL);
        if (t > 0) after_value(j);
        return t;
    }
    default:
        if (c == '-' || is_digit(c)) {
            if (number(j)) return TKP_J_ERR;
            after_value(j);
            return TKP_J_NUM;
        }
        if (c > 0x20 && c < 0x7f) return fail(j, here(j), "expected a value, got '%c'", c);
        return fail(j, here(j), "expected a value, got byte %#x", c);
    }
}

static int close_(struct tkp_jsonr *j, int c)
{
    j->tok_off = here(j);
    j->pos++;
    j->depth--;
    after_value(j);
    return c == '}' ? TKP_J_OBJ_END : TKP_J_ARR_END;
}

int tkp_jsonr_next(struct tkp_jsonr *j)
{
    if (j->err) return TKP_J_ERR;
    int c = ws(j);
    switch (j->state) {
    case ST_DONE:
        if (c == -1) return TKP_J_END;
        if (c == -2) return cut(j, c, "");
        return fail(j, here(j), "expected the end of the input after the top-level value");
    case ST_VALUE_OR_CLOSE:
        if (c == ']') return close_(j, c);
        /* fall through */
    case ST_VALUE:
        if (c < 0) return cut(j, c, "a value");
        return value(j, c);
    case ST_KEY_OR_CLOSE:
        if (c == '}') return close_(j, c);
        /* fall through */
    case ST_KEY:
        if (c < 0) return cut(j, c, "'\"' to begin an object member's name");
        if (c != '"') return fail(j, here(j), "expected '\"' to begin an object member's name");
        j->tok_off = here(j);
        j->pos++;
        if (string(j)) return TKP_J_ERR;
        c = ws(j);
        if (c < 0) return cut(j, c, "':' after an object member's name");
        if (c != ':') return fail(j, here(j), "expected ':' after an object member's name");
        j->pos++;
        j->state = ST_VALUE;
        return TKP_J_KEY;
    default: { /* ST_SEP */
        int obj = j->stack[j->depth - 1] == IN_OBJ;
        if (c < 0) return cut(j, c, obj ? "',' or '}' in an object" : "',' or ']' in an array");
        if (c == ',') {
            j->pos++;
            j->state = obj ? ST_KEY : ST_VALUE;
            return tkp_jsonr_next(j);
        }
        if (c == (obj ? '}' : ']')) return close_(j, c);
        return fail(j, here(j),
                    obj ? "expected ',' or '}' in an object" : "expected ',' or ']' in an array");
    }
    }
}

int tkp_jsonr_skip(struct tkp_jsonr *j)
{
    int depth = j->depth;
    do {
        int t = tkp_jsonr_next(j);
        if (t <= 0) return t == 0 ? fail(j, here(j), "unexpected end of input") : TKP_J_ERR;
    } while (j->depth > depth);
    return 0;
}

int tkp_json_fixed(const char *s, size_t n, int scale, int64_t *out)
{
    const char *e = s + n;
    int neg = 0;
    if (s < e && *s == '-') neg = 1, s++;
    /* digits of the mantissa, and where the decimal point is */
    char dig[64];
    int nd = 0, point = -1, lead = 1;
    long exp10 = 0;
    if (s == e || !is_digit(*s)) return -1;
    for (; s < e; s++) {
        if (is_digit(*s)) {
            if (lead && *s == '0' && point < 0) continue; /* leading zeros of the integer part */
            lead = 0;
            if (nd < (int)sizeof(dig))
                dig[nd++] = *s;
            else if (point < 0)
                return -1; /* too large */
        } else if (*s == '.' && point < 0) {
            point = nd;
            lead = 0;
        } else {
            break;
        }
    }
    if (point < 0) point = nd;
    if (s < e && (*s == 'e' || *s == 'E')) {
        s++;
        int eneg = 0;
        if (s < e && (*s == '+' || *s == '-')) eneg = *s == '-', s++;
        if (s == e) return -1;
        for (; s < e && is_digit(*s); s++)
            if ((exp10 = exp10 * 10 + (*s - '0')) > 1000) return -1;
        if (eneg) exp10 = -exp10;
    }
    if (s != e) return -1;
    /* the integer part is dig[0 .. point + exp10 + scale) */
    long ip = point + exp10 + scale;
    uint64_t v = 0;
    for (long i = 0; i < ip; i++) {
        int d = i < nd ? dig[i] - '0' : 0;
        if (v > (UINT64_MAX - (uint64_t)d) / 10) return -1;
        v = v * 10 + (uint64_t)d;
    }
    if (ip >= 0 && ip < nd && dig[ip] >= '5') v++; /* round half away from zero */
    if (v > (uint64_t)INT64_MAX) return -1;
    *out = neg ? -(int64_t)v : (int64_t)v;
    return 0;
}
