/* REP records (format 5, docs/FORMAT.md "Repeats"), written here from FORMAT.md alone: a REP
 * is read as the records it stands for (every field, against the same capture written plain),
 * a version-4 reader's capture skips it as an unknown type, and every rule's breach makes the
 * chunk bad. */
#include <criterion/criterion.h>
#include <string.h>

#include "capgot.h"

/* A record as [type, elements...], the elements as signed 64-bit values. */
struct rec {
    uint8_t type, nel; /* nel counts the type */
    int64_t v[16];
};

/* The elements of each type that are times (FORMAT.md "Repeats"), as a bit mask. */
static uint32_t times_of(uint8_t type)
{
    switch (type) {
    case TKP_REC_SYNC:
        return 1u << 1 | 1u << 6;
    case TKP_REC_LIB_CALL_T:
        return 1u << 1 | 1u << 5;
    case TKP_REC_STEP:
        return 1u << 4 | 1u << 5 | 1u << 6;
    default:
        return 1u << 1;
    }
}

static struct capw *v5(void)
{
    struct capw *w = capw_new_bare();
    capw_bytes(w, "\x89TKP\r\n\x1a\n\x05\x00\x00\x00\x10\x00\x00\x00", 16);
    return w;
}

static void plain(struct capw *w, const struct rec *r)
{
    msgpack_packer *pk = capw_pk(w);
    msgpack_pack_array(pk, r->nel);
    msgpack_pack_int(pk, r->type);
    for (int k = 1; k < r->nel; k++) msgpack_pack_int64(pk, r->v[k]);
}

/* The coded values FORMAT.md defines: a STEP's times against T(ref) (refs in v[0]); the dt of a
 * record whose timed groupable record before is a SYNC, against that SYNC's end. */
struct coded {
    uint64_t v[16];
};

static struct coded code(const struct rec *r, uint64_t refs, const uint64_t base[3])
{
    struct coded c = {{0}};
    for (int k = 1; k < r->nel; k++) c.v[k] = (uint64_t)r->v[k];
    if (r->type == TKP_REC_STEP) {
        c.v[0] = refs;
        for (int k = 0; k < 3; k++) c.v[4 + k] -= base[k];
    }
    return c;
}

/* The coded values of a step's five records (the COPY after the SYNC against its end). */
static void code_step(const struct rec *r, uint64_t refs, const uint64_t base[3], struct coded *c)
{
    for (int i = 0; i < 5; i++) c[i] = code(&r[i], refs, base);
    c[4].v[1] -= (uint64_t)r[2].v[6];
}

static void pack_bin(msgpack_packer *pk, const struct col *c)
{
    msgpack_pack_bin(pk, c->n);
    msgpack_pack_bin_body(pk, c->p, c->n);
}

/* A REP of n records, record i coded as cur[i] against ref[i] (back places before it). */
static void rep(struct capw *w, uint32_t n, uint32_t back, const struct rec *recs,
                const struct coded *cur, const struct coded *ref)
{
    struct col t = {0}, o = {0};
    col_byte(&t, 0), col_byte(&o, 0), t.n = o.n = 0; /* allocated: an empty column is a bin */
    for (uint32_t i = 0; i < n; i++) {
        uint32_t tm = times_of(recs[i].type);
        for (int k = 1; k < recs[i].nel; k++)
            col_var(tm >> k & 1 ? &t : &o, zz((int64_t)(cur[i].v[k] - ref[i].v[k])));
        if (recs[i].type == TKP_REC_STEP) col_var(&o, zz((int64_t)(cur[i].v[0] - ref[i].v[0])));
    }
    msgpack_packer *pk = capw_pk(w);
    msgpack_pack_array(pk, 5);
    msgpack_pack_int(pk, 33);
    msgpack_pack_uint32(pk, n);
    msgpack_pack_uint32(pk, back);
    pack_bin(pk, &t);
    pack_bin(pk, &o);
    free(t.p), free(o.p);
}

#define E1 0x55000160
#define E2 0x55000120
#define S 0x55000010

/* Two steps of a decode loop, the second written plain or as a REP of the first's 5 records.
 * Host times: chunk base 1000; step 1: COPY 1100, EVENT 1150, SYNC 1130 (dt -20) ending 6130,
 * STEP 1 (begin 1100, mark 1100, end 6131), COPY 8130 (step 2's input); step 2: COPY 8240,
 * EVENT 8280, SYNC 8255 ending 13555, STEP 2 (begin 8130, mark 8240, end 13556), COPY 15355. */
