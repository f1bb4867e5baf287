/* The flight recorder: the last TOKPROF_FLIGHT_BEFORE_S seconds of compressed chunks in memory,
 * written out as a snapshot file when a trigger fires.
 *
 * Memory: the ring holds whole zstd frames exactly as the writer produced them, evicting the
 * oldest when a chunk is older than twice the before-window (plus one second of slack; see
 * evict()) or when the ring would pass TOKPROF_FLIGHT_MB. Steady state is therefore
 * min(TOKPROF_FLIGHT_MB, the compressed bytes of 2 x BEFORE_S + 1 seconds). A snapshot in progress
 * adds one chunk's worth of scratch (decompressed payload and its recompressed frame, a few MiB at
 * most), freed when it ends.
 *
 * A snapshot file (<program>.<pid>.snap<K>.tokprof, header flag TKP_FILE_SNAPSHOT) is a capture
 * like any other: chunk 0 holds CHUNK and META (with a "snapshot" key saying why and when), then
 * the retained chunks whose end is within BEFORE_S of the trigger, then the chunks of the next
 * AFTER_S seconds as the writer produces them. Chunks are self-contained, so each decodes on its
 * own, and they are written byte for byte as the writer made them: they keep the seq the writer
 * gave them (the process's chunk count, from 1), which is why FORMAT.md lets a snapshot's seq
 * increase by more than one. Renumbering would mean decompressing and recompressing every chunk
 * on the writer thread as the incident unfolds — ~200 ms of an eager decode loop's 10 s, during
 * which the rings would fill and drop exactly the records the snapshot is for. */
#include <errno.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "core/config.h"
#include "core/log.h"
#include "gpu/activity.h"
#include "sink/file.h"
#include "sink/flight.h"
#include "sink/trigger.h"
#include "tokprof/format.h"

#define AGE_SLACK_NS 1000000000ull

struct fchunk {
    unsigned char *frame;
    uint32_t zn, raw, seq;
    uint64_t t_begin, t_end;
};

static struct {
    struct fchunk *q; /* circular: head is the oldest */
    uint32_t cap, head, n;
    uint64_t bytes, bytes_peak;
    uint64_t evicted; /* chunks dropped for the memory cap while still inside the window */
    /* the snapshot in progress */
    int fd;
    uint32_t seq;
    uint64_t until_ns;
    unsigned index; /* next snapshot's K */
    char path[PATH_MAX];
    /* triggers */
    int have_last;
    uint64_t last_ns;
    unsigned triggers, suppressed;
    unsigned skipped; /* triggers taken while free space was under the floor */
    /* what META says about the snapshot being started */
    int building_meta, meta_kind;
    char meta_why[96];
    uint64_t meta_at;
    tkp_meta_payload_fn meta; /* the writer's META chunk payload */
    uint32_t put_seq;         /* seq of the chunk being made: the process's chunk count, from 1 */
    char dir[PATH_MAX];
} flight = {.fd = -1};

static void pop_oldest(void)
{
    struct fchunk *c = &flight.q[flight.head];
    flight.bytes -= c->zn;
    free(c->frame);
    c->frame = NULL;
    flight.head = (flight.head + 1) % flight.cap;
    flight.n--;
}

/* Evicts by age; `need` more bytes must fit under the cap. A step trigger fires at the end of the
 * slow step and its window is measured from the step's start: twice the window is kept, so a slow
 * step as long as BEFORE_S still gets all of its before-window. */
static void evict(uint64_t now, uint64_t need)
{
    while (flight.n) {
        struct fchunk *c = &flight.q[flight.head];
        int old = c->t_end + 2 * tkp_prod.before_ns + AGE_SLACK_NS < now;
        int over = flight.bytes + need > tkp_prod.flight_bytes;
        if (!old && !over) break;
        if (!old) flight.evicted++;
        pop_oldest();
    }
}

static int push(const void *frame, size_t zn, uint32_t raw, uint32_t seq, uint64_t t_begin,
                uint64_t t_end)
{
    if (zn > tkp_prod.flight_bytes) {
        flight.evicted++;
        return 0;
    }
    if (flight.n == flight.cap) {
        uint32_t nc = flight.cap ? flight.cap * 2 : 64;
        struct fchunk *q = malloc(nc * sizeof *q);
        if (!q) return -1;
        for (uint32_t i = 0; i < flight.n; i++) q[i] = flight.q[(flight.head + i) % flight.cap];
        free(flight.q);
        flight.q = q;
        flight.cap = nc;
        flight.head = 0;
    }
    unsigned char *copy = malloc(zn);
    if (!copy) return -1;
    memcpy(copy, frame, zn);
    flight.q[(flight.head + flight.n) % flight.cap] =
        (struct fchunk){copy, (uint32_t)zn, raw, seq, t_begin, t_end};
    flight.n++;
    flight.bytes += zn;
    if (flight.bytes > flight.bytes_peak) flight.bytes_peak = flight.bytes;
    return 0;
}

