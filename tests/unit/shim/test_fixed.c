/* The writer's fixed-layout records (shim/writer/fixed.h, generated from
 * include/tokprof/records.def) against docs/FORMAT.md's record table, written here from
 * FORMAT.md alone: each field set to a distinct value must land at FORMAT.md's position, after
 * the head, with nothing more. The decoder reads the same records.def, so a mistake there would
 * pass every end-to-end test; this one compares with the normative text. */
#include <criterion/criterion.h>
#include <msgpack.h>

#include "writer/fixed.h"

/* The record packed into sb as the integers of its array. */
static int unpack(msgpack_sbuffer *sb, int64_t *out, int cap)
{
    size_t off = 0;
    msgpack_unpacked u;
    msgpack_unpacked_init(&u);
    cr_assert_eq(msgpack_unpack_next(&u, sb->data, sb->size, &off), MSGPACK_UNPACK_SUCCESS);
    cr_assert_eq(off, sb->size, "one record");
    cr_assert_eq(u.data.type, MSGPACK_OBJECT_ARRAY);
    int n = (int)u.data.via.array.size;
    cr_assert_leq(n, cap);
    for (int i = 0; i < n; i++) {
        msgpack_object *o = &u.data.via.array.ptr[i];
        cr_assert(o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ||
                  o->type == MSGPACK_OBJECT_NEGATIVE_INTEGER);
        out[i] = o->type == MSGPACK_OBJECT_POSITIVE_INTEGER ? (int64_t)o->via.u64 : o->via.i64;
    }
    msgpack_unpacked_destroy(&u);
    msgpack_sbuffer_clear(sb);
    return n;
}

static msgpack_sbuffer sb;
static msgpack_packer pk;
static void setup(void)
{
    msgpack_sbuffer_init(&sb);
    msgpack_packer_init(&pk, &sb, msgpack_sbuffer_write);
}
TestSuite(shim_fixed, .init = setup);

static const struct tkp_fixed_head head = {.dt = -7, .thread = 8, .step = 9};

/* FORMAT.md: [type, dt, thread, step, fields...] */
static void expect_host(int type, const int64_t *fields, int n)
{
    int64_t got[32];
    cr_assert_eq(unpack(&sb, got, 32), 4 + n, "type %d: %d fields", type, n);
    cr_assert_eq(got[0], type);
    cr_assert_eq(got[1], -7);
    cr_assert_eq(got[2], 8);
    cr_assert_eq(got[3], 9);
    for (int i = 0; i < n; i++)
        cr_assert_eq(got[4 + i], fields[i], "type %d field %d", type, i);
}

Test(shim_fixed, copy_sync_events_nvtx_marker_in_format_md_order)
{
    /* COPY: dt, thread, step, kind, dir, bytes, stream, flags */
    tkp_fixed_pack_COPY(
        &pk, &head,
        &(struct tkp_fixed_COPY){
            .kind = 1, .dir = 2, .bytes = 1u << 20, .stream = 0x7f00aa, .flags = 3});
    expect_host(TKP_REC_COPY, (int64_t[]){1, 2, 1 << 20, 0x7f00aa, 3}, 5);
    /* SYNC: dt, thread, step, kind, handle, wait_ns */
    tkp_fixed_pack_SYNC(&pk, &head,
                        &(struct tkp_fixed_SYNC){.kind = 1, .handle = 0xe0, .wait_ns = 12345});
    expect_host(TKP_REC_SYNC, (int64_t[]){1, 0xe0, 12345}, 3);
    /* EVENT_RECORD: dt, thread, step, event, stream */
    tkp_fixed_pack_EVENT_RECORD(&pk, &head,
                                &(struct tkp_fixed_EVENT_RECORD){.event = 0xe1, .stream = 0x51});
    expect_host(TKP_REC_EVENT_RECORD, (int64_t[]){0xe1, 0x51}, 2);
    /* STREAM_WAIT: dt, thread, step, stream, event */
    tkp_fixed_pack_STREAM_WAIT(&pk, &head,
                               &(struct tkp_fixed_STREAM_WAIT){.stream = 0x52, .event = 0xe2});
    expect_host(TKP_REC_STREAM_WAIT, (int64_t[]){0x52, 0xe2}, 2);
    /* NVTX: dt, thread, step, kind, name, range_id */
    tkp_fixed_pack_NVTX(&pk, &head,
                        &(struct tkp_fixed_NVTX){.kind = 3, .name_id = 44, .range_id = 55});
    expect_host(TKP_REC_NVTX, (int64_t[]){3, 44, 55}, 3);
    /* MARKER: dt, thread, step, kind, value (signed) */
    tkp_fixed_pack_MARKER(&pk, &head, &(struct tkp_fixed_MARKER){.kind = 1, .value = -2});
    expect_host(TKP_REC_MARKER, (int64_t[]){1, -2}, 2);
}

