/* Test-only capture writer (see capwriter.h). */
#include "capwriter.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "tokprof/format.h"

struct capw {
    uint8_t *buf;
    size_t len, cap;
    uint32_t seq;
    msgpack_sbuffer payload;
    msgpack_packer pk;
};

static void *xrealloc(void *p, size_t n)
{
    p = realloc(p, n);
    if (!p) abort();
    return p;
}

void capw_bytes(struct capw *w, const void *p, size_t n)
{
    if (w->len + n > w->cap) {
        w->cap = (w->len + n) * 2;
        w->buf = xrealloc(w->buf, w->cap);
    }
    memcpy(w->buf + w->len, p, n);
    w->len += n;
}

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

struct capw *capw_new_bare(void)
{
    struct capw *w = calloc(1, sizeof(*w));
    if (!w) abort();
    msgpack_sbuffer_init(&w->payload);
    msgpack_packer_init(&w->pk, &w->payload, msgpack_sbuffer_write);
    return w;
}

struct capw *capw_new(void)
{
    struct capw *w = capw_new_bare();
    uint8_t h[TKP_FILE_HEADER_LEN] = {0};
    memcpy(h, TKP_FILE_MAGIC, TKP_FILE_MAGIC_LEN);
    h[8] = TKP_FORMAT_VERSION;
    le32(h + 12, TKP_FILE_HEADER_LEN);
    capw_bytes(w, h, sizeof(h));
    return w;
}

void capw_free(struct capw *w)
{
    if (!w) return;
    msgpack_sbuffer_destroy(&w->payload);
    free(w->buf);
    free(w);
}

const uint8_t *capw_data(const struct capw *w, size_t *len)
{
    *len = w->len;
    return w->buf;
}

int capw_write_file(const struct capw *w, const char *path)
{
    FILE *f = fopen(path, "wb");
    if (!f) return -1;
    size_t n = fwrite(w->buf, 1, w->len, f);
    return fclose(f) || n != w->len ? -1 : 0;
}

FILE *capw_tmpfile(const struct capw *w)
{
    FILE *f = tmpfile();
    if (!f) return NULL;
    if (fwrite(w->buf, 1, w->len, f) != w->len) {
        fclose(f);
        return NULL;
    }
    rewind(f);
    return f;
}

msgpack_packer *capw_pk(struct capw *w)
{
    return &w->pk;
}

uint8_t *capw_payload(struct capw *w, size_t *len)
{
    *len = w->payload.size;
    return (uint8_t *)w->payload.data;
}

void capw_payload_bytes(struct capw *w, const void *p, size_t n)
{
    msgpack_sbuffer_write(&w->payload, p, n);
}

void capw_chunk_open(struct capw *w)
{
    msgpack_sbuffer_clear(&w->payload);
}

void capw_chunk_begin(struct capw *w, uint64_t base_ns)
{
    capw_chunk_open(w);
    msgpack_pack_array(&w->pk, 3);
    msgpack_pack_uint64(&w->pk, TKP_REC_CHUNK);
    msgpack_pack_uint64(&w->pk, w->seq);
    msgpack_pack_uint64(&w->pk, base_ns);
}

size_t capw_chunk_end_ex(struct capw *w, unsigned corrupt)
{
    size_t raw = w->payload.size, bound = ZSTD_compressBound(raw);
    uint8_t *z = xrealloc(NULL, bound + TKP_CHUNK_HEADER_LEN);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, !(corrupt & CAPW_NO_CONTENT_SIZE));
    size_t zn = ZSTD_compress2(cc, z + TKP_CHUNK_HEADER_LEN, bound, w->payload.data, raw);
    ZSTD_freeCCtx(cc);
    if (ZSTD_isError(zn)) abort();
    if (corrupt & CAPW_BAD_ZSTD) z[TKP_CHUNK_HEADER_LEN + zn / 2] ^= 0x5a;
    memcpy(z, (corrupt & CAPW_BAD_MAGIC) ? "TKPX" : "TKPC", 4);
    le32(z + 4, (corrupt & CAPW_HUGE_LEN) ? TKP_CHUNK_MAX_COMPRESSED + 1 : (uint32_t)zn);
    le32(z + 8, (uint32_t)raw + !!(corrupt & CAPW_BAD_RAWLEN));
    le32(z + 12, w->seq + !!(corrupt & CAPW_SEQ_SKIP));
    size_t off = w->len;
    capw_bytes(w, z, zn + TKP_CHUNK_HEADER_LEN);
    free(z);
    w->seq++;
    return off;
}

size_t capw_chunk_end(struct capw *w)
{
    return capw_chunk_end_ex(w, 0);
}

/* ---- records ---- */

static void head(struct capw *w, uint32_t n, enum tkp_rec type)
{
    msgpack_pack_array(&w->pk, n);
    msgpack_pack_uint64(&w->pk, type);
}

