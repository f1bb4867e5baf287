/* The shim's one map (shim/core/map.c), its grower (core/grow.c) and the writer's tables built
 * on it (shim/writer/tables.c): ids are dense and stable, a colliding hash never confuses two keys,
 * and each chunk defines a name or a template once, before its first use. */
#include <criterion/criterion.h>
#include <msgpack.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "core/map.h"
#include "tokprof/format.h"
#include "writer/tables.h"

static uint64_t keys[20000];
static int key_eq(const void *ctx, uint32_t id, const void *key)
{
    (void)ctx;
    return keys[id] == *(const uint64_t *)key;
}

Test(shim_map, finds_every_id_and_nothing_else)
{
    struct tkp_map m = {0};
    for (uint32_t i = 0; i < 20000; i++) {
        keys[i] = (uint64_t)i * 7919 + 1;
        cr_assert_eq(tkp_map_add(&m, tkp_hash_u64(keys[i]), i), 0);
    }
    for (uint32_t i = 0; i < 20000; i++)
        cr_assert_eq(tkp_map_find(&m, tkp_hash_u64(keys[i]), key_eq, NULL, &keys[i]), i);
    uint64_t absent = 2;
    cr_assert_eq(tkp_map_find(&m, tkp_hash_u64(absent), key_eq, NULL, &absent), -1);
    cr_assert_leq(m.n * 2, m.cap, "at most half full");
    tkp_map_free(&m);
}

Test(shim_map, one_hash_for_all_keys_still_tells_them_apart)
{
    struct tkp_map m = {0};
    for (uint32_t i = 0; i < 300; i++) {
        keys[i] = 1000 + i;
        tkp_map_add(&m, 42, i);
    }
    for (uint32_t i = 0; i < 300; i++)
        cr_assert_eq(tkp_map_find(&m, 42, key_eq, NULL, &keys[i]), i);
    tkp_map_free(&m);
}

Test(shim_map, gen_marks_once_per_chunk)
{
    struct tkp_gen g = {0};
    cr_assert_eq(tkp_gen_mark(&g, 5000, 0), 1);
    cr_assert_eq(tkp_gen_mark(&g, 5000, 0), 0);
    cr_assert(tkp_gen_has(&g, 5000, 0));
    cr_assert_not(tkp_gen_has(&g, 5000, 1));
    cr_assert_not(tkp_gen_has(&g, 1u << 30, 0), "past the end: not defined");
    cr_assert_eq(tkp_gen_mark(&g, 5000, 1), 1, "a new chunk defines it again");
    tkp_gen_clear(&g);
    cr_assert_eq(tkp_gen_mark(&g, 5000, 1), 1);
    free(g.seq1);
}

/* NAME records packed into a buffer: how many, and the last one's id and string. */
struct packed {
    msgpack_sbuffer sb;
    msgpack_packer pk;
};
static void packed_init(struct packed *p)
{
    msgpack_sbuffer_init(&p->sb);
    msgpack_packer_init(&p->pk, &p->sb, msgpack_sbuffer_write);
}
static int count_names(struct packed *p, uint32_t *last_id, char *last, size_t cap)
{
    size_t off = 0;
    int n = 0;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    while (msgpack_unpack_next(&u, p->sb.data, p->sb.size, &off) == MSGPACK_UNPACK_SUCCESS) {
        msgpack_object *a = u.data.via.array.ptr;
        cr_assert_eq(u.data.type, MSGPACK_OBJECT_ARRAY);
        cr_assert_eq(a[0].via.u64, TKP_REC_NAME);
        *last_id = (uint32_t)a[1].via.u64;
        snprintf(last, cap, "%.*s", (int)a[2].via.str.size, a[2].via.str.ptr);
        n++;
    }
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_clear(&p->sb);
    return n;
}

Test(shim_tables, names_are_defined_once_per_chunk)
{
    struct tkp_names t = {0};
    struct packed p;
    packed_init(&p);
    uint32_t id;
    char s[64];
    cr_assert_eq(tkp_names_id(&t, &p.pk, 0, "gemm"), 0);
    cr_assert_eq(tkp_names_id(&t, &p.pk, 0, "attn"), 1);
    cr_assert_eq(tkp_names_id(&t, &p.pk, 0, "gemm"), 0);
    cr_assert_eq(count_names(&p, &id, s, sizeof s), 2);
    cr_assert_eq(id, 1);
    cr_assert_str_eq(s, "attn");
    cr_assert_eq(tkp_names_id(&t, &p.pk, 1, "gemm"), 0, "the id outlives the chunk");
    cr_assert_eq(count_names(&p, &id, s, sizeof s), 1, "the next chunk defines it again");
    cr_assert_str_eq(s, "gemm");
    cr_assert_eq(tkp_names_id(&t, &p.pk, 1, NULL), 2);
    cr_assert_str_eq(tkp_names_str(&t, 2), "?");
    cr_assert_null(tkp_names_str(&t, 3));
    cr_assert(tkp_names_defined(&t, 0, 1));
    cr_assert_not(tkp_names_defined(&t, 1, 1));
    msgpack_sbuffer_destroy(&p.sb);
}