Test(shim_fixed, step_has_no_dt)
{
    /* STEP: step, thread, kind, begin_ns, mark_ns, end_ns, closed_by, launches, graph_launches,
     * copies */
    tkp_fixed_pack_STEP(&pk, &head,
                        &(struct tkp_fixed_STEP){.kind = 1,
                                                 .begin_ns = 100,
                                                 .mark_ns = 200,
                                                 .end_ns = 300,
                                                 .closed_by = 4,
                                                 .launches = 5,
                                                 .graph_launches = 6,
                                                 .copies = 7});
    int64_t got[32];
    cr_assert_eq(unpack(&sb, got, 32), 11);
    static const int64_t want[] = {TKP_REC_STEP, 9, 8, 1, 100, 200, 300, 4, 5, 6, 7};
    for (int i = 0; i < 11; i++)
        cr_assert_eq(got[i], want[i], "element %d", i);
}

Test(shim_fixed, launch_with_its_trailing_call_and_stack)
{
    /* LAUNCH: dt, thread, step, name, stream, via, gx, gy, gz, bx, by, bz, smem [, call
     * [, stack]]: the caller packs what follows, the array counts it */
    struct tkp_fixed_LAUNCH v = {.name_id = 21,
                                 .stream = 0x7f01,
                                 .via = 2,
                                 .grid = {3, 4, 5},
                                 .block = {6, 7, 8},
                                 .smem = 9};
    tkp_fixed_pack_LAUNCH(&pk, &head, &v);
    static const int64_t want[] = {21, 0x7f01, 2, 3, 4, 5, 6, 7, 8, 9};
    expect_host(TKP_REC_LAUNCH, want, 10);
    tkp_fixed_pack_more_LAUNCH(&pk, &head, &v, 2);
    msgpack_pack_uint32(&pk, 11); /* call */
    msgpack_pack_uint32(&pk, 12); /* stack */
    static const int64_t more[] = {21, 0x7f01, 2, 3, 4, 5, 6, 7, 8, 9, 11, 12};
    expect_host(TKP_REC_LAUNCH, more, 12);
    /* TMPL: tmpl, thread, then a LAUNCH's fields from name to smem */
    msgpack_pack_array(&pk, 3 + TKP_FIXED_N_LAUNCH);
    msgpack_pack_int(&pk, TKP_REC_TMPL);
    msgpack_pack_uint32(&pk, 30);
    msgpack_pack_uint32(&pk, 8);
    tkp_fixed_fields_LAUNCH(&pk, &v);
    int64_t got[32];
    cr_assert_eq(unpack(&sb, got, 32), 13);
    static const int64_t tmpl[] = {TKP_REC_TMPL, 30, 8, 21, 0x7f01, 2, 3, 4, 5, 6, 7, 8, 9};
    for (int i = 0; i < 13; i++)
        cr_assert_eq(got[i], tmpl[i], "TMPL element %d", i);
}

Test(shim_fixed, loss_has_a_thread_and_no_dt)
{
    /* LOSS: thread, dropped_total [, stopped]; thread 4294967295: threads that got no ring */
    int64_t got[8];
    tkp_fixed_pack_LOSS(&pk, &head, &(struct tkp_fixed_LOSS){.dropped = 77});
    cr_assert_eq(unpack(&sb, got, 8), 3);
    cr_assert_eq(got[0], TKP_REC_LOSS);
    cr_assert_eq(got[1], 8);
    cr_assert_eq(got[2], 77);
    tkp_fixed_pack_more_LOSS(&pk, &(struct tkp_fixed_head){.thread = UINT32_MAX},
                             &(struct tkp_fixed_LOSS){.dropped = 0}, 1);
    msgpack_pack_uint32(&pk, 1); /* stopped */
    cr_assert_eq(unpack(&sb, got, 8), 4);
    cr_assert_eq(got[1], 4294967295);
    cr_assert_eq(got[2], 0);
    cr_assert_eq(got[3], 1);
}

Test(shim_fixed, lib_call_in_format_md_order)
{
    /* LIB_CALL: dt, thread, step, call, lib, op, m, n, k, batch, atype, btype, ctype, compute,
     * transa, transb, stream, a_ptr, host_ns, status, flags; the types are -1 when unknown */
    tkp_fixed_pack_LIB_CALL(&pk, &head,
                            &(struct tkp_fixed_LIB_CALL){.call = 1,
                                                         .lib = 2,
                                                         .op_id = 3,
                                                         .m = 4,
                                                         .n = 5,
                                                         .k = 6,
                                                         .batch = 7,
                                                         .atype = -1,
                                                         .btype = 8,
                                                         .ctype = 9,
                                                         .compute = 10,
                                                         .transa = 11,
                                                         .transb = -1,
                                                         .stream = 12,
                                                         .a_ptr = 13,
                                                         .call_ns = 14,
                                                         .status = 15,
                                                         .flags = 16});
    static const int64_t want[] = {1, 2, 3, 4, 5, 6, 7, -1, 8, 9, 10, 11, -1, 12, 13, 14, 15, 16};
    expect_host(TKP_REC_LIB_CALL, want, 18);
}