/* ---- the sink -------------------------------------------------------------------------------- */

static int flight_open(tkp_meta_payload_fn meta)
{
    if (tkp_file_open_dir()) return -1;
    /* Nothing is written until a trigger: check now that a snapshot could be, so that a bad
     * directory is one warning at start rather than a surprise at the first incident. */
    if (tkp_file_dir_writable()) {
        tkp_warn("cannot write in %s: %s; capture off, the program is unaffected",
                 tkp_cfg.out_dir, strerror(errno));
        return -1;
    }
    snprintf(flight.dir, sizeof flight.dir, "%s", tkp_cfg.out_dir);
    flight.meta = meta;
    tkp_trigger_start();
    return 0;
}

static uint32_t flight_chunk_begin(uint32_t gseq, int *first)
{
    *first = 0;
    /* The process's chunk count, from 1 (a snapshot's META chunk is 0). */
    return flight.put_seq = gseq + 1;
}

static const char *flight_path(void)
{
    return flight.dir;
}

/* ---- snapshot files -------------------------------------------------------------------------- */

/* Appends one chunk, as it is, to the snapshot. */
static int write_chunk(const void *frame, uint32_t zn, uint32_t raw, uint32_t seq)
{
    unsigned char hdr[TKP_CHUNK_HEADER_LEN];
    tkp_file_chunk_header(hdr, zn, raw, seq);
    if (tkp_file_write(flight.fd, hdr, sizeof hdr) || tkp_file_write(flight.fd, frame, zn))
        return -1;
    flight.seq++;
    return 0;
}

/* The snapshot's chunk 0: CHUNK (seq 0) and META, compressed like the writer's chunks. */
static int write_meta(void)
{
    size_t n = 0;
    void *raw = flight.meta ? flight.meta(&n) : NULL;
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    size_t cap = ZSTD_compressBound(n);
    void *z = malloc(cap);
    int rc = -1;
    errno = ENOMEM;
    if (raw && cctx && z) {
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, 3);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
        size_t zn = ZSTD_compress2(cctx, z, cap, raw, n);
        if (!ZSTD_isError(zn)) rc = write_chunk(z, (uint32_t)zn, (uint32_t)n, 0);
    }
    free(z);
    ZSTD_freeCCtx(cctx);
    free(raw);
    return rc;
}

static void snapshot_end(void)
{
    if (flight.fd < 0) return;
    close(flight.fd);
    flight.fd = -1;
    tkp_debug("snapshot %s: %u chunks", flight.path, flight.seq);
}

static int snapshot_fail(void)
{
    int e = errno;
    if (flight.fd >= 0) close(flight.fd);
    flight.fd = -1;
    tkp_file_fail(flight.path, e);
    return -1;
}

static int snapshot_begin(int kind, uint64_t at_ns, const char *why)
{
    /* Under the free-space floor no snapshot is written; the ring goes on, so the next trigger
     * after space is freed has its before-window. */
    if (tkp_file_low_space(0, "no snapshot is written while it lasts")) {
        flight.skipped++;
        return 0;
    }
    flight.fd = tkp_file_create(TKP_OUT_SNAPSHOT, flight.index++, TKP_FILE_SNAPSHOT, flight.path,
                                sizeof flight.path);
    if (flight.fd < 0) return snapshot_fail();
    flight.seq = 0;
    flight.meta_kind = kind;
    flight.meta_at = at_ns;
    snprintf(flight.meta_why, sizeof flight.meta_why, "%s", why);
    flight.building_meta = 1;
    int rc = write_meta();
    flight.building_meta = 0;
    if (rc) return snapshot_fail();
    uint64_t from = at_ns > tkp_prod.before_ns ? at_ns - tkp_prod.before_ns : 0;
    for (uint32_t i = 0; i < flight.n; i++) {
        struct fchunk *c = &flight.q[(flight.head + i) % flight.cap];
        if (c->t_end < from) continue;
        if (write_chunk(c->frame, c->zn, c->raw, c->seq)) return snapshot_fail();
    }
    flight.until_ns = at_ns + tkp_prod.after_ns;
    tkp_gpu_arm(0); /* GPU time for the steps after the incident, where CUPTI is on */
    tkp_debug("snapshot %s begins: %s (%s)", flight.path, tkp_trigger_name(kind), why);
    return 0;
}

