/* The writer's tables of names and templates. Each is a dense array of what it holds plus the one
 * map of core/map.h over it; each id carries the chunk that last defined it. */
#include <stdlib.h>
#include <string.h>

#include "core/grow.h"
#include "tokprof/format.h"
#include "writer/tables.h"

static int str_eq(const void *ctx, uint32_t id, const void *key)
{
    const struct tkp_names *t = ctx;
    return !strcmp(t->str[id], key);
}

static uint64_t str_hash(const char *s)
{
    return tkp_hash_bytes(s, strlen(s));
}

uint32_t tkp_names_id(struct tkp_names *t, msgpack_packer *pk, uint32_t seq, const char *s)
{
    if (!s) s = "?";
    uint64_t h = str_hash(s);
    int64_t found = tkp_map_find(&t->map, h, str_eq, t, s);
    uint32_t id;
    if (found >= 0) {
        id = (uint32_t)found;
    } else {
        char *copy = strdup(s);
        if (!copy || tkp_grow((void **)&t->str, &t->cap, t->n, sizeof *t->str, 256)) {
            free(copy);
            return 0;
        }
        id = t->n++;
        t->str[id] = copy;
        if (tkp_map_add(&t->map, h, id)) return 0;
    }
    int fresh = tkp_gen_mark(&t->gen, id, seq);
    if (fresh > 0) {
        size_t n = strlen(t->str[id]);
        msgpack_pack_array(pk, 3);
        msgpack_pack_int(pk, TKP_REC_NAME);
        msgpack_pack_uint32(pk, id);
        msgpack_pack_str(pk, n);
        msgpack_pack_str_body(pk, t->str[id], n);
    }
    return id;
}

static int key_eq(const void *ctx, uint32_t i, const void *key)
{
    const struct tkp_names *t = ctx;
    return t->key[i].key == *(const uint64_t *)key;
}

uint32_t tkp_names_key(struct tkp_names *t, msgpack_packer *pk, uint32_t seq, uint64_t key,
                       int kind, const char *(*resolve)(uint64_t key, int kind))
{
    uint64_t h = tkp_hash_u64(key);
    int64_t i = key ? tkp_map_find(&t->keys, h, key_eq, t, &key) : -1;
    if (i >= 0) {
        uint32_t id = t->key[i].name;
        if (!tkp_gen_has(&t->gen, id, seq)) tkp_names_id(t, pk, seq, t->str[id]);
        return id;
    }
    uint32_t id = tkp_names_id(t, pk, seq, resolve(key, kind));
    if (!key) return id;
    if (tkp_grow((void **)&t->key, &t->keys_cap, t->nkeys, sizeof *t->key, 256) ||
        tkp_map_add(&t->keys, h, t->nkeys))
        return id;
    t->key[t->nkeys++] = (struct tkp_key_name){key, id};
    return id;
}

const char *tkp_names_str(const struct tkp_names *t, uint32_t id)
{
    return id < t->n ? t->str[id] : NULL;
}

int tkp_names_defined(const struct tkp_names *t, uint32_t id, uint32_t seq)
{
    return tkp_gen_has(&t->gen, id, seq);
}

static int words_eq(const void *ctx, uint32_t id, const void *key)
{
    const struct tkp_tmpl *m = ctx;
    return !memcmp(m->keys + (size_t)id * m->nw, key, m->nw * 8);
}

int64_t tkp_tmpl_id(struct tkp_tmpl *m, const uint64_t *key, uint32_t seq, int *fresh)
{
    uint64_t h = tkp_hash_words(key, m->nw);
    int64_t id = tkp_map_find(&m->map, h, words_eq, m, key);
    if (id < 0) {
        if (m->n >= TKP_TMPL_MAX) return -1;
        if (tkp_grow((void **)&m->keys, &m->cap, m->n, m->nw * sizeof *m->keys, 256)) return -1;
        if (tkp_map_add(&m->map, h, m->n)) return -1;
        memcpy(m->keys + (size_t)m->n * m->nw, key, m->nw * sizeof *key);
        id = m->n++;
    }
    int g = tkp_gen_mark(&m->gen, (uint32_t)id, seq);
    if (g < 0) return -1;
    *fresh = g;
    return id;
}
