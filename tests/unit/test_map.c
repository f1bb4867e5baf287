/* The decoder's one map (decoder/base/map.h): ids found by key through growth, keys whose hashes
 * collide (every one the same) told apart by the owner's comparison, and the 64-bit map's values
 * in the order added. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/map.h"

static int eq(const void *ctx, uint32_t id, const void *key)
{
    return ((const uint64_t *)ctx)[id] == *(const uint64_t *)key;
}

static void fill(uint64_t (*hash)(uint64_t))
{
    enum { N = 5000 };
    static uint64_t keys[N];
    struct tkp_map m = {0};
    for (uint32_t i = 0; i < N; i++) {
        keys[i] = (uint64_t)i * 7919 + 13;
        cr_assert_eq(tkp_map_find(&m, hash(keys[i]), eq, keys, &keys[i]), -1);
        cr_assert_eq(tkp_map_add(&m, hash(keys[i]), i), 0);
    }
    cr_assert_eq(m.n, N);
    cr_assert_geq(m.cap, 2 * N, "at most half full");
    for (uint32_t i = 0; i < N; i++)
        cr_assert_eq(tkp_map_find(&m, hash(keys[i]), eq, keys, &keys[i]), i);
    uint64_t absent = 1;
    cr_assert_eq(tkp_map_find(&m, hash(absent), eq, keys, &absent), -1);
    tkp_map_free(&m);
}

static uint64_t same(uint64_t k)
{
    (void)k;
    return 42;
}

Test(map, finds_every_id_through_growth)
{
    fill(tkp_mix64);
}

Test(map, colliding_hashes_told_apart_by_the_owner)
{
    fill(same);
}

Test(map, probe_gives_the_slot_to_fill)
{
    uint64_t keys[2] = {5, 6};
    struct tkp_map m = {0};
    cr_assert_eq(tkp_map_reserve(&m, 1), 0);
    struct tkp_map_slot *s = tkp_map_probe(&m, tkp_mix64(5), eq, keys, &keys[0]);
    cr_assert_eq(s->id1, 0, "absent: the empty slot");
    tkp_map_put(&m, s, tkp_mix64(5), 0);
    cr_assert_eq(tkp_map_probe(&m, tkp_mix64(5), eq, keys, &keys[0])->id1, 1);
    cr_assert_eq(tkp_map_find(&m, tkp_mix64(6), eq, keys, &keys[1]), -1);
    tkp_map_free(&m);
}

/* Removal (backward shift): a cluster that wraps past the table's end, its entries removed from
 * the front, the middle and the back, every other key still found, and no slot left behind. */
static uint64_t ident(uint64_t k)
{
    return k; /* below 2^32: the folded hash is the key's home slot (mod the capacity) */
}

static void add_at(struct tkp_map *m, const uint64_t *keys, uint32_t id)
{
    struct tkp_map_slot *s = tkp_map_probe(m, ident(keys[id]), eq, keys, &keys[id]);
    cr_assert_eq(s->id1, 0, "absent before it is added");
    tkp_map_put(m, s, ident(keys[id]), id);
}

static void del_key(struct tkp_map *m, const uint64_t *keys, uint32_t id)
{
    struct tkp_map_slot *s = tkp_map_probe(m, ident(keys[id]), eq, keys, &keys[id]);
    cr_assert_eq(s->id1, id + 1, "present before it is removed");
    tkp_map_del(m, s);
    cr_assert_eq(tkp_map_find(m, ident(keys[id]), eq, keys, &keys[id]), -1);
}

static size_t used_slots(const struct tkp_map *m)
{
    size_t n = 0;
    for (size_t i = 0; i < m->cap; i++)
        n += m->slots[i].id1 != 0;
    return n;
}

