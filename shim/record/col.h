/* tokprof shim: a column of LEB128 varints being filled on the writer thread (docs/FORMAT.md
 * "Runs", "Columns"): the writer's RUN columns (writer.c) and the COLS columns of GPU records
 * (gpu/gpuenc.c). */
#ifndef TKP_RECORD_COL_H
#define TKP_RECORD_COL_H

#include <stdint.h>
#include <msgpack.h>
#include <stdlib.h>

#include "core/grow.h"

struct tkp_col {
    uint8_t *p;
    uint32_t n, cap;
};
/* Room for one more varint (10 bytes); -1 when memory ran out (the column is as it was). */
static inline int tkp_col_room(struct tkp_col *c)
{
    if (c->cap - c->n >= 10) return 0;
    return tkp_grow((void **)&c->p, &c->cap, c->n + 9, 1, 4096); /* bytes n .. n+9 */
}
/* Room for `bytes` more bytes; -1 when memory ran out (the column is as it was). */
static inline int tkp_col_reserve(struct tkp_col *c, uint32_t bytes)
{
    if (c->cap - c->n >= bytes) return 0;
    return tkp_grow((void **)&c->p, &c->cap, c->n + bytes - 1, 1, 4096);
}
/* The same for each of n columns; -1 when memory ran out for one. */
static inline int tkp_cols_room(struct tkp_col *c, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++)
        if (tkp_col_room(&c[k])) return -1;
    return 0;
}
/* n columns as msgpack bins, each emptied for the next record. */
static inline void tkp_cols_pack(msgpack_packer *pk, struct tkp_col *c, uint32_t n)
{
    for (uint32_t k = 0; k < n; k++) {
        msgpack_pack_bin(pk, c[k].n);
        msgpack_pack_bin_body(pk, c[k].p, c[k].n);
        c[k].n = 0;
    }
}
/* One varint (room made before). Through a local pointer: a byte store may alias c->n, which the
 * compiler would otherwise load and store again for every byte. */
static inline void tkp_col_put(struct tkp_col *c, uint64_t v)
{
    uint8_t *p = c->p + c->n, *q = p;
    while (v >= 0x80) {
        *q++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *q++ = (uint8_t)v;
    c->n += (uint32_t)(q - p);
}
/* One varint at w, without a loop for up to three bytes (a GPU record's start gaps and durations
 * mostly take two or three); returns its end. For a caller that keeps its own write pointers
 * (gpu/gpuenc.c's GPU_RUN columns); room made before. */
static inline uint8_t *tkp_varint_at(uint8_t *w, uint64_t v)
{
    if (v < 0x4000) {
        if (v < 0x80) {
            w[0] = (uint8_t)v;
            return w + 1;
        }
        w[0] = (uint8_t)(v | 0x80);
        w[1] = (uint8_t)(v >> 7);
        return w + 2;
    }
    if (v < 0x200000) {
        w[0] = (uint8_t)(v | 0x80);
        w[1] = (uint8_t)(v >> 7 | 0x80);
        w[2] = (uint8_t)(v >> 14);
        return w + 3;
    }
    while (v >= 0x80) {
        *w++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *w++ = (uint8_t)v;
    return w;
}
static inline uint64_t tkp_zigzag(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}


#endif
