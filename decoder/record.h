/* tokprof decoder: one msgpack record -> struct tkp_record, before name and thread resolution.
 * Internal to the reader. */
#ifndef TKP_RECORD_H
#define TKP_RECORD_H

#include "mp.h"
#include "reader.h"

/* Templates (FORMAT.md "Templates"): what a LAUNCH_T / LIB_CALL_T stands for; `gen` is the
 * chunk (tkp_decode_buf.gen) that defined it, so that a use is checked against its own chunk. */
struct tkp_launch_tmpl {
    uint32_t gen, thread;
    __typeof__(((struct tkp_record *)0)->launch) launch; /* call and stack 0 */
};
struct tkp_lib_tmpl {
    uint32_t gen, thread;
    __typeof__(((struct tkp_record *)0)->lib_call) lib; /* call and call_ns 0 */
};

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
    uint32_t gen; /* the chunk being decoded (the reader sets it), for templates */
    struct tkp_launch_tmpl *ltmpl; /* by id, < TKP_TMPL_MAX */
    uint32_t ltmpl_cap;
    struct tkp_lib_tmpl *ctmpl;
    uint32_t ctmpl_cap;
};

/* Decodes the object at the cursor. Name ids are left unresolved (names NULL), tid is 0 and
 * host_ns is 0 (the dt is in b->dt). LAUNCH_T and LIB_CALL_T come out as the LAUNCH and LIB_CALL
 * they stand for. Returns 1 for a known record, 0 when an unknown type was skipped, 2 for a
 * template definition (TMPL, LIB_TMPL: stored in b, nothing to deliver), or TKP_ERR_RECORD /
 * TKP_ERR_NOMEM with a reason in why. */
#define TKP_DECODE_DEFINED 2
int tkp_record_decode(struct tkp_mp *c, struct tkp_record *r, struct tkp_decode_buf *b, char *why,
                      size_t whylen);

void tkp_decode_buf_free(struct tkp_decode_buf *b);

/* "LAUNCH", "GRAPH", ... or NULL for an unknown type. */
const char *tkp_record_type_name(uint64_t type);

#endif
