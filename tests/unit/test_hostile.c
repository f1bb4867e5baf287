/* Hostile and malformed payloads: each stops the reader at its chunk with a clean error, after
 * the records of the chunk before; no crash, no unbounded allocation (run under ASan). */
#include <criterion/criterion.h>
#include <string.h>

#include "capwriter.h"
#include "base/err.h"
#include "capture/reader.h"

static const uint32_t one[3] = {1, 1, 1};

/* Chunk 0: CHUNK, THREAD, NAME, LAUNCH. Chunk 1: whatever fill() writes. Chunk 2: CHUNK.
 * Returns what the reader ended with; *n gets the records delivered. */
static int run(void (*fill)(struct capw *), struct tkp_reader_err *e, int *n,
               struct tkp_reader_stats *st)
{
    struct capw *w = capw_new();
    size_t len;
    capw_chunk_begin(w, 0);
    capw_thread(w, 0, 1);
    capw_name(w, 0, "k0");
    capw_launch(w, 1, 0, 0, 0, 0, 1, one, one, 0);
    capw_chunk_end(w);
    capw_chunk_begin(w, 100);
    fill(w);
    size_t bad = capw_chunk_end(w);
    capw_chunk_begin(w, 0);
    capw_chunk_end(w);
    const uint8_t *d = capw_data(w, &len);
    FILE *f = tmpfile();
    fwrite(d, 1, len, f);
    rewind(f);
    struct tkp_reader *r;
    struct tkp_record rec;
    cr_assert_eq(tkp_reader_open_stream(f, &r, NULL, 0), 0);
    int end;
    *n = 0;
    while ((end = tkp_reader_next(r, &rec)) == 1)
        ++*n;
    memset(e, 0, sizeof(*e));
    if (tkp_reader_error(r)) {
        *e = *tkp_reader_error(r);
        cr_assert_eq(e->offset, bad, "the bad chunk's offset");
    }
    if (st) *st = *tkp_reader_stats(r);
    tkp_reader_close(r);
    capw_free(w);
    return end;
}

static void expect_bad(void (*fill)(struct capw *), const char *msg)
{
    struct tkp_reader_err e;
    int n;
    int end = run(fill, &e, &n, NULL);
    cr_assert_eq(end, TKP_ERR_RECORD, "end %d (%s)", end, e.msg);
    cr_assert_eq(n, 4, "records of chunk 0 only, got %d", n);
    cr_assert(strstr(e.msg, msg), "message '%s' lacks '%s'", e.msg, msg);
}

static void raw(struct capw *w, const char *bytes, size_t n)
{
    capw_payload_bytes(w, bytes, n);
}

static void wrong_type(struct capw *w)
{
    msgpack_packer *pk = capw_pk(w);
    msgpack_pack_array(pk, 14);
    for (int i = 0; i < 13; i++)
        if (i == 5)
            msgpack_pack_str_with_body(pk, "s", 1);
        else
            msgpack_pack_uint32(pk, i == 0 ? 10 : 1);
}
Test(hostile, wrong_element_type)
{
    expect_bad(wrong_type, "LAUNCH record: field 'stream'");
}

static void too_few(struct capw *w)
{
    msgpack_pack_array(capw_pk(w), 3);
    for (int i = 0; i < 3; i++)
        msgpack_pack_uint32(capw_pk(w), 10);
}
Test(hostile, too_few_fields)
{
    expect_bad(too_few, "LAUNCH record: 2 fields, expected 13");
}

static void huge_array(struct capw *w)
{
    raw(w, "\xdd\xff\xff\xff\xff\x0a\x01", 7);
}
Test(hostile, huge_array_count)
{
    expect_bad(huge_array, "? record: array longer than the payload");
}

static void huge_graph(struct capw *w)
{
    raw(w, "\x93\x0c\x07\xdd\xff\xff\xff\xff", 8);
}
Test(hostile, huge_graph_node_count)
{
    expect_bad(huge_graph, "GRAPH record: field 'nodes': array longer than the payload");
}

static void many_graph_nodes(struct capw *w)
{
    /* 70,000 real (empty) node arrays: more than the cap, and honest about their count */
    msgpack_packer *pk = capw_pk(w);
    msgpack_pack_array(pk, 3);
    msgpack_pack_uint32(pk, 12);
    msgpack_pack_uint32(pk, 7);
    msgpack_pack_array(pk, 70000);
    for (int i = 0; i < 70000; i++)
        msgpack_pack_array(pk, 0);
}
Test(hostile, graph_node_cap)
{
    expect_bad(many_graph_nodes, "70000 nodes, above the limit");
}

