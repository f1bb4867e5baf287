/* tokprof decoder: one msgpack record -> struct tkp_record, before name and thread resolution.
 * Internal to the reader. */
#ifndef TKP_RECORD_H
#define TKP_RECORD_H

#include "mp.h"
#include "reader.h"

/* Scratch the decoder fills; owned by the reader and reused record after record. */
struct tkp_decode_buf {
    struct tkp_graph_node *nodes;
    uint32_t nodes_cap;
    uint64_t *deps;
    uint32_t deps_cap;
    int64_t dt;           /* the record's dt, for types with tkp_record_has_time() */
    const char *name_raw; /* NAME: the string in the payload, not NUL-terminated */
    uint32_t name_len;
    char program[TKP_NAME_MAX], hostname[256], version[64]; /* META strings */
    char gpu_str[3][192]; /* GPU_INFO mode, reason, clock */
    uint64_t *pcs;        /* STACK frames */
    uint32_t pcs_cap;
    char path[TKP_NAME_MAX], build_id[136]; /* MODULE strings */
};

/* Decodes the object at the cursor. Name ids are left unresolved (names NULL), tid is 0 and
 * host_ns is 0 (the dt is in b->dt). Returns 1 for a known record, 0 when an unknown type was
 * skipped, or TKP_ERR_RECORD / TKP_ERR_NOMEM with a reason in why. */
int tkp_record_decode(struct tkp_mp *c, struct tkp_record *r, struct tkp_decode_buf *b, char *why,
                      size_t whylen);

void tkp_decode_buf_free(struct tkp_decode_buf *b);

/* "LAUNCH", "GRAPH", ... or NULL for an unknown type. */
const char *tkp_record_type_name(uint64_t type);

#endif
