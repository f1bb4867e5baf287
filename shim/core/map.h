/* One hash, one map and one per-chunk table (map.c), for the writer's tables (names, launch keys,
 * templates, threads, graphs) and the GPU tier's graph nodes. None is thread-safe: each has one
 * owner thread, or its owner's lock. */
#ifndef TKP_CORE_MAP_H
#define TKP_CORE_MAP_H

#include <stddef.h>
#include <stdint.h>

/* 64-bit hashes: of n bytes, of n 64-bit words, of one word. */
uint64_t tkp_hash_bytes(const void *p, size_t n);
uint64_t tkp_hash_words(const uint64_t *w, uint32_t n);
static inline uint64_t tkp_hash_u64(uint64_t k)
{
    k *= 0x9E3779B97F4A7C15ull;
    return k ^ (k >> 29);
}

/* An open-addressing index over dense ids (0, 1, 2, ... in the order they were added): the keys
 * live in the owner's own arrays, the map keeps each id's hash and asks the owner to compare. */
struct tkp_map_slot {
    uint32_t id1; /* id + 1, 0 empty */
    uint32_t h;   /* the key's hash, folded */
};
struct tkp_map {
    struct tkp_map_slot *slots;
    uint32_t cap, n;
};
/* 1 when the key of `id` is `key`. */
typedef int (*tkp_map_eq_fn)(const void *ctx, uint32_t id, const void *key);
/* The id of `key` (whose hash is `hash`), or -1 when absent. */
int64_t tkp_map_find(const struct tkp_map *m, uint64_t hash, tkp_map_eq_fn eq, const void *ctx,
                     const void *key);
/* Enters `id` (absent so far) under `hash`. 0, or -1 when memory ran out (the map is unchanged). */
int tkp_map_add(struct tkp_map *m, uint64_t hash, uint32_t id);
void tkp_map_free(struct tkp_map *m);

/* Which items (names, threads, graphs, templates) the current chunk has defined already: chunks
 * are self-contained, so each chunk defines what it uses once. */
struct tkp_gen {
    uint32_t *seq1; /* item -> chunk seq + 1 when defined in that chunk */
    uint32_t cap;
};
/* 1 when item `i` is not yet defined in chunk `seq` (and marks it defined), 0 when it is, -1
 * when memory ran out. */
int tkp_gen_mark(struct tkp_gen *g, uint32_t i, uint32_t seq);
/* 1 when item `i` is defined in chunk `seq`. */
static inline int tkp_gen_has(const struct tkp_gen *g, uint32_t i, uint32_t seq)
{
    return i < g->cap && g->seq1[i] == seq + 1;
}
/* Forgets every definition (a fork child starts its own chunks). */
void tkp_gen_clear(struct tkp_gen *g);

#endif