static void huge_string(struct capw *w)
{
    raw(w,
        "\x93\x01\x05\xdb\x7f\xff\xff\xff"
        "abc",
        11);
}
Test(hostile, huge_string_length)
{
    expect_bad(huge_string, "NAME record: field 'string': str longer than the payload");
}

static void deep(struct capw *w)
{
    /* an unknown type whose payload nests 200 arrays */
    raw(w, "\x92\x63", 2);
    for (int i = 0; i < 200; i++)
        raw(w, "\x91", 1);
    raw(w, "\x00", 1);
}
Test(hostile, deep_nesting)
{
    expect_bad(deep, "unreadable record of unknown type 99");
}

static void deep_meta(struct capw *w)
{
    raw(w, "\x92\x02\x81\xa1k", 5);
    for (int i = 0; i < 200; i++)
        raw(w, "\x81\xa1k", 3);
    raw(w, "\x00", 1);
}
Test(hostile, deep_meta)
{
    expect_bad(deep_meta, "META record: unreadable value of key 'k'");
}

static void big_thread(struct capw *w)
{
    capw_thread(w, 1u << 20, 5);
}
Test(hostile, thread_index_out_of_range)
{
    expect_bad(big_thread, "thread index 1048576");
}

static void neg_thread(struct capw *w)
{
    raw(w, "\x93\x03\xff\x05", 4);
}
Test(hostile, negative_thread)
{
    expect_bad(neg_thread, "THREAD record: field 'thread'");
}

static void neg_name(struct capw *w)
{
    raw(w, "\x93\x01\xd0\x80\xa1x", 6);
}
Test(hostile, negative_name_id)
{
    expect_bad(neg_name, "NAME record: field 'id'");
}

static void big_grid(struct capw *w)
{
    const uint32_t d[3] = {1, 1, 1};
    capw_launch(w, 1, 0, 0, 0, 0, 1, d, d, 0);
    /* patch: a grid dimension of 2^32 cannot come from CUDA */
    raw(w,
        "\x9e\x0a\x01\x00\x00\x00\x00\x01\xcf\x00\x00\x00\x01\x00\x00\x00\x00\x01\x01\x01\x01"
        "\x01\x00",
        23);
}
Test(hostile, grid_over_32_bits)
{
    expect_bad(big_grid, "field 'grid': 4294967296 does not fit");
}

static void not_array(struct capw *w)
{
    raw(w, "\x05", 1);
}
Test(hostile, top_level_not_array)
{
    expect_bad(not_array, "not an array (msgpack unsigned int)");
}

static void no_type(struct capw *w)
{
    raw(w, "\x91\xa1x", 3);
}
Test(hostile, record_type_not_int)
{
    expect_bad(no_type, "no record type");
}

static void second_chunk(struct capw *w)
{
    raw(w, "\x93\x00\x01\x00", 4);
}
Test(hostile, second_chunk_record)
{
    expect_bad(second_chunk, "a second CHUNK record");
}

static void truncated_payload(struct capw *w)
{
    raw(w, "\x9e\x0a\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\x01\xcf", 15);
}
Test(hostile, payload_ends_inside_record)
{
    expect_bad(truncated_payload,
               "LAUNCH record: field 'smem': unsigned int longer than the payload");
}

static void short_array(struct capw *w)
{
    raw(w, "\x9e\x0a\x01", 3);
}
Test(hostile, array_longer_than_payload)
{
    expect_bad(short_array, "? record: array longer than the payload");
}

static void invalid_byte(struct capw *w)
{
    raw(w, "\xc1", 1);
}
Test(hostile, invalid_msgpack_byte)
{
    expect_bad(invalid_byte, "not an array");
}

/* The first record must be CHUNK with the header's seq. */
static int run_first(void (*fill)(struct capw *), struct tkp_reader_err *e)
{
    struct capw *w = capw_new();
    size_t len;
    capw_chunk_open(w);
    fill(w);
    capw_chunk_end(w);
    const uint8_t *d = capw_data(w, &len);
    FILE *f = tmpfile();
    fwrite(d, 1, len, f);
    rewind(f);
    struct tkp_reader *r;
    struct tkp_record rec;
    cr_assert_eq(tkp_reader_open_stream(f, &r, NULL, 0), 0);
    int end = tkp_reader_next(r, &rec);
    *e = *tkp_reader_error(r);
    tkp_reader_close(r);
    capw_free(w);
    return end;
}