static const struct rec one[5] = {
    {TKP_REC_COPY, 9, {0, 100, 0, 1, 0, 2, 4, S, 3}},
    {TKP_REC_EVENT_RECORD, 6, {0, 50, 0, 1, E1, S}},
    {TKP_REC_SYNC, 7, {0, -20, 0, 1, 1, E1, 5000}},
    {TKP_REC_STEP, 11, {0, 1, 0, 0, 1100, 1100, 6131, 0, 64, 0, 2}},
    {TKP_REC_COPY, 9, {0, 7000, 0, 2, 0, 1, 4, S, 3}},
};
static const struct rec two[5] = {
    {TKP_REC_COPY, 9, {0, 110, 0, 2, 0, 2, 4, S, 3}},
    {TKP_REC_EVENT_RECORD, 6, {0, 40, 0, 2, E2, S}},
    {TKP_REC_SYNC, 7, {0, -25, 0, 2, 1, E2, 5300}},
    {TKP_REC_STEP, 11, {0, 2, 0, 0, 8130, 8240, 13556, 0, 64, 0, 2}},
    {TKP_REC_COPY, 9, {0, 7100, 0, 3, 0, 1, 4, S, 3}},
};

static void head(struct capw *w, uint64_t base)
{
    capw_chunk_begin(w, base);
    capw_thread(w, 0, 777);
}

/* Step two as a REP: the plain step's STEP coded against the chain (1130, refs 0); step two's
 * begin is 5 host times back (8130), mark 4 (8240), end 1 (13555, the sync's end) + 1. */
static void rep_two(struct capw *w, uint64_t refs_delta)
{
    struct coded ref[5], cur[5];
    const uint64_t chain1[3] = {1130, 1130, 1130};
    const uint64_t refs2[3] = {8130, 8240, 13555};
    code_step(one, 0, chain1, ref);
    code_step(two, 5 | 4 << 5 | 1 << 10, refs2, cur);
    cur[3].v[0] += refs_delta;
    rep(w, 5, 5, two, cur, ref);
}

Test(rep, a_rep_is_the_records_it_stands_for)
{
    struct capw *a = v5(), *b = v5();
    head(a, 1000), head(b, 1000);
    for (int i = 0; i < 5; i++) plain(a, &one[i]), plain(b, &one[i]);
    for (int i = 0; i < 5; i++) plain(a, &two[i]);
    rep_two(b, 0);
    /* and step three repeating step two through the REP's records (back 5 again) */
    struct rec three[5];
    memcpy(three, two, sizeof(three));
    for (int i = 0; i < 5; i++) three[i].v[i == 3 ? 1 : 3]++; /* the step; a STEP's is element 1 */
    three[3].v[4] = 15355, three[3].v[5] = 15465, three[3].v[6] = 20781; /* sync 15480 + 5300 + 1 */
    for (int i = 0; i < 5; i++) plain(a, &three[i]);
    {
        struct coded ref[5], cur[5];
        const uint64_t refs2[3] = {8130, 8240, 13555}, refs3[3] = {15355, 15465, 20780};
        code_step(two, 5 | 4 << 5 | 1 << 10, refs2, ref);
        code_step(three, 5 | 4 << 5 | 1 << 10, refs3, cur);
        rep(b, 5, 5, three, cur, ref);
    }
    capw_chunk_end(a), capw_chunk_end(b);
    struct got ga, gb;
    read_all(a, &ga);
    read_all(b, &gb);
    cr_assert_eq(ga.end, 0, "%s", ga.err.msg);
    cr_assert_eq(ga.n, 16); /* CHUNK and 15 records */
    cr_assert_eq(ga.s[9].type, TKP_REC_STEP);
    cr_assert_eq(ga.s[9].x[3], 13556); /* its end, as written plain */
    same(&ga, &gb, "step two and three as REPs");
    got_free(&ga), got_free(&gb);
    capw_free(a), capw_free(b);
}

/* A version-4 reader's capture (the header says 4): type 33 is an unknown record, skipped. */
Test(rep, a_rep_in_a_version_4_capture_is_an_unknown_record)
{
    struct capw *w = capw_new_bare();
    capw_bytes(w, "\x89TKP\r\n\x1a\n\x04\x00\x00\x00\x10\x00\x00\x00", 16);
    head(w, 1000);
    for (int i = 0; i < 5; i++) plain(w, &one[i]);
    rep_two(w, 0);
    capw_chunk_end(w);
    struct got g;
    read_all(w, &g);
    cr_assert_eq(g.end, 0, "%s", g.err.msg);
    cr_assert_eq(g.n, 6);
    cr_assert_eq(g.stats.unknown_records, 1);
    got_free(&g);
    capw_free(w);
}

/* A capture's first chunk of step one, then a second chunk: the REP breaks a rule there. */
struct bad {
    const char *what, *msg;
    void (*write)(struct capw *w);
};