static void u(struct capw *w, uint64_t v)
{
    msgpack_pack_uint64(&w->pk, v);
}
static void i(struct capw *w, int64_t v)
{
    msgpack_pack_int64(&w->pk, v);
}

static void str(struct capw *w, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(&w->pk, n);
    msgpack_pack_str_body(&w->pk, s, n);
}

static void timed(struct capw *w, uint32_t n, enum tkp_rec type, int64_t dt, uint32_t thread,
                  uint64_t step)
{
    head(w, n, type);
    i(w, dt);
    u(w, thread);
    u(w, step);
}

static void dims(struct capw *w, const uint32_t grid[3], const uint32_t block[3])
{
    for (int k = 0; k < 3; k++)
        u(w, grid[k]);
    for (int k = 0; k < 3; k++)
        u(w, block[k]);
}

/* LAUNCH and TMPL: name, stream, via, grid, block, smem */
static void launch_cfg(struct capw *w, uint64_t name, uint64_t stream, uint32_t via,
                       const uint32_t grid[3], const uint32_t block[3], uint32_t smem)
{
    u(w, name);
    u(w, stream);
    u(w, via);
    dims(w, grid, block);
    u(w, smem);
}

void capw_name(struct capw *w, uint64_t id, const char *s)
{
    head(w, 3, TKP_REC_NAME);
    u(w, id);
    str(w, s);
}

void capw_meta(struct capw *w, const char *program, uint64_t pid)
{
    head(w, 2, TKP_REC_META);
    msgpack_pack_map(&w->pk, 5);
    str(w, "program");
    str(w, program);
    str(w, "pid");
    u(w, pid);
    str(w, "hostname");
    str(w, "testhost");
    str(w, "devices");
    msgpack_pack_array(&w->pk, 1);
    msgpack_pack_map(&w->pk, 2);
    str(w, "name");
    str(w, "Sim GPU \"A\"");
    str(w, "uuid");
    str(w, "GPU-0000");
    str(w, "config");
    msgpack_pack_map(&w->pk, 2);
    str(w, "step");
    str(w, "auto");
    str(w, "ring_kib");
    u(w, 256);
}

void capw_thread(struct capw *w, uint32_t thread, uint32_t os_tid)
{
    head(w, 3, TKP_REC_THREAD);
    u(w, thread);
    u(w, os_tid);
}

void capw_launch(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint64_t name,
                 uint64_t stream, uint32_t via, const uint32_t grid[3], const uint32_t block[3],
                 uint32_t smem)
{
    timed(w, 14, TKP_REC_LAUNCH, dt, thread, step);
    launch_cfg(w, name, stream, via, grid, block, smem);
}

void capw_graph_launch(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint64_t graph,
                       uint64_t stream, uint32_t via)
{
    timed(w, 7, TKP_REC_GRAPH_LAUNCH, dt, thread, step);
    u(w, graph);
    u(w, stream);
    u(w, via);
}

void capw_graph(struct capw *w, uint64_t graph, uint32_t n, const struct capw_node *nodes)
{
    head(w, 3, TKP_REC_GRAPH);
    u(w, graph);
    msgpack_pack_array(&w->pk, n);
    for (uint32_t k = 0; k < n; k++) {
        const struct capw_node *g = &nodes[k];
        msgpack_pack_array(&w->pk, 10);
        u(w, g->node);
        u(w, g->type);
        u(w, g->name);
        for (int j = 0; j < 3; j++)
            u(w, g->grid[j]);
        for (int j = 0; j < 3; j++)
            u(w, g->block[j]);
        msgpack_pack_array(&w->pk, g->ndeps);
        for (uint32_t j = 0; j < g->ndeps; j++)
            u(w, g->deps[j]);
    }
}

void capw_copy(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint32_t kind,
               uint32_t dir, uint64_t bytes, uint64_t stream, uint32_t flags)
{
    timed(w, 9, TKP_REC_COPY, dt, thread, step);
    u(w, kind);
    u(w, dir);
    u(w, bytes);
    u(w, stream);
    u(w, flags);
}

void capw_sync(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint32_t kind,
               uint64_t handle, uint64_t wait_ns)
{
    timed(w, 7, TKP_REC_SYNC, dt, thread, step);
    u(w, kind);
    u(w, handle);
    u(w, wait_ns);
}

void capw_event_record(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint64_t event,
                       uint64_t stream)
{
    timed(w, 6, TKP_REC_EVENT_RECORD, dt, thread, step);
    u(w, event);
    u(w, stream);
}

void capw_stream_wait(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint64_t stream,
                      uint64_t event)
{
    timed(w, 6, TKP_REC_STREAM_WAIT, dt, thread, step);
    u(w, stream);
    u(w, event);
}

void capw_step(struct capw *w, uint64_t step, uint32_t thread, uint32_t kind, uint64_t begin_ns,
               uint64_t mark_ns, uint64_t end_ns, uint32_t closed_by, uint64_t launches,
               uint64_t graph_launches, uint64_t copies)
{
    head(w, 11, TKP_REC_STEP);
    u(w, step);
    u(w, thread);
    u(w, kind);
    u(w, begin_ns);
    u(w, mark_ns);
    u(w, end_ns);
    u(w, closed_by);
    u(w, launches);
    u(w, graph_launches);
    u(w, copies);
}

