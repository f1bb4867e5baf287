/* tokprof decoder: a bounded msgpack cursor over a byte range.
 *
 * Why not msgpack-c's unpacker: msgpack_unpack_next() allocates every container at its declared
 * size before reading its elements, so a 5-byte array32 header in a hostile capture asks for
 * 100 GB. This cursor reads in place, allocates nothing, refuses containers that declare more
 * elements than bytes remain, and caps nesting. It covers the whole msgpack spec (skip() accepts
 * every type), and the typed getters accept exactly the encodings a writer may legally choose
 * (any int width for an integer, str8/16/32 for a string).
 *
 * Every function returns 0 or TKP_ERR_RECORD; on error the cursor position is unspecified. */
#ifndef TKP_MP_H
#define TKP_MP_H

#include <stddef.h>
#include <stdint.h>

#define TKP_MP_MAX_DEPTH 32 /* nesting deeper than this is refused (META config maps are shallow)  \
                             */

struct tkp_mp {
    const uint8_t *p;
    const uint8_t *end;
};

enum tkp_mp_type {
    TKP_MP_NIL,
    TKP_MP_BOOL,
    TKP_MP_UINT,
    TKP_MP_INT,
    TKP_MP_FLOAT,
    TKP_MP_STR,
    TKP_MP_BIN,
    TKP_MP_ARRAY,
    TKP_MP_MAP,
    TKP_MP_EXT,
    TKP_MP_INVALID,
};

static inline void tkp_mp_init(struct tkp_mp *c, const void *p, size_t n)
{
    c->p = p;
    c->end = c->p + n;
}
static inline size_t tkp_mp_left(const struct tkp_mp *c)
{
    return (size_t)(c->end - c->p);
}

/* The type of the next object without consuming it; TKP_MP_INVALID at the end or on 0xc1.
 * TKP_MP_INT is a negative integer; non-negative ones encoded as int8..64 are TKP_MP_UINT. */
enum tkp_mp_type tkp_mp_peek(const struct tkp_mp *c);
const char *tkp_mp_type_name(enum tkp_mp_type t);

/* Container headers: *n elements (pairs for a map) follow. */
int tkp_mp_array(struct tkp_mp *c, uint32_t *n);
int tkp_mp_map(struct tkp_mp *c, uint32_t *n);
/* Integers: u64 accepts any non-negative integer, i64 any integer in int64 range. */
int tkp_mp_u64(struct tkp_mp *c, uint64_t *v);
int tkp_mp_i64(struct tkp_mp *c, int64_t *v);
int tkp_mp_f64(struct tkp_mp *c, double *v); /* float32/64 only */
int tkp_mp_bool(struct tkp_mp *c, int *v);
/* str (or bin with tkp_mp_bin): *s points into the buffer, not NUL-terminated. */
int tkp_mp_str(struct tkp_mp *c, const char **s, uint32_t *len);
int tkp_mp_bin(struct tkp_mp *c, const uint8_t **s, uint32_t *len);
/* Skips one whole object of any type, nesting at most TKP_MP_MAX_DEPTH. */
int tkp_mp_skip(struct tkp_mp *c);

#endif