static void no_chunk_record(struct capw *w)
{
    capw_thread(w, 0, 1);
}
static void empty_payload(struct capw *w)
{
    (void)w;
}
static void wrong_seq(struct capw *w)
{
    raw(w, "\x93\x00\x04\x00", 4);
}

Test(hostile, chunk_record_first)
{
    struct tkp_reader_err e;
    cr_assert_eq(run_first(no_chunk_record, &e), TKP_ERR_RECORD);
    cr_assert_str_eq(e.msg, "first record is not CHUNK");
    cr_assert_eq(e.offset, 16);
    cr_assert_eq(run_first(empty_payload, &e), TKP_ERR_RECORD);
    cr_assert_str_eq(e.msg, "empty payload");
    cr_assert_eq(run_first(wrong_seq, &e), TKP_ERR_RECORD);
    cr_assert_str_eq(e.msg, "CHUNK record has seq 4, chunk header 0");
}

/* Things that are not errors. */
static void extras(struct capw *w)
{
    /* a LAUNCH with two fields a later writer appended, a NAME past the length cap, a name id
     * never defined, and a thread never mapped */
    msgpack_packer *pk = capw_pk(w);
    static char big[10000];
    memset(big, 'k', sizeof(big) - 1);
    capw_name(w, 1, big);
    msgpack_pack_array(pk, 16);
    msgpack_pack_uint32(pk, 10);
    for (int i = 0; i < 13; i++)
        msgpack_pack_uint32(pk, i == 1 ? 9 : 1); /* thread 9: unmapped */
    msgpack_pack_str_with_body(pk, "new", 3);
    msgpack_pack_map(pk, 0);
    capw_launch(w, 1, 0, 0, 77, 0, 1, one, one, 0);
}

Test(hostile, lenient_where_the_format_allows)
{
    struct tkp_reader_err e;
    struct tkp_reader_stats st;
    int n;
    int end = run(extras, &e, &n, &st);
    cr_assert_eq(end, 0, "end %d (%s)", end, e.msg);
    cr_assert_eq(n, 4 + 4 + 1);
    cr_assert_eq(st.missing_names, 1, "name 77: %llu", (unsigned long long)st.missing_names);
    cr_assert_eq(st.missing_threads, 2, "thread 9, and thread 0 in chunk 1");
}

Test(hostile, long_name_truncated)
{
    struct capw *w = capw_new();
    static char big[10000];
    size_t len;
    memset(big, 'k', sizeof(big) - 1);
    capw_chunk_begin(w, 0);
    capw_name(w, 1, big);
    capw_chunk_end(w);
    const uint8_t *d = capw_data(w, &len);
    FILE *f = tmpfile();
    fwrite(d, 1, len, f);
    rewind(f);
    struct tkp_reader *r;
    struct tkp_record rec;
    cr_assert_eq(tkp_reader_open_stream(f, &r, NULL, 0), 0);
    cr_assert_eq(tkp_reader_next(r, &rec), 1);
    cr_assert_eq(tkp_reader_next(r, &rec), 1);
    cr_assert_eq(rec.type, TKP_REC_NAME);
    cr_assert_eq(strlen(rec.name.str), TKP_NAME_MAX - 1);
    tkp_reader_close(r);
    capw_free(w);
}

/* Garbage after the last chunk that cannot be a chunk header is corruption, not a torn tail. */
Test(hostile, garbage_tail)
{
    struct capw *w = capw_new();
    size_t len;
    capw_chunk_begin(w, 0);
    size_t end0 = (capw_chunk_end(w), capw_data(w, &len), len);
    capw_bytes(w, "\0\0\0\0\0", 5);
    const uint8_t *d = capw_data(w, &len);
    FILE *f = tmpfile();
    fwrite(d, 1, len, f);
    rewind(f);
    struct tkp_reader *r;
    struct tkp_record rec;
    cr_assert_eq(tkp_reader_open_stream(f, &r, NULL, 0), 0);
    cr_assert_eq(tkp_reader_next(r, &rec), 1);
    cr_assert_eq(tkp_reader_next(r, &rec), TKP_ERR_CHUNK);
    cr_assert_eq(tkp_reader_error(r)->offset, end0);
    cr_assert_str_eq(tkp_reader_error(r)->msg, "bad chunk magic");
    tkp_reader_close(r);
    capw_free(w);
}