void capw_nvtx(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint32_t kind,
               uint64_t name, uint64_t range_id)
{
    timed(w, 7, TKP_REC_NVTX, dt, thread, step);
    u(w, kind);
    u(w, name);
    u(w, range_id);
}

void capw_loss(struct capw *w, uint32_t thread, uint64_t dropped_total)
{
    head(w, 3, TKP_REC_LOSS);
    u(w, thread);
    u(w, dropped_total);
}

void capw_marker(struct capw *w, int64_t dt, uint32_t thread, uint64_t step, uint32_t kind,
                 int64_t value)
{
    timed(w, 6, TKP_REC_MARKER, dt, thread, step);
    u(w, kind);
    i(w, value);
}

void capw_gpu_kernel(struct capw *w, const struct capw_gpu_kernel *k)
{
    head(w, 18, TKP_REC_GPU_KERNEL);
    u(w, k->start_ns);
    u(w, k->end_ns);
    u(w, k->name);
    u(w, k->stream);
    u(w, k->correlation);
    u(w, k->thread);
    u(w, k->step);
    u(w, k->join);
    u(w, k->index);
    if (k->graph == UINT64_MAX) msgpack_pack_int64(&w->pk, -1);
    else u(w, k->graph);
    if (k->node == UINT64_MAX) msgpack_pack_int64(&w->pk, -1);
    else u(w, k->node);
    for (int j = 0; j < 3; j++) u(w, k->grid[j]);
    for (int j = 0; j < 3; j++) u(w, k->block[j]);
}

void capw_gpu_info(struct capw *w, uint32_t status, const char *mode, const char *reason,
                   uint64_t records)
{
    head(w, 11, TKP_REC_GPU_INFO);
    u(w, status);
    str(w, mode);
    str(w, reason);
    str(w, "monotonic");
    u(w, records);
    for (int j = 0; j < 5; j++) u(w, 0);
}

/* ---- templates and runs ---- */

void capw_tmpl(struct capw *w, uint32_t id, uint32_t thread, uint64_t name, uint64_t stream,
               uint32_t via, const uint32_t grid[3], const uint32_t block[3], uint32_t smem)
{
    head(w, 13, TKP_REC_TMPL);
    u(w, id);
    u(w, thread);
    launch_cfg(w, name, stream, via, grid, block, smem);
}

void capw_launch_t(struct capw *w, int64_t dt, uint64_t step, uint32_t tmpl, int ntail,
                   uint32_t call, uint32_t stack)
{
    head(w, 4 + (uint32_t)ntail, TKP_REC_LAUNCH_T);
    i(w, dt);
    u(w, step);
    u(w, tmpl);
    if (ntail > 0) u(w, call);
    if (ntail > 1) u(w, stack);
}

void capw_lib_tmpl(struct capw *w, uint32_t id, uint32_t thread, const struct capw_lib *c)
{
    head(w, 19, TKP_REC_LIB_TMPL);
    u(w, id);
    u(w, thread);
    u(w, c->lib);
    u(w, c->op);
    uint64_t shape[4] = {c->m, c->n, c->k, c->batch};
    for (int k = 0; k < 4; k++)
        u(w, shape[k]);
    int32_t e[6] = {c->atype, c->btype, c->ctype, c->compute, c->transa, c->transb};
    for (int k = 0; k < 6; k++)
        i(w, e[k]);
    u(w, c->stream);
    u(w, c->a_ptr);
    u(w, c->status);
    u(w, c->flags);
}

void capw_lib_call_t(struct capw *w, int64_t dt, uint64_t step, uint32_t call, uint32_t tmpl,
                     uint64_t host_ns)
{
    head(w, 6, TKP_REC_LIB_CALL_T);
    i(w, dt);
    u(w, step);
    u(w, call);
    u(w, tmpl);
    u(w, host_ns);
}

void capw_run(struct capw *w, uint64_t step, uint64_t n, uint64_t call, const uint8_t *const col[5],
              const size_t len[5], int extra, int str_col)
{
    head(w, 9 + (uint32_t)extra, TKP_REC_RUN);
    u(w, step);
    u(w, n);
    u(w, call);
    for (int k = 0; k < 5; k++) {
        if (len[k] == CAPW_NIL) {
            msgpack_pack_nil(&w->pk);
            continue;
        }
        if (k == str_col) {
            msgpack_pack_str_with_body(&w->pk, (const char *)col[k], len[k]);
            continue;
        }
        msgpack_pack_bin(&w->pk, len[k]);
        msgpack_pack_bin_body(&w->pk, col[k], len[k]);
    }
    for (int k = 0; k < extra; k++)
        str(w, "x");
}
