/* The writer's tables (tables.c): names and templates, each an id that a chunk defines once
 * before its first use (chunks are self-contained, docs/FORMAT.md). Writer thread only. */
#ifndef TKP_WRITER_TABLES_H
#define TKP_WRITER_TABLES_H

#include <msgpack.h>
#include <stdint.h>

#include "core/map.h"

/* Strings (kernel names, NVTX names, library ops) and the launch keys whose name they are. */
struct tkp_names {
    struct tkp_map map; /* string -> id */
    char **str;         /* id -> string (owned) */
    uint32_t n, cap;
    struct tkp_gen gen;  /* ids defined in the current chunk */
    struct tkp_map keys; /* launch key -> index into key[] */
    struct tkp_key_name {
        uint64_t key;
        uint32_t name;
    } * key;
    uint32_t nkeys, keys_cap;
};
/* The id of `s` ("?" for NULL); a NAME record is packed into pk first when chunk `seq` has not
 * defined it yet. 0 when memory ran out. */
uint32_t tkp_names_id(struct tkp_names *t, msgpack_packer *pk, uint32_t seq, const char *s);
/* The name id of a launch key: `resolve` (record/symtab.c's tkp_sym_name) is asked once per key;
 * key 0 is never remembered. */
uint32_t tkp_names_key(struct tkp_names *t, msgpack_packer *pk, uint32_t seq, uint64_t key,
                       int kind, const char *(*resolve)(uint64_t key, int kind));
/* The string of an id, NULL when there is none. */
const char *tkp_names_str(const struct tkp_names *t, uint32_t id);
/* 1 when id is defined in chunk seq. */
int tkp_names_defined(const struct tkp_names *t, uint32_t id, uint32_t seq);

/* Templates (FORMAT.md, "Templates"): a fixed number of 64-bit words -> a dense id below
 * TKP_TMPL_MAX. */
struct tkp_tmpl {
    uint32_t nw;    /* words per key */
    uint64_t *keys; /* id -> its nw words */
    uint32_t n, cap;
    struct tkp_map map;
    struct tkp_gen gen;
};
/* The key's id, adding it when new; -1 when the table is full or out of memory (the caller then
 * writes the record in its full form). *fresh is 1 when it must be (re)defined in chunk `seq`,
 * and marks it defined. */
int64_t tkp_tmpl_id(struct tkp_tmpl *m, const uint64_t *key, uint32_t seq, int *fresh);

#endif