static int flight_put(const void *frame, size_t zn, uint32_t raw, uint64_t t_begin, uint64_t t_end)
{
    if (tkp_file_failed()) return -1;
    tkp_file_test_delay();
    uint32_t seq = flight.put_seq;
    if (flight.fd >= 0) {
        /* The chunk that holds the trigger is usually still open when the trigger is taken: it
         * arrives here, after the snapshot began, with everything up to AFTER_S after it. The
         * floor cuts the after-window short; what was written decodes. */
        if (tkp_file_low_space(zn, "the snapshot ends here"))
            snapshot_end();
        else if (write_chunk(frame, (uint32_t)zn, raw, seq))
            return snapshot_fail();
        else if (t_end >= flight.until_ns)
            snapshot_end();
    }
    evict(t_end, zn);
    if (push(frame, zn, raw, seq, t_begin, t_end))
        flight.evicted++; /* out of memory: the ring is shorter */
    return 0;
}

static void flight_poll(uint64_t now)
{
    if (tkp_file_failed()) return;
    char why[96];
    uint64_t at = now;
    unsigned merged = 0;
    int kind = tkp_trigger_take(now, &at, why, sizeof why, &merged);
    evict(now, 0);
    if (kind == TKP_TRIG_NONE) return;
    flight.triggers += 1 + merged;
    flight.suppressed += merged;
    if (flight.fd >= 0 || (flight.have_last && now - flight.last_ns < tkp_prod.min_gap_ns)) {
        flight.suppressed++;
        tkp_debug("trigger %s (%s) suppressed: at most one snapshot per %.0f s",
                  tkp_trigger_name(kind), why, (double)tkp_prod.min_gap_ns / 1e9);
        return;
    }
    flight.have_last = 1;
    flight.last_ns = now;
    snapshot_begin(kind, at, why);
}

static void flight_close(void)
{
    snapshot_end(); /* the after-window is cut short by the exit; what was written decodes */
}

void tkp_flight_after_fork(void)
{
    if (flight.fd >= 0) close(flight.fd); /* the parent's snapshot */
    flight.fd = -1;
    while (flight.n) pop_oldest();
    free(flight.q);
    flight.q = NULL;
    flight.cap = flight.head = flight.n = 0;
    flight.bytes = flight.bytes_peak = flight.evicted = 0;
    flight.index = flight.triggers = flight.suppressed = flight.skipped = 0;
    flight.have_last = 0;
    tkp_trigger_after_fork();
}

/* ---- META ------------------------------------------------------------------------------------ */

static int flight_meta_keys(void)
{
    return flight.building_meta ? 1 : 0;
}

static void kv_str(msgpack_packer *pk, const char *k, const char *v)
{
    msgpack_pack_str(pk, strlen(k));
    msgpack_pack_str_body(pk, k, strlen(k));
    msgpack_pack_str(pk, strlen(v));
    msgpack_pack_str_body(pk, v, strlen(v));
}

static void kv_u64(msgpack_packer *pk, const char *k, uint64_t v)
{
    msgpack_pack_str(pk, strlen(k));
    msgpack_pack_str_body(pk, k, strlen(k));
    msgpack_pack_uint64(pk, v);
}

static void flight_meta_pack(msgpack_packer *pk)
{
    if (!flight.building_meta) return;
    msgpack_pack_str(pk, 8);
    msgpack_pack_str_body(pk, "snapshot", 8);
    msgpack_pack_map(pk, 12);
    kv_u64(pk, "index", flight.index - 1);
    kv_str(pk, "trigger", tkp_trigger_name(flight.meta_kind));
    kv_str(pk, "why", flight.meta_why);
    kv_u64(pk, "trigger_ns", flight.meta_at);
    kv_u64(pk, "before_ns", tkp_prod.before_ns);
    kv_u64(pk, "after_ns", tkp_prod.after_ns);
    kv_u64(pk, "triggers", flight.triggers);
    kv_u64(pk, "suppressed", flight.suppressed);
    kv_u64(pk, "skipped_low_space", flight.skipped);
    kv_u64(pk, "evicted_chunks", flight.evicted);
    kv_u64(pk, "flight_bytes", flight.bytes);
    kv_u64(pk, "flight_bytes_peak", flight.bytes_peak);
}

const struct tkp_sink tkp_flight_sink = {
    .mode = "flight",
    .open = flight_open,
    .chunk_begin = flight_chunk_begin,
    .put = flight_put,
    .poll = flight_poll,
    .on_step = tkp_trigger_on_step,
    .close = flight_close,
    .path = flight_path,
    .meta_keys = flight_meta_keys,
    .meta_pack = flight_meta_pack,
};