static int resolved;
static const char *resolve(uint64_t key, int kind)
{
    (void)kind;
    resolved++;
    return key == 0xA ? "kernel_a" : key == 0xB ? "kernel_b" : NULL;
}

Test(shim_tables, launch_keys_are_resolved_once)
{
    struct tkp_names t = {0};
    struct packed p;
    packed_init(&p);
    uint32_t id;
    char s[64];
    cr_assert_eq(tkp_names_key(&t, &p.pk, 0, 0xA, 0, resolve), 0);
    cr_assert_eq(tkp_names_key(&t, &p.pk, 0, 0xB, 0, resolve), 1);
    cr_assert_eq(tkp_names_key(&t, &p.pk, 0, 0xA, 0, resolve), 0);
    cr_assert_eq(resolved, 2);
    count_names(&p, &id, s, sizeof s);
    cr_assert_eq(tkp_names_key(&t, &p.pk, 1, 0xA, 0, resolve), 0);
    cr_assert_eq(resolved, 2, "a known key is not resolved again");
    cr_assert_eq(count_names(&p, &id, s, sizeof s), 1, "but its name is defined in the new chunk");
    cr_assert_str_eq(s, "kernel_a");
    tkp_names_key(&t, &p.pk, 1, 0, 0, resolve);
    tkp_names_key(&t, &p.pk, 1, 0, 0, resolve);
    cr_assert_eq(resolved, 4, "key 0 is never remembered");
    msgpack_sbuffer_destroy(&p.sb);
}

Test(shim_tables, templates_are_dense_fresh_once_per_chunk_and_bounded)
{
    struct tkp_tmpl m = {.nw = 3};
    uint64_t k[3] = {1, 2, 3};
    int fresh = -1;
    cr_assert_eq(tkp_tmpl_id(&m, k, 0, &fresh), 0);
    cr_assert_eq(fresh, 1);
    cr_assert_eq(tkp_tmpl_id(&m, k, 0, &fresh), 0);
    cr_assert_eq(fresh, 0);
    k[2] = 4;
    cr_assert_eq(tkp_tmpl_id(&m, k, 0, &fresh), 1, "one word differs: another template");
    k[2] = 3;
    cr_assert_eq(tkp_tmpl_id(&m, k, 1, &fresh), 0);
    cr_assert_eq(fresh, 1, "defined again in the next chunk");
    for (uint64_t i = 2; i < TKP_TMPL_MAX; i++) {
        uint64_t w[3] = {i, i, i};
        cr_assert_eq(tkp_tmpl_id(&m, w, 1, &fresh), (int64_t)i);
    }
    uint64_t full[3] = {1, 1, 9};
    cr_assert_eq(tkp_tmpl_id(&m, full, 1, &fresh), -1, "full: the caller writes the full form");
}

/* The shim's one grower (shim/core/grow.c): index `need` exists afterwards, what it adds is
 * zeroed, and an index no doubling of a uint32_t capacity reaches fails with the array as it was
 * (the private copies it replaced doubled until the capacity wrapped to 0, and never returned). */
Test(shim_grow, zeroes_doubles_and_refuses_an_overflow, .timeout = 10)
{
    uint32_t *a = NULL, cap = 0;
    cr_assert_eq(tkp_grow((void **)&a, &cap, 0, sizeof *a, 64), 0);
    cr_assert_eq(cap, 64);
    a[63] = 5;
    cr_assert_eq(tkp_grow((void **)&a, &cap, 64, sizeof *a, 64), 0);
    cr_assert_eq(cap, 128);
    cr_assert_eq(a[63], 5);
    for (uint32_t i = 64; i < 128; i++) cr_assert_eq(a[i], 0, "zeroed %u", i);
    uint32_t *old = a;
    cr_assert_eq(tkp_grow((void **)&a, &cap, UINT32_MAX, sizeof *a, 64), -1);
    cr_assert_eq(a, old);
    cr_assert_eq(cap, 128);
    free(a);
}