Test(map, removal_in_a_cluster_that_wraps)
{
    /* homes 254 254 255 255 0 1 2 (+256: the same homes, other keys): slots 254..255, 0..4 */
    static const uint64_t base[] = {254, 510, 255, 511, 256, 1, 2};
    enum { N = sizeof(base) / sizeof(base[0]) };
    static const uint32_t orders[][N] = {
        {0, 1, 2, 3, 4, 5, 6}, {6, 5, 4, 3, 2, 1, 0}, {3, 0, 5, 1, 6, 2, 4}, {4, 2, 6, 0, 3, 5, 1}};
    uint64_t keys[N];
    memcpy(keys, base, sizeof(keys));
    for (size_t o = 0; o < sizeof(orders) / sizeof(orders[0]); o++) {
        struct tkp_map m = {0};
        cr_assert_eq(tkp_map_reserve(&m, 1), 0);
        cr_assert_eq(m.cap, 256, "the wrap needs the smallest table");
        for (uint32_t i = 0; i < N; i++)
            add_at(&m, keys, i);
        cr_assert_eq(m.slots[255].id1 != 0 && m.slots[0].id1 != 0, 1, "the cluster wraps");
        char gone[N] = {0};
        for (uint32_t k = 0; k < N; k++) {
            uint32_t id = orders[o][k];
            del_key(&m, keys, id);
            gone[id] = 1;
            cr_assert_eq(m.n, N - 1 - k);
            cr_assert_eq(used_slots(&m), m.n, "no tombstone");
            for (uint32_t i = 0; i < N; i++)
                cr_assert_eq(tkp_map_find(&m, ident(keys[i]), eq, keys, &keys[i]),
                             gone[i] ? -1 : (int64_t)i, "order %zu, after removing %u: key %u",
                             o, id, i);
        }
        tkp_map_free(&m);
    }
}

/* Adds and removals at random against a reference, homes crowded at the table's end so that
 * clusters wrap; removed ids reused as an owner would; the table grows through it. */
Test(map, random_adds_and_removals_against_a_reference)
{
    enum { N = 3000 };
    static uint64_t keys[N];
    static char live[N];
    uint32_t freeids[N], nfree = 0, next = 0;
    uint64_t x = 88172645463325252ull, serial = 0;
    struct tkp_map m = {0};
    size_t nlive = 0;
    for (int step = 0; step < 60000; step++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        if (x % 5 < 3 && (nfree || next < N)) { /* add a new key */
            uint32_t id = nfree ? freeids[--nfree] : next++;
            keys[id] = 1000000 + serial++ * 64 + (x >> 8) % 24 + 232; /* home mod 256: 232..255 */
            cr_assert_eq(tkp_map_reserve(&m, m.n + 1), 0);
            add_at(&m, keys, id);
            live[id] = 1, nlive++;
        } else if (nlive) { /* remove a live one */
            uint32_t id = (uint32_t)((x >> 16) % next);
            while (!live[id])
                id = (id + 1) % next;
            del_key(&m, keys, id);
            live[id] = 0, nlive--, freeids[nfree++] = id;
        }
        cr_assert_eq(m.n, nlive);
        if (step % 97) continue;
        cr_assert_eq(used_slots(&m), nlive, "no tombstone");
        for (uint32_t i = 0; i < next; i++) {
            int64_t want = live[i] ? (int64_t)i : -1;
            cr_assert_eq(tkp_map_find(&m, ident(keys[i]), eq, keys, &keys[i]), want,
                         "step %d: key of id %u", step, i);
        }
    }
    tkp_map_free(&m);
}

Test(map64, values_by_key_in_order_added)
{
    struct tkp_map64 m = {0};
    cr_assert_null(tkp_map64_at(&m, 9, 0), "empty: absent");
    for (uint64_t k = 0; k < 3000; k++) {
        uint64_t *v = tkp_map64_at(&m, k * 0x10000, 1);
        cr_assert_not_null(v);
        cr_assert_eq(*v, 0, "a new key's value is 0");
        *v = k + 1;
    }
    for (uint64_t k = 0; k < 3000; k++) {
        cr_assert_eq(*tkp_map64_at(&m, k * 0x10000, 0), k + 1);
        cr_assert_eq(m.key[k], k * 0x10000, "keys in the order added");
    }
    cr_assert_eq(m.n, 3000);
    cr_assert_null(tkp_map64_at(&m, 1, 0));
    tkp_map64_free(&m);
}

Test(hash, fnv64_is_fnv1a)
{
    /* FNV-1a 64 of "a" (the published test vector) */
    cr_assert_eq(tkp_fnv64_str(TKP_FNV64_SEED, "a"), 0xaf63dc4c8601ec8cull);
    cr_assert_eq(tkp_fnv64(TKP_FNV64_SEED, "a", 1), 0xaf63dc4c8601ec8cull);
}
