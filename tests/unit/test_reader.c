/* Reader tests: every record type round-trips, times and names resolve per chunk, and broken or
 * hostile captures stop cleanly at the right chunk having delivered everything before it. */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "capwriter.h"
#include "base/err.h"
#include "golden.h"
#include "capture/reader.h"

#define MAXREC 64

struct got {
    int n;   /* records delivered */
    int end; /* the final tkp_reader_next() result */
    struct tkp_record rec[MAXREC];
    struct tkp_reader_err err;
    struct tkp_reader_stats stats;
    char names[MAXREC][64]; /* launch/nvtx/name/meta program strings, copied while valid */
    char host[64];          /* META hostname */
};

static int open_bytes(const uint8_t *p, size_t n, struct tkp_reader **r, char *why, size_t len)
{
    FILE *f = tmpfile();
    cr_assert(f);
    cr_assert_eq(fwrite(p, 1, n, f), n);
    rewind(f);
    return tkp_reader_open_stream(f, r, why, len);
}

/* Reads the first n bytes of w's file into g; returns the open result. */
static int read_prefix(struct capw *w, size_t n, struct got *g)
{
    size_t len;
    const uint8_t *d = capw_data(w, &len);
    struct tkp_reader *r;
    char why[256];
    memset(g, 0, sizeof(*g));
    int err = open_bytes(d, n < len ? n : len, &r, why, sizeof(why));
    if (err) return err;
    struct tkp_record rec;
    while ((g->end = tkp_reader_next(r, &rec)) == 1) {
        cr_assert_lt(g->n, MAXREC);
        const char *s = rec.type == TKP_REC_LAUNCH ? rec.launch.name
                        : rec.type == TKP_REC_NVTX ? rec.nvtx.name
                        : rec.type == TKP_REC_NAME ? rec.name.str
                        : rec.type == TKP_REC_META ? rec.meta.program
                                                   : "";
        if (rec.type == TKP_REC_META) snprintf(g->host, sizeof(g->host), "%s", rec.meta.hostname);
        snprintf(g->names[g->n], sizeof(g->names[0]), "%s", s);
        g->rec[g->n++] = rec;
    }
    cr_assert_eq(tkp_reader_next(r, &rec), g->end, "the stop is sticky");
    if (tkp_reader_error(r))
        g->err = *tkp_reader_error(r);
    else
        cr_assert_eq(g->end, 0);
    g->stats = *tkp_reader_stats(r);
    tkp_reader_close(r);
    return 0;
}

static int read_all(struct capw *w, struct got *g)
{
    return read_prefix(w, SIZE_MAX, g);
}

static const struct tkp_record *find(struct got *g, enum tkp_rec t, int nth, int *idx)
{
    for (int i = 0; i < g->n; i++)
        if (g->rec[i].type == t && nth-- == 0) {
            if (idx) *idx = i;
            return &g->rec[i];
        }
    cr_assert_fail("record type %d #%d missing", t, nth);
    return NULL;
}

