/* tokprof decoder: the one open-addressing map of the decoder (map.c), shaped like the shim's
 * (shim/core/map.h): an index over ids (0, 1, 2, ... in the order they were added, or ids the
 * owner reuses after tkp_map_del) whose keys live in the owner's own arrays, so no output depends
 * on where a key lands; and on top of it a map of 64-bit keys to 64-bit values. Linear probing,
 * removal by backward shift (no tombstones). Hashes: base/hash.h. No probe loop, hash constant or
 * realloc outside base/ (tests/arch check_hashes.py). */
#ifndef TKP_MAP_H
#define TKP_MAP_H

#include <stddef.h>
#include <stdint.h>

#include "base/hash.h"

struct tkp_map_slot {
    uint32_t id1; /* id + 1, 0 empty */
    uint32_t h;   /* the key's hash, folded */
};
struct tkp_map {
    struct tkp_map_slot *slots;
    size_t cap, n;
};
/* 1 when the key of `id` is `key`. */
typedef int (*tkp_map_eq_fn)(const void *ctx, uint32_t id, const void *key);

static inline uint32_t tkp_map_fold(uint64_t h)
{
    return (uint32_t)(h ^ (h >> 32));
}

/* The slot of `key` (whose hash is `hash`): the one that holds its id, or the empty one where it
 * would go (tkp_map_put). m must have room (tkp_map_reserve). */
static inline struct tkp_map_slot *tkp_map_probe(const struct tkp_map *m, uint64_t hash,
                                                 tkp_map_eq_fn eq, const void *ctx, const void *key)
{
    uint32_t h = tkp_map_fold(hash);
    for (size_t i = h;; i++) {
        struct tkp_map_slot *s = &m->slots[i & (m->cap - 1)];
        if (!s->id1 || (s->h == h && eq(ctx, s->id1 - 1, key))) return s;
    }
}
/* The id of `key`, or -1 when absent. */
static inline int64_t tkp_map_find(const struct tkp_map *m, uint64_t hash, tkp_map_eq_fn eq,
                                   const void *ctx, const void *key)
{
    if (!m->cap) return -1;
    const struct tkp_map_slot *s = tkp_map_probe(m, hash, eq, ctx, key);
    return s->id1 ? (int64_t)s->id1 - 1 : -1;
}
/* Room for n ids, the map kept at most half full. 0 or TKP_ERR_NOMEM (the map unchanged). */
int tkp_map_reserve(struct tkp_map *m, size_t n);
/* Enters `id` in the empty slot s that tkp_map_probe gave for a key of hash `hash`. */
static inline void tkp_map_put(struct tkp_map *m, struct tkp_map_slot *s, uint64_t hash,
                               uint32_t id)
{
    s->id1 = id + 1;
    s->h = tkp_map_fold(hash);
    m->n++;
}
/* Enters `id` (its key absent so far) under `hash`. 0 or TKP_ERR_NOMEM (the map unchanged). */
int tkp_map_add(struct tkp_map *m, uint64_t hash, uint32_t id);
/* Removes the id in slot s (one tkp_map_probe gave, holding an id): the entries after it in its
 * cluster that probed past it move back (backward-shift deletion), so every other key is still
 * found and no slot is left as a tombstone. The id is the owner's to reuse. Slot pointers held
 * across it are stale. */
void tkp_map_del(struct tkp_map *m, struct tkp_map_slot *s);
void tkp_map_free(struct tkp_map *m);

/* 64-bit keys to 64-bit values, added in order (key[i], val[i], i < n). */
struct tkp_map64 {
    struct tkp_map ix;
    uint64_t *key, *val;
    size_t n, cap;
};
/* The value of `key`: NULL when absent, unless add, which enters it with value 0 (NULL then
 * means out of memory). The pointer is valid until the next add. */
uint64_t *tkp_map64_at(struct tkp_map64 *m, uint64_t key, int add);
/* The value of `key`, NULL when absent (a lookup only). */
const uint64_t *tkp_map64_get(const struct tkp_map64 *m, uint64_t key);
void tkp_map64_free(struct tkp_map64 *m);

#endif