/* Every byte of a payload holding every record type, flipped four ways: the reader must end
 * (good records or a clean error) without a crash or a sanitizer report. A cheap stand-in for
 * the fuzz target until there is one. */
static void every_type(struct capw *w)
{
    const struct capw_node nodes[2] = {
        {.node = 0, .type = 0, .name = 1, .grid = {1, 1, 1}, .block = {32, 1, 1}},
        {.node = 1, .type = 1, .name = 1, .ndeps = 1, .deps = {0}},
    };
    capw_name(w, 1, "k");
    capw_meta(w, "p", 1);
    capw_thread(w, 0, 9);
    capw_launch(w, 5, 0, 0, 1, 0x7f, 1, one, one, 0);
    capw_graph(w, 3, 2, nodes);
    capw_graph_launch(w, 5, 0, 0, 3, 0x7f, 5);
    capw_copy(w, -3, 0, 0, 0, 2, 4, 0x7f, 3);
    capw_sync(w, 1, 0, 0, 1, 0xe, 10);
    capw_event_record(w, 1, 0, 0, 0xe, 0x7f);
    capw_stream_wait(w, 1, 0, 0, 0x7f, 0xe);
    capw_nvtx(w, 1, 0, 0, 0, 1, 1);
    capw_marker(w, 1, 0, 0, 0, 1);
    capw_step(w, 0, 0, 0, 1, 2, 3, 0, 1, 1, 1);
    capw_loss(w, 0, 1);
}

Test(hostile, payload_byte_flips)
{
    static const uint8_t flips[] = {0x01, 0x10, 0x80, 0xff};
    struct capw *ref = capw_new();
    size_t plen;
    capw_chunk_begin(ref, 1000);
    every_type(ref);
    capw_payload(ref, &plen);
    for (size_t i = 0; i < plen; i++) {
        for (size_t k = 0; k < sizeof(flips); k++) {
            struct capw *w = capw_new();
            size_t len, n;
            capw_chunk_begin(w, 1000);
            every_type(w);
            capw_payload(w, &n)[i] ^= flips[k];
            capw_chunk_end(w);
            const uint8_t *d = capw_data(w, &len);
            FILE *f = tmpfile();
            fwrite(d, 1, len, f);
            rewind(f);
            struct tkp_reader *r;
            struct tkp_record rec;
            cr_assert_eq(tkp_reader_open_stream(f, &r, NULL, 0), 0);
            int end, count = 0;
            while ((end = tkp_reader_next(r, &rec)) == 1)
                count++;
            cr_assert(end == 0 || end == TKP_ERR_RECORD, "byte %zu ^ %#x: end %d", i, flips[k],
                      end);
            cr_assert(end == 0 || count == 0, "a bad chunk delivers nothing");
            tkp_reader_close(r);
            capw_free(w);
        }
    }
    capw_free(ref);
}

/* LOSS (records.def, head ANYTHREAD): its thread is below the limit or 4294967295, nothing in
 * between, on every path. Launches around it give the fast paths room to take it: the checking
 * pass must refuse it before the launch ahead of it is delivered. */
static void loss_fill(struct capw *w, uint32_t thread)
{
    capw_thread(w, 0, 1);
    capw_launch(w, 1, 0, 0, 0, 0, 1, one, one, 0);
    capw_loss(w, thread, 9);
    for (int i = 0; i < 4; i++)
        capw_launch(w, 1, 0, 0, 0, 0, 1, one, one, 0);
}
static void loss_thread_above(struct capw *w)
{
    loss_fill(w, 70000);
}
static void loss_thread_none(struct capw *w)
{
    loss_fill(w, 0xffffffffu);
}
Test(hostile, loss_thread_none_or_below_the_limit)
{
    expect_bad(loss_thread_above, "thread index 70000 above the limit 65535");
    struct tkp_reader_err e;
    int n;
    cr_assert_eq(run(loss_thread_none, &e, &n, NULL), 0, "%s", e.msg);
    cr_assert_eq(n, 4 + 8 + 1, "chunk 0, chunk 1's CHUNK and seven records, chunk 2's CHUNK: %d",
                 n);
}
