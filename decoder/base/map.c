/* tokprof decoder: the open-addressing map (map.h). */
#include "base/map.h"

#include <stdlib.h>

#include "base/err.h"
#include "base/grow.h"

static void put(struct tkp_map_slot *slots, size_t cap, struct tkp_map_slot v)
{
    for (size_t i = v.h;; i++)
        if (!slots[i & (cap - 1)].id1) {
            slots[i & (cap - 1)] = v;
            return;
        }
}

int tkp_map_reserve(struct tkp_map *m, size_t n)
{
    if (n * 2 <= m->cap) return 0; /* at most half full: probes stay short */
    size_t nc = m->cap ? m->cap * 2 : 256;
    while (nc < n * 2)
        nc *= 2;
    struct tkp_map_slot *ns = calloc(nc, sizeof(*ns));
    if (!ns) return TKP_ERR_NOMEM;
    for (size_t i = 0; i < m->cap; i++)
        if (m->slots[i].id1) put(ns, nc, m->slots[i]);
    free(m->slots);
    m->slots = ns;
    m->cap = nc;
    return 0;
}

int tkp_map_add(struct tkp_map *m, uint64_t hash, uint32_t id)
{
    if (tkp_map_reserve(m, m->n + 1)) return TKP_ERR_NOMEM;
    put(m->slots, m->cap, (struct tkp_map_slot){id + 1, tkp_map_fold(hash)});
    m->n++;
    return 0;
}

void tkp_map_del(struct tkp_map *m, struct tkp_map_slot *s)
{
    size_t mask = m->cap - 1, i = (size_t)(s - m->slots), j = i;
    for (;;) {
        j = (j + 1) & mask;
        if (!m->slots[j].id1) break;
        size_t home = m->slots[j].h & mask;
        /* j's entry may fill the hole at i unless its home lies cyclically in (i, j] */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            m->slots[i] = m->slots[j];
            i = j;
        }
    }
    m->slots[i].id1 = 0;
    m->n--;
}

void tkp_map_free(struct tkp_map *m)
{
    free(m->slots);
    m->slots = NULL;
    m->cap = m->n = 0;
}

static int eq64(const void *ctx, uint32_t id, const void *key)
{
    return ((const uint64_t *)ctx)[id] == *(const uint64_t *)key;
}

uint64_t *tkp_map64_at(struct tkp_map64 *m, uint64_t key, int add)
{
    uint64_t h = tkp_mix64(key);
    if (add && tkp_map_reserve(&m->ix, m->n + 1)) return NULL;
    if (!m->ix.cap) return NULL;
    struct tkp_map_slot *s = tkp_map_probe(&m->ix, h, eq64, m->key, &key);
    if (s->id1) return &m->val[s->id1 - 1];
    if (!add) return NULL;
    size_t c = m->cap;
    if (TKP_GROW(m->key, c, m->n + 1)) return NULL;
    c = m->cap;
    if (TKP_GROW(m->val, c, m->n + 1)) return NULL;
    m->cap = c;
    m->key[m->n] = key, m->val[m->n] = 0;
    tkp_map_put(&m->ix, s, h, (uint32_t)m->n);
    return &m->val[m->n++];
}

const uint64_t *tkp_map64_get(const struct tkp_map64 *m, uint64_t key)
{
    int64_t id = tkp_map_find(&m->ix, tkp_mix64(key), eq64, m->key, &key);
    return id < 0 ? NULL : &m->val[id];
}

void tkp_map64_free(struct tkp_map64 *m)
{
    tkp_map_free(&m->ix);
    free(m->key), free(m->val);
    m->key = m->val = NULL;
    m->n = m->cap = 0;
}