static void w_no_history(struct capw *w) /* a REP refers to its own chunk only */
{
    rep_two(w, 0);
}
static void w_back_0(struct capw *w)
{
    for (int i = 0; i < 5; i++) plain(w, &one[i]);
    struct coded c[1] = {code(&two[0], 0, NULL)};
    rep(w, 1, 0, two, c, c);
}
static void w_n_0(struct capw *w)
{
    for (int i = 0; i < 5; i++) plain(w, &one[i]);
    rep(w, 0, 5, two, NULL, NULL);
}
/* Step one, then a REP [33, n, back, times, others] of the columns given as they are. */
static void raw_rep(struct capw *w, uint32_t n, const char *t, uint32_t tn, const char *o,
                    uint32_t on)
{
    for (int i = 0; i < 5; i++) plain(w, &one[i]);
    msgpack_packer *pk = capw_pk(w);
    msgpack_pack_array(pk, 5);
    msgpack_pack_int(pk, 33);
    msgpack_pack_uint32(pk, n);
    msgpack_pack_uint32(pk, 5);
    msgpack_pack_bin(pk, tn);
    msgpack_pack_bin_body(pk, t, tn);
    msgpack_pack_bin(pk, on);
    msgpack_pack_bin_body(pk, o, on);
}
/* the chunk's last record: a REP whose others column claims more bytes than the payload has */
static void w_others_past_the_payload(struct capw *w)
{
    for (int i = 0; i < 5; i++) plain(w, &one[i]);
    msgpack_packer *pk = capw_pk(w);
    msgpack_pack_array(pk, 5);
    msgpack_pack_int(pk, 33);
    msgpack_pack_uint32(pk, 1);
    msgpack_pack_uint32(pk, 5);
    msgpack_pack_bin(pk, 1);
    msgpack_pack_bin_body(pk, "\0", 1);
    msgpack_pack_bin(pk, 200);
    msgpack_pack_bin_body(pk, "\0\0\0\0\0\0\0", 7);
}
static void w_n_65(struct capw *w)
{
    raw_rep(w, 65, "", 0, "", 0);
}
static void w_back_past(struct capw *w)
{
    for (int i = 0; i < 4; i++) plain(w, &one[i]);
    struct coded c[1] = {code(&two[0], 0, NULL)};
    rep(w, 1, 5, two, c, c);
}
static void w_times_short(struct capw *w) /* one COPY: 1 time, 7 others */
{
    raw_rep(w, 1, "", 0, "\0\0\0\0\0\0\0", 7);
}
static void w_others_long(struct capw *w)
{
    raw_rep(w, 1, "\0", 1, "\0\0\0\0\0\0\0\0", 8);
}
static void w_varint_65_bits(struct capw *w)
{
    raw_rep(w, 1, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 10, "\0\0\0\0\0\0\0", 7);
}
static void w_ref_past_times(struct capw *w) /* a STEP time 31 host times back, after 9 */
{
    for (int i = 0; i < 5; i++) plain(w, &one[i]);
    rep_two(w, 31 - 5);
}
static void w_refs_2_15(struct capw *w)
{
    for (int i = 0; i < 5; i++) plain(w, &one[i]);
    rep_two(w, 1u << 15);
}
static void w_copy_field(struct capw *w, int k, uint64_t v) /* a COPY's element k set to v */
{
    for (int i = 0; i < 5; i++) plain(w, &one[i]);
    struct coded ref = code(&one[4], 0, NULL), cur = code(&two[0], 0, NULL);
    ref.v[1] -= (uint64_t)one[2].v[6];
    cur.v[k] = v;
    rep(w, 1, 1, two, &cur, &ref);
}
static void w_kind_2_32(struct capw *w) /* the record it stands for breaks COPY's rules */
{
    w_copy_field(w, 4, 1ull << 32);
}
static void w_thread_65536(struct capw *w)
{
    w_copy_field(w, 2, 65536);
}
static void w_bytes_negative(struct capw *w)
{
    w_copy_field(w, 6, (uint64_t)-5);
}

static const struct bad bads[] = {
    {"no groupable record before in the chunk", "after 0 groupable", w_no_history},
    {"back 0", "REP of 1 records 0 back", w_back_0},
    {"n 0", "REP of 0 records", w_n_0},
    {"n 65", "REP of 65 records", w_n_65},
    {"back past the records before", "REP of 1 records 5 back, after 4", w_back_past},
    {"times ends early", "times column ends early", w_times_short},
    {"others too long", "bytes after its last value", w_others_long},
    {"others past the payload", "REP: [33, n, back, times, others] expected",
     w_others_past_the_payload},
    {"a varint above 64 bits", "times column ends early", w_varint_65_bits},
    {"a STEP time's ref past the host times", "refers to host time 31 of 9", w_ref_past_times},
    {"refs of 2^15 or more", "a STEP's refs", w_refs_2_15},
    {"a COPY kind of 2^32", "kind", w_kind_2_32},
    {"a COPY thread of 65536", "thread index 65536", w_thread_65536},
    {"a COPY bytes of -5", "bytes", w_bytes_negative},
};

Test(rep, every_rule_makes_the_chunk_bad)
{
    for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
        struct capw *w = v5();
        head(w, 1000);
        for (int k = 0; k < 5; k++) plain(w, &one[k]);
        capw_chunk_end(w);
        head(w, 1000);
        bads[i].write(w);
        struct got g;
        expect_bad_last_chunk(w, bads[i].what, "", bads[i].msg, 6, &g);
        got_free(&g);
        capw_free(w);
    }
}