Test(reader, golden_round_trip)
{
    struct capw *w = capw_new();
    size_t off[GOLDEN_CHUNKS];
    struct got g;
    golden_build(w, off);
    cr_assert_eq(read_all(w, &g), 0);
    cr_assert_eq(g.end, 0);
    cr_assert_eq(g.n, GOLDEN_RECORDS);
    cr_assert_eq(g.stats.chunks, 3);
    cr_assert_eq(g.stats.unknown_records, 1);
    cr_assert_eq(g.stats.missing_names, 0);
    cr_assert_eq(g.stats.missing_threads, 0);

    const struct tkp_record *r = find(&g, TKP_REC_CHUNK, 1, NULL);
    cr_assert_eq(r->chunk.seq, 1);
    cr_assert_eq(r->chunk.base_ns, 2000000);
    cr_assert_eq(r->offset, off[1]);

    int i;
    r = find(&g, TKP_REC_META, 0, &i);
    cr_assert_str_eq(g.names[i], "minillm");
    cr_assert_str_eq(g.host, "testhost");
    cr_assert_eq(r->meta.pid, 4242);

    r = find(&g, TKP_REC_THREAD, 1, NULL);
    cr_assert_eq(r->thread, 1);
    cr_assert_eq(r->tid, 5002);

    r = find(&g, TKP_REC_LAUNCH, 1, &i);
    cr_assert_str_eq(g.names[i], "attn \"fwd\"\\v2");
    cr_assert_eq(r->host_ns, 1000175);
    cr_assert_eq(r->tid, 5001);
    cr_assert_eq(r->step, 0);
    cr_assert_eq(r->launch.stream, 0x7f00aa);
    cr_assert_eq(r->launch.via, TKP_VIA_DRIVER | TKP_VIA_PTSZ);
    cr_assert_eq(r->launch.grid[0], 4);
    cr_assert_eq(r->launch.grid[1], 2);
    cr_assert_eq(r->launch.block[0], 128);
    cr_assert_eq(r->launch.smem, 49152);

    r = find(&g, TKP_REC_NVTX, 0, &i);
    cr_assert_eq(r->host_ns, 1000100, "negative dt subtracts");
    cr_assert_eq(r->tid, 5002);
    cr_assert_eq(r->nvtx.kind, TKP_NVTX_RANGE_START);
    cr_assert_eq(r->nvtx.range_id, 9);
    cr_assert_str_eq(g.names[i], "decode");

    r = find(&g, TKP_REC_COPY, 0, NULL);
    cr_assert_eq(r->host_ns, 1000300);
    cr_assert_eq(r->copy.dir, TKP_DIR_DTOH);
    cr_assert_eq(r->copy.bytes, 4);
    cr_assert_eq(r->copy.flags, TKP_COPY_ASYNC | TKP_COPY_PINNED);

    r = find(&g, TKP_REC_EVENT_RECORD, 0, NULL);
    cr_assert_eq(r->host_ns, 1000310);
    cr_assert_eq(r->event_record.event, 0xe1);
    r = find(&g, TKP_REC_STREAM_WAIT, 0, NULL);
    cr_assert_eq(r->host_ns, 1000315);
    cr_assert_eq(r->stream_wait.stream, 0x7f00bb);
    cr_assert_eq(r->stream_wait.event, 0xe1);
    r = find(&g, TKP_REC_SYNC, 0, NULL);
    cr_assert_eq(r->host_ns, 1000320);
    cr_assert_eq(r->sync.kind, TKP_SYNC_EVENT);
    cr_assert_eq(r->sync.wait_ns, 1000);

    r = find(&g, TKP_REC_STEP, 1, NULL);
    cr_assert_eq(r->step, 1);
    cr_assert_eq(r->tid, 5001);
    cr_assert_eq(r->step_rec.kind, TKP_STEP_TOKEN);
    cr_assert_eq(r->step_rec.begin_ns, 2000000);
    cr_assert_eq(r->step_rec.mark_ns, 2001100);
    cr_assert_eq(r->step_rec.end_ns, 2006150);
    cr_assert_eq(r->step_rec.closed_by, TKP_CLOSE_STREAM_SYNC);
    cr_assert_eq(r->step_rec.launches, 1);
    cr_assert_eq(r->step_rec.graph_launches, 1);
    cr_assert_eq(r->step_rec.copies, 1);

    r = find(&g, TKP_REC_GRAPH_LAUNCH, 0, NULL);
    cr_assert_eq(r->host_ns, 2000000);
    cr_assert_eq(r->graph_launch.graph, 7);
    cr_assert_eq(r->graph_launch.via, TKP_VIA_GRAPH_RT);

    r = find(&g, TKP_REC_MARKER, 1, NULL);
    cr_assert_eq(r->host_ns, 2001160);
    cr_assert_eq(r->marker.kind, TKP_MARK_STEP_END);
    cr_assert_eq(r->marker.value, -3);

    r = find(&g, TKP_REC_LOSS, 2, NULL);
    cr_assert_eq(r->tid, 5002);
    cr_assert_eq(r->loss.dropped, 2);

    r = find(&g, TKP_REC_LAUNCH, 3, NULL);
    cr_assert_eq(r->host_ns, 2002000, "chunk 2 restarts from its own base");
    cr_assert_eq(r->tid, 5002);
    capw_free(w);
}

