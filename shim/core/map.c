/* One hash, one map and one per-chunk table: see map.h. */
#include <stdlib.h>
#include <string.h>

#include "core/map.h"

#include "core/grow.h"

uint64_t tkp_hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++)
        h = (h ^ s[i]) * 1099511628211ull;
    return h ^ (h >> 29);
}

uint64_t tkp_hash_words(const uint64_t *w, uint32_t n)
{
    uint64_t h = 0x9E3779B97F4A7C15ull;
    for (uint32_t i = 0; i < n; i++)
        h = (h ^ w[i]) * 0xff51afd7ed558ccdull;
    return h ^ (h >> 29);
}

static uint32_t fold(uint64_t h)
{
    return (uint32_t)(h ^ (h >> 32));
}

int64_t tkp_map_find(const struct tkp_map *m, uint64_t hash, tkp_map_eq_fn eq, const void *ctx,
                     const void *key)
{
    if (!m->cap) return -1;
    uint32_t h = fold(hash);
    for (uint32_t i = h;; i++) {
        const struct tkp_map_slot *s = &m->slots[i & (m->cap - 1)];
        if (!s->id1) return -1;
        if (s->h == h && eq(ctx, s->id1 - 1, key)) return s->id1 - 1;
    }
}

static void put(struct tkp_map_slot *slots, uint32_t cap, struct tkp_map_slot v)
{
    for (uint32_t i = v.h;; i++)
        if (!slots[i & (cap - 1)].id1) {
            slots[i & (cap - 1)] = v;
            return;
        }
}

int tkp_map_add(struct tkp_map *m, uint64_t hash, uint32_t id)
{
    if ((m->n + 1) * 2 > m->cap) { /* at most half full: probes stay short */
        uint32_t nc = m->cap ? m->cap * 2 : 256;
        struct tkp_map_slot *ns = calloc(nc, sizeof *ns);
        if (!ns) return -1;
        for (uint32_t i = 0; i < m->cap; i++)
            if (m->slots[i].id1) put(ns, nc, m->slots[i]);
        free(m->slots);
        m->slots = ns;
        m->cap = nc;
    }
    put(m->slots, m->cap, (struct tkp_map_slot){id + 1, fold(hash)});
    m->n++;
    return 0;
}

void tkp_map_free(struct tkp_map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}

int tkp_gen_mark(struct tkp_gen *g, uint32_t i, uint32_t seq)
{
    if (tkp_grow((void **)&g->seq1, &g->cap, i, sizeof *g->seq1, 256)) return -1;
    if (g->seq1[i] == seq + 1) return 0;
    g->seq1[i] = seq + 1;
    return 1;
}

void tkp_gen_clear(struct tkp_gen *g)
{
    if (g->cap) memset(g->seq1, 0, g->cap * sizeof *g->seq1);
}
