/* The decoder's one map (decoder/base/map.h): ids found by key through growth, keys whose hashes
 * collide (every one the same) told apart by the owner's comparison, and the 64-bit map's values
 * in the order added. */
#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

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