/* GRAPH nodes point into reader buffers: check them while the record is current. */
Test(reader, graph_nodes)
{
    struct capw *w = capw_new();
    size_t off[GOLDEN_CHUNKS], len;
    golden_build(w, off);
    const uint8_t *d = capw_data(w, &len);
    struct tkp_reader *r;
    struct tkp_record rec;
    int seen = 0;
    cr_assert_eq(open_bytes(d, len, &r, NULL, 0), 0);
    while (tkp_reader_next(r, &rec) == 1) {
        if (rec.type != TKP_REC_GRAPH) continue;
        seen++;
        cr_assert_eq(rec.graph.graph, 7);
        cr_assert_eq(rec.graph.nnodes, 3);
        cr_assert_str_eq(rec.graph.nodes[0].name, "graph_kernel");
        cr_assert_str_eq(rec.graph.nodes[1].name, "sgemm_128x64");
        cr_assert_eq(rec.graph.nodes[1].block[0], 64);
        cr_assert_eq(rec.graph.nodes[0].ndeps, 0);
        cr_assert_eq(rec.graph.nodes[2].type, TKP_NODE_MEMCPY);
        cr_assert_eq(rec.graph.nodes[2].ndeps, 2);
        cr_assert_eq(rec.graph.nodes[2].deps[0], 0);
        cr_assert_eq(rec.graph.nodes[2].deps[1], 1);
    }
    cr_assert_eq(seen, 1);
    tkp_reader_close(r);
    capw_free(w);
}

Test(reader, dt_deltas)
{
    const uint32_t d[3] = {1, 1, 1};
    struct capw *w = capw_new();
    struct got g;
    capw_chunk_begin(w, 10000);
    capw_thread(w, 0, 1);
    capw_launch(w, 0, 0, 0, 0, 0, 1, d, d, 0);          /* 10000 */
    capw_sync(w, -9999, 0, 0, 0, 0, 0);                 /* 1 */
    capw_copy(w, 4000000000000ll, 0, 0, 0, 0, 0, 0, 0); /* wide dt */
    capw_marker(w, -4000000000000ll, 0, 0, 0, 0);       /* back to 1 */
    capw_chunk_end(w);
    cr_assert_eq(read_all(w, &g), 0);
    cr_assert_eq(g.n, 6);
    cr_assert_eq(g.rec[2].host_ns, 10000);
    cr_assert_eq(g.rec[3].host_ns, 1);
    cr_assert_eq(g.rec[4].host_ns, 4000000000001ull);
    cr_assert_eq(g.rec[5].host_ns, 1);
    capw_free(w);
}

Test(reader, names_are_per_chunk_and_ids_stable)
{
    const uint32_t d[3] = {1, 1, 1};
    struct capw *w = capw_new();
    struct got g;
    capw_chunk_begin(w, 0);
    capw_thread(w, 0, 1);
    capw_name(w, 5, "kern_a");
    capw_launch(w, 1, 0, 0, 5, 0, 1, d, d, 0);
    capw_chunk_end(w);
    capw_chunk_begin(w, 0); /* uses 5 without defining it, and 6 before defining it */
    capw_thread(w, 0, 1);
    capw_launch(w, 1, 0, 0, 5, 0, 1, d, d, 0);
    capw_launch(w, 1, 0, 0, 6, 0, 1, d, d, 0);
    capw_name(w, 6, "kern_b");
    capw_launch(w, 1, 0, 0, 6, 0, 1, d, d, 0);
    capw_chunk_end(w);
    capw_chunk_begin(w, 0);
    capw_thread(w, 0, 1);
    capw_name(w, 5, "kern_a");
    capw_launch(w, 1, 0, 0, 5, 0, 1, d, d, 0);
    capw_chunk_end(w);
    cr_assert_eq(read_all(w, &g), 0);
    const char *want[] = {"kern_a", "?", "?", "kern_b", "kern_a"};
    int k = 0;
    const char *first = NULL, *last = NULL;
    for (int i = 0; i < g.n; i++) {
        if (g.rec[i].type != TKP_REC_LAUNCH) continue;
        cr_assert_str_eq(g.names[i], want[k], "launch %d: %s", k, g.names[i]);
        if (k == 0) first = g.rec[i].launch.name;
        if (k == 4) last = g.rec[i].launch.name;
        k++;
    }
    cr_assert_eq(k, 5);
    cr_assert_eq(first, last, "a stable id keeps its string (pointer valid until close)");
    cr_assert_eq(g.stats.missing_names, 2);
    capw_free(w);
}

