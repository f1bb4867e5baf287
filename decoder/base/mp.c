/* tokprof decoder: bounded msgpack cursor (see mp.h for why it is not msgpack-c's unpacker). */
#include "base/mp.h"

#include "base/err.h"

static uint64_t be(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = 0; i < n; i++)
        v = v << 8 | p[i];
    return v;
}

/* Reads n big-endian bytes after the type byte. */
static int take(struct tkp_mp *c, int n, uint64_t *v)
{
    if (tkp_mp_left(c) < (size_t)n + 1) return TKP_ERR_RECORD;
    *v = be(c->p + 1, n);
    c->p += n + 1;
    return 0;
}

enum tkp_mp_type tkp_mp_peek(const struct tkp_mp *c)
{
    if (c->p >= c->end) return TKP_MP_INVALID;
    uint8_t b = *c->p;
    if (b <= 0x7f) return TKP_MP_UINT;
    if (b <= 0x8f) return TKP_MP_MAP;
    if (b <= 0x9f) return TKP_MP_ARRAY;
    if (b <= 0xbf) return TKP_MP_STR;
    if (b >= 0xe0) return TKP_MP_INT;
    switch (b) {
    case 0xc0:
        return TKP_MP_NIL;
    case 0xc2:
    case 0xc3:
        return TKP_MP_BOOL;
    case 0xc4:
    case 0xc5:
    case 0xc6:
        return TKP_MP_BIN;
    case 0xc7:
    case 0xc8:
    case 0xc9:
        return TKP_MP_EXT;
    case 0xca:
    case 0xcb:
        return TKP_MP_FLOAT;
    case 0xcc:
    case 0xcd:
    case 0xce:
    case 0xcf:
        return TKP_MP_UINT;
    case 0xd0:
    case 0xd1:
    case 0xd2:
    case 0xd3: {
        /* a signed encoding of a non-negative value is still an unsigned integer to us */
        int n = 1 << (b - 0xd0);
        if (tkp_mp_left(c) < (size_t)n + 1) return TKP_MP_INVALID;
        return (c->p[1] & 0x80) ? TKP_MP_INT : TKP_MP_UINT;
    }
    case 0xd4:
    case 0xd5:
    case 0xd6:
    case 0xd7:
    case 0xd8:
        return TKP_MP_EXT;
    case 0xd9:
    case 0xda:
    case 0xdb:
        return TKP_MP_STR;
    case 0xdc:
    case 0xdd:
        return TKP_MP_ARRAY;
    case 0xde:
    case 0xdf:
        return TKP_MP_MAP;
    }
    return TKP_MP_INVALID; /* 0xc1, never used */
}

const char *tkp_mp_type_name(enum tkp_mp_type t)
{
    static const char *const names[] = {
        "nil", "bool",  "unsigned int", "negative int", "float",          "str",
        "bin", "array", "map",          "ext",          "nothing/invalid"};
    return t <= TKP_MP_INVALID ? names[t] : "?";
}

/* A container may not declare more elements than bytes remain: each needs at least one. This
 * is what keeps hostile counts from costing time or memory anywhere downstream. */
static int check_count(const struct tkp_mp *c, uint64_t n, int per)
{
    return n * per > tkp_mp_left(c) ? TKP_ERR_RECORD : 0;
}

int tkp_mp_array(struct tkp_mp *c, uint32_t *n)
{
    uint64_t v;
    const uint8_t *save = c->p;
    if (c->p >= c->end) return TKP_ERR_RECORD;
    uint8_t b = *c->p;
    if (b >= 0x90 && b <= 0x9f) {
        v = b & 0x0f;
        c->p++;
    } else if (b == 0xdc || b == 0xdd) {
        if (take(c, b == 0xdc ? 2 : 4, &v))
            return TKP_ERR_RECORD; /* take() moves nothing when it fails */
    } else {
        return TKP_ERR_RECORD;
    }
    *n = (uint32_t)v;
    if (check_count(c, v, 1)) {
        c->p = save; /* so that the caller can say what it found */
        return TKP_ERR_RECORD;
    }
    return 0;
}

int tkp_mp_map(struct tkp_mp *c, uint32_t *n)
{
    uint64_t v;
    const uint8_t *save = c->p;
    if (c->p >= c->end) return TKP_ERR_RECORD;
    uint8_t b = *c->p;
    if (b >= 0x80 && b <= 0x8f) {
        v = b & 0x0f;
        c->p++;
    } else if (b == 0xde || b == 0xdf) {
        if (take(c, b == 0xde ? 2 : 4, &v)) return TKP_ERR_RECORD;
    } else {
        return TKP_ERR_RECORD;
    }
    *n = (uint32_t)v;
    if (check_count(c, v, 2)) {
        c->p = save;
        return TKP_ERR_RECORD;
    }
    return 0;
}

/* Any integer: *neg tells whether *v is a negative value in two's complement. */
static int integer(struct tkp_mp *c, uint64_t *v, int *neg)
{
    if (c->p >= c->end) return TKP_ERR_RECORD;
    uint8_t b = *c->p;
    *neg = 0;
    if (b <= 0x7f) {
        *v = b;
        c->p++;
        return 0;
    }
    if (b >= 0xe0) {
        *v = (uint64_t)(int64_t)(int8_t)b;
        *neg = 1;
        c->p++;
        return 0;
    }
    if (b >= 0xcc && b <= 0xcf) return take(c, 1 << (b - 0xcc), v);
    if (b >= 0xd0 && b <= 0xd3) {
        int n = 1 << (b - 0xd0);
        uint64_t u;
        if (take(c, n, &u)) return TKP_ERR_RECORD;
        if (n < 8 && (u >> (n * 8 - 1)) & 1) u |= ~0ull << (n * 8); /* sign-extend */
        *v = u;
        *neg = (int64_t)u < 0;
        return 0;
    }
    return TKP_ERR_RECORD;
}

