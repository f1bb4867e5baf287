/* The fixed-layout records as the writer packs them, generated from their one description
 * (include/tokprof/records.def), the one the decoder's passes are generated from: per type a
 * struct of its fields in wire order, their count, a packer of the whole record and one of its
 * fields alone (a TMPL's fields are a LAUNCH's). The writer fills the struct from the ring event
 * (writer.c's encode_fixed); the layout is never spelled out here. Header only, writer thread. */
#ifndef TKP_WRITER_FIXED_H
#define TKP_WRITER_FIXED_H

#include <msgpack.h>
#include <stdint.h>

#include "tokprof/format.h"
#include "tokprof/records.def"

#define TKP_FIXED_MEMBER_u32(name) uint32_t name;
#define TKP_FIXED_MEMBER_u64(name) uint64_t name;
#define TKP_FIXED_MEMBER_i64(name) int64_t name;
#define TKP_FIXED_MEMBER_cenum(name) int32_t name;
#define TKP_FIXED_MEMBER_dim3(name) uint32_t name[3];
#define TKP_FIXED_N_u32 1
#define TKP_FIXED_N_u64 1
#define TKP_FIXED_N_i64 1
#define TKP_FIXED_N_cenum 1
#define TKP_FIXED_N_dim3 3
#define TKP_FIXED_PACK_u32(pk, v) msgpack_pack_uint32(pk, v)
#define TKP_FIXED_PACK_u64(pk, v) msgpack_pack_uint64(pk, v)
#define TKP_FIXED_PACK_i64(pk, v) msgpack_pack_int64(pk, v)
#define TKP_FIXED_PACK_cenum(pk, v) msgpack_pack_int32(pk, v)
#define TKP_FIXED_PACK_dim3(pk, v)                                                                 \
    msgpack_pack_uint32(pk, (v)[0]);                                                               \
    msgpack_pack_uint32(pk, (v)[1]);                                                               \
    msgpack_pack_uint32(pk, (v)[2])
#define TKP_FIXED_NO_EXTRA(ctype, name) /* not in the described elements: the caller's */

/* struct tkp_fixed_COPY { uint32_t kind; uint32_t dir; uint64_t bytes; ... }, ... */
#define TKP_FIXED_MEMBER(kind, name, wire) TKP_FIXED_MEMBER_##kind(name)
#define TKP_FIXED_STRUCT(T, member, HEAD, fields, extra) struct tkp_fixed_##T { fields };
TKP_RECORDS_FIXED(TKP_FIXED_STRUCT, TKP_FIXED_MEMBER, TKP_FIXED_NO_EXTRA)

/* TKP_FIXED_N_COPY, ...: the elements after the head */
#define TKP_FIXED_ONE(kind, name, wire) +TKP_FIXED_N_##kind
#define TKP_FIXED_COUNT(T, member, HEAD, fields, extra) TKP_FIXED_N_##T = 0 fields,
enum { TKP_RECORDS_FIXED(TKP_FIXED_COUNT, TKP_FIXED_ONE, TKP_FIXED_NO_EXTRA) };

/* The head every record of a kind starts with: HOST [type, dt, thread, step], STEP [type, step,
 * thread] (dt is unused there), ANYTHREAD [type, thread] (thread may be UINT32_MAX). */
struct tkp_fixed_head {
    int64_t dt;
    uint32_t thread, step;
};
#define TKP_FIXED_HEAD_HOST(pk, type, n, h)                                                       \
    msgpack_pack_array(pk, 4 + (n));                                                              \
    msgpack_pack_int(pk, type);                                                                   \
    msgpack_pack_int64(pk, (h)->dt);                                                              \
    msgpack_pack_uint32(pk, (h)->thread);                                                         \
    msgpack_pack_uint32(pk, (h)->step);
#define TKP_FIXED_HEAD_STEP(pk, type, n, h)                                                       \
    msgpack_pack_array(pk, 3 + (n));                                                              \
    msgpack_pack_int(pk, type);                                                                   \
    msgpack_pack_uint32(pk, (h)->step);                                                           \
    msgpack_pack_uint32(pk, (h)->thread);
#define TKP_FIXED_HEAD_ANYTHREAD(pk, type, n, h)                                                   \
    msgpack_pack_array(pk, 2 + (n));                                                               \
    msgpack_pack_int(pk, type);                                                                    \
    msgpack_pack_uint32(pk, (h)->thread);

/* tkp_fixed_fields_COPY(pk, fields): the elements after the head, in order;
 * tkp_fixed_pack_more_COPY(pk, head, fields, more): one whole record, its array counting `more`
 * elements the caller packs after it (LAUNCH's call and stack); tkp_fixed_pack_COPY(pk, head,
 * fields): the same with none. */
#define TKP_FIXED_FIELD(kind, name, wire) TKP_FIXED_PACK_##kind(pk, v->name);
#define TKP_FIXED_PACKER(T, member, HEAD, fields, extra)                                           \
    static inline void tkp_fixed_fields_##T(msgpack_packer *pk, const struct tkp_fixed_##T *v)     \
    {                                                                                              \
        fields                                                                                     \
    }                                                                                              \
    static inline void tkp_fixed_pack_more_##T(msgpack_packer *pk, const struct tkp_fixed_head *h, \
                                               const struct tkp_fixed_##T *v, uint32_t more)       \
    {                                                                                              \
        TKP_FIXED_HEAD_##HEAD(pk, TKP_REC_##T, TKP_FIXED_N_##T + more, h)                          \
            tkp_fixed_fields_##T(pk, v);                                                           \
    }                                                                                              \
    static inline void tkp_fixed_pack_##T(msgpack_packer *pk, const struct tkp_fixed_head *h,      \
                                          const struct tkp_fixed_##T *v)                           \
    {                                                                                              \
        tkp_fixed_pack_more_##T(pk, h, v, 0);                                                      \
    }
TKP_RECORDS_FIXED(TKP_FIXED_PACKER, TKP_FIXED_FIELD, TKP_FIXED_NO_EXTRA)

#endif