Test(reader, threads_are_per_chunk)
{
    struct capw *w = capw_new();
    struct got g;
    capw_chunk_begin(w, 0);
    capw_thread(w, 3, 777);
    capw_loss(w, 3, 1);
    capw_chunk_end(w);
    capw_chunk_begin(w, 0);
    capw_loss(w, 3, 2); /* not mapped in this chunk */
    capw_chunk_end(w);
    cr_assert_eq(read_all(w, &g), 0);
    cr_assert_eq(g.rec[2].tid, 777);
    cr_assert_eq(g.rec[4].tid, 0);
    cr_assert_eq(g.rec[4].thread, 3);
    cr_assert_eq(g.stats.missing_threads, 1);
    capw_free(w);
}

/* A capture cut at every byte: exactly the whole chunks before the cut, and a torn tail at the
 * start of the cut chunk (none when the cut falls on a chunk boundary). */
Test(reader, cut_at_every_byte)
{
    struct capw *w = capw_new();
    size_t off[GOLDEN_CHUNKS], len;
    int per_chunk[GOLDEN_CHUNKS] = {0};
    struct got g;
    golden_build(w, off);
    capw_data(w, &len);
    cr_assert_eq(read_all(w, &g), 0);
    for (int i = 0; i < g.n; i++)
        for (int c = 0; c < GOLDEN_CHUNKS; c++)
            per_chunk[c] += g.rec[i].offset == off[c];
    for (size_t cut = 0; cut <= len; cut++) {
        int err = read_prefix(w, cut, &g);
        if (cut < TKP_FILE_HEADER_LEN) {
            cr_assert(err == TKP_ERR_HEADER || err == TKP_ERR_NOT_CAPTURE, "cut %zu", cut);
            continue;
        }
        cr_assert_eq(err, 0, "cut %zu", cut);
        int whole = 0, expect = 0;
        while (whole < GOLDEN_CHUNKS && (whole + 1 < GOLDEN_CHUNKS ? off[whole + 1] : len) <= cut)
            expect += per_chunk[whole++];
        cr_assert_eq(g.n, expect, "cut %zu: %d records, expected %d", cut, g.n, expect);
        cr_assert_eq(g.stats.chunks, (uint64_t)whole);
        if (whole < GOLDEN_CHUNKS && cut > off[whole]) {
            cr_assert_eq(g.end, TKP_ERR_TORN, "cut %zu: end %d (%s)", cut, g.end, g.err.msg);
            cr_assert_eq(g.err.offset, off[whole], "cut %zu", cut);
            cr_assert_str_eq(g.err.msg, "incomplete chunk");
        } else {
            cr_assert_eq(g.end, 0, "cut %zu at a boundary: end %d (%s)", cut, g.end, g.err.msg);
        }
    }
    capw_free(w);
}

/* chunk 0 good, chunk 1 written with `corrupt`, chunk 2 good: stop at chunk 1. */
static void corrupt_middle(unsigned corrupt, int code, const char *msg)
{
    const uint32_t d[3] = {1, 1, 1};
    struct capw *w = capw_new();
    struct got g;
    size_t bad;
    capw_chunk_begin(w, 0);
    capw_thread(w, 0, 1);
    capw_launch(w, 1, 0, 0, 0, 0, 1, d, d, 0);
    capw_chunk_end(w);
    capw_chunk_begin(w, 0);
    capw_thread(w, 0, 1);
    for (int i = 0; i < 50; i++)
        capw_launch(w, 1, 0, 0, 0, 0, 1, d, d, i);
    bad = capw_chunk_end_ex(w, corrupt);
    capw_chunk_begin(w, 0);
    capw_launch(w, 1, 0, 0, 0, 0, 1, d, d, 0);
    capw_chunk_end(w);
    cr_assert_eq(read_all(w, &g), 0);
    cr_assert_eq(g.n, 3, "corrupt %#x: %d records", corrupt, g.n);
    cr_assert_eq(g.end, code, "corrupt %#x: end %d (%s)", corrupt, g.end, g.err.msg);
    cr_assert_eq(g.err.offset, bad);
    cr_assert(strstr(g.err.msg, msg), "corrupt %#x: message '%s'", corrupt, g.err.msg);
    capw_free(w);
}