int tkp_mp_u64(struct tkp_mp *c, uint64_t *v)
{
    int neg;
    const uint8_t *save = c->p;
    if (integer(c, v, &neg) || neg) {
        c->p = save;
        return TKP_ERR_RECORD;
    }
    return 0;
}

int tkp_mp_i64(struct tkp_mp *c, int64_t *v)
{
    int neg;
    uint64_t u;
    const uint8_t *save = c->p;
    if (integer(c, &u, &neg) || (!neg && u > INT64_MAX)) {
        c->p = save;
        return TKP_ERR_RECORD;
    }
    *v = (int64_t)u;
    return 0;
}

int tkp_mp_f64(struct tkp_mp *c, double *v)
{
    uint64_t u;
    if (c->p >= c->end) return TKP_ERR_RECORD;
    if (*c->p == 0xca) {
        if (take(c, 4, &u)) return TKP_ERR_RECORD;
        union {
            uint32_t i;
            float f;
        } x = {.i = (uint32_t)u};
        *v = x.f;
        return 0;
    }
    if (*c->p == 0xcb) {
        if (take(c, 8, &u)) return TKP_ERR_RECORD;
        union {
            uint64_t i;
            double d;
        } x = {.i = u};
        *v = x.d;
        return 0;
    }
    return TKP_ERR_RECORD;
}

int tkp_mp_bool(struct tkp_mp *c, int *v)
{
    if (c->p >= c->end || (*c->p != 0xc2 && *c->p != 0xc3)) return TKP_ERR_RECORD;
    *v = *c->p++ == 0xc3;
    return 0;
}

/* Length-prefixed bytes: fix (mask) or 8/16/32-bit lengths at codes first..first+2. */
static int bytes(struct tkp_mp *c, int fixlo, int fixhi, int first, const uint8_t **s,
                 uint32_t *len)
{
    uint64_t n;
    if (c->p >= c->end) return TKP_ERR_RECORD;
    uint8_t b = *c->p;
    const uint8_t *save = c->p;
    if (fixlo >= 0 && b >= fixlo && b <= fixhi) {
        n = b & 0x1f;
        c->p++;
    } else if (b >= first && b <= first + 2) {
        if (take(c, 1 << (b - first), &n)) return TKP_ERR_RECORD;
    } else {
        return TKP_ERR_RECORD;
    }
    if (n > tkp_mp_left(c)) {
        c->p = save;
        return TKP_ERR_RECORD;
    }
    *s = c->p;
    *len = (uint32_t)n;
    c->p += n;
    return 0;
}

int tkp_mp_str(struct tkp_mp *c, const char **s, uint32_t *len)
{
    return bytes(c, 0xa0, 0xbf, 0xd9, (const uint8_t **)s, len);
}

int tkp_mp_bin(struct tkp_mp *c, const uint8_t **s, uint32_t *len)
{
    return bytes(c, -1, -1, 0xc4, s, len);
}

static int skip(struct tkp_mp *c, int depth)
{
    uint32_t n, len;
    uint64_t v;
    const uint8_t *s;
    int neg;
    if (depth > TKP_MP_MAX_DEPTH || c->p >= c->end) return TKP_ERR_RECORD;
    uint8_t b = *c->p;
    switch (tkp_mp_peek(c)) {
    case TKP_MP_NIL:
    case TKP_MP_BOOL:
        c->p++;
        return 0;
    case TKP_MP_UINT:
    case TKP_MP_INT:
        return integer(c, &v, &neg);
    case TKP_MP_FLOAT:
        return take(c, b == 0xca ? 4 : 8, &v);
    case TKP_MP_STR:
        return tkp_mp_str(c, (const char **)&s, &len);
    case TKP_MP_BIN:
        return tkp_mp_bin(c, &s, &len);
    case TKP_MP_EXT:
        if (b >= 0xd4 && b <= 0xd8)
            n = 1u << (b - 0xd4);
        else if (take(c, 1 << (b - 0xc7), &v) == 0)
            n = (uint32_t)v, c->p--; /* leave the cursor on a pseudo type byte */
        else
            return TKP_ERR_RECORD;
        /* fixext: code + 1 type byte + n; ext8/16/32: already past the length */
        if (tkp_mp_left(c) < (size_t)n + 2) return TKP_ERR_RECORD;
        c->p += n + 2;
        return 0;
    case TKP_MP_ARRAY:
        if (tkp_mp_array(c, &n)) return TKP_ERR_RECORD;
        while (n--)
            if (skip(c, depth + 1)) return TKP_ERR_RECORD;
        return 0;
    case TKP_MP_MAP:
        if (tkp_mp_map(c, &n)) return TKP_ERR_RECORD;
        while (n--)
            if (skip(c, depth + 1) || skip(c, depth + 1)) return TKP_ERR_RECORD;
        return 0;
    case TKP_MP_INVALID:
        break;
    }
    return TKP_ERR_RECORD;
}

int tkp_mp_skip(struct tkp_mp *c)
{
    return skip(c, 0);
}