Test(reader, corrupt_chunk_in_the_middle)
{
    corrupt_middle(CAPW_BAD_MAGIC, TKP_ERR_CHUNK, "bad chunk magic");
    corrupt_middle(CAPW_BAD_ZSTD, TKP_ERR_CHUNK, "zstd");
    corrupt_middle(CAPW_BAD_RAWLEN, TKP_ERR_CHUNK, "raw_len");
    corrupt_middle(CAPW_SEQ_SKIP, TKP_ERR_CHUNK, "seq 2, expected 1");
    corrupt_middle(CAPW_NO_CONTENT_SIZE, TKP_ERR_CHUNK, "content size");
    corrupt_middle(CAPW_HUGE_LEN, TKP_ERR_CHUNK, "64 MiB");
}

static int open_header(const void *h, size_t n, char *why, size_t len)
{
    struct tkp_reader *r = NULL;
    int err = open_bytes(h, n, &r, why, len);
    cr_assert_eq(!!r, !err);
    tkp_reader_close(r);
    return err;
}

Test(reader, bad_header)
{
    char why[256];
    uint8_t h[48] = "\x89TKP\r\n\x1a\n\x01\x00\x00\x00\x10\x00\x00\x00";
    cr_assert_eq(open_header(h, 16, why, sizeof(why)), 0);
    cr_assert_eq(open_header(h, 0, why, sizeof(why)), TKP_ERR_NOT_CAPTURE);
    cr_assert_eq(open_header(h, 12, why, sizeof(why)), TKP_ERR_HEADER);
    cr_assert_str_eq(why, "capture header cut short (12 of 16 bytes)");
    cr_assert_eq(open_header("GIF89a..........", 16, why, sizeof(why)), TKP_ERR_NOT_CAPTURE);
    cr_assert_str_eq(why, "not a tokprof capture (bad magic)");
    h[8] = 2; /* v6 (GPU templates), v5 (REP), v4 (repeating runs), v3 (runs), v2 (templates) and v1 are all read */
    cr_assert_eq(open_header(h, 16, why, sizeof(why)), 0);
    h[8] = 3;
    cr_assert_eq(open_header(h, 16, why, sizeof(why)), 0);
    h[8] = 4;
    cr_assert_eq(open_header(h, 16, why, sizeof(why)), 0);
    h[8] = 5;
    cr_assert_eq(open_header(h, 16, why, sizeof(why)), 0);
    h[8] = 6;
    cr_assert_eq(open_header(h, 16, why, sizeof(why)), 0);
    h[8] = 7;
    cr_assert_eq(open_header(h, 16, why, sizeof(why)), TKP_ERR_VERSION);
    cr_assert_str_eq(why, "capture format version 7, this tokprof reads versions 1 to 6");
    h[8] = 1;
    h[12] = 8;
    cr_assert_eq(open_header(h, 16, why, sizeof(why)), TKP_ERR_HEADER);
    h[12] = 32; /* a longer header is skipped... */
    cr_assert_eq(open_header(h, 32, why, sizeof(why)), 0);
    cr_assert_eq(open_header(h, 20, why, sizeof(why)), TKP_ERR_HEADER); /* ...when all there */
}

Test(reader, longer_header_is_skipped)
{
    struct capw *w = capw_new_bare();
    struct got g;
    uint8_t h[24] = "\x89TKP\r\n\x1a\n\x01\x00\x01\x00\x18\x00\x00\x00zzzzzzzz";
    capw_bytes(w, h, sizeof(h));
    capw_chunk_begin(w, 5);
    capw_chunk_end(w);
    cr_assert_eq(read_all(w, &g), 0);
    cr_assert_eq(g.n, 1);
    cr_assert_eq(g.end, 0);
    cr_assert_eq(g.rec[0].chunk.base_ns, 5);
    capw_free(w);
}

Test(reader, missing_file)
{
    struct tkp_reader *r;
    char why[256];
    cr_assert_eq(tkp_reader_open("/nonexistent/x.tokprof", &r, why, sizeof(why)), TKP_ERR_IO);
    cr_assert_null(r);
    cr_assert_str_eq(why, "No such file or directory");
}
