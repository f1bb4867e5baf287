/* tokprof decoder: the capture writer of tokprof import (see capout.h). */
#include "import/capout.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

#include "base/err.h"
#include "base/grow.h"
#include "tokprof/format.h"

#define CHUNK_RAW (1u << 20) /* a chunk ends past this many payload bytes */
#define STR_MAX 4095

struct tkp_capout {
    FILE *f;
    char *path;
    int err;
    uint32_t seq;
    int open;       /* a chunk is being filled */
    uint64_t prev;  /* the dt chain */
    uint32_t stamp; /* the current chunk's number + 1: what a defined name/thread carries */
    uint32_t *name_stamp;
    size_t cap_names;
    uint32_t thread_stamp[65536];
    msgpack_sbuffer payload;
    msgpack_packer pk;
    ZSTD_CCtx *cc;
    void *z;
    size_t zcap;
};

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

int tkp_capout_open(struct tkp_capout **out, const char *path, char *why, size_t n)
{
    struct tkp_capout *w = calloc(1, sizeof(*w));
    if (!w || !(w->path = strdup(path)) || !(w->cc = ZSTD_createCCtx())) {
        if (w) free(w->path);
        free(w);
        return tkp_why(why, n, TKP_ERR_NOMEM, "out of memory");
    }
    if (!(w->f = fopen(path, "wb"))) {
        int e = errno;
        ZSTD_freeCCtx(w->cc);
        free(w->path);
        free(w);
        return tkp_why(why, n, TKP_ERR_IO, "%s: %s", path, strerror(e));
    }
    ZSTD_CCtx_setParameter(w->cc, ZSTD_c_compressionLevel, 3);
    ZSTD_CCtx_setParameter(w->cc, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(w->cc, ZSTD_c_contentSizeFlag, 1);
    msgpack_sbuffer_init(&w->payload);
    msgpack_packer_init(&w->pk, &w->payload, msgpack_sbuffer_write);
    uint8_t h[TKP_FILE_HEADER_LEN] = {0};
    memcpy(h, TKP_FILE_MAGIC, TKP_FILE_MAGIC_LEN);
    h[8] = TKP_FORMAT_VERSION;
    le32(h + 12, TKP_FILE_HEADER_LEN);
    if (fwrite(h, 1, sizeof(h), w->f) != sizeof(h)) w->err = TKP_ERR_IO;
    *out = w;
    return 0;
}

static int chunk_end(struct tkp_capout *w)
{
    if (!w->open) return w->err;
    w->open = 0;
    size_t raw = w->payload.size, bound = ZSTD_compressBound(raw) + TKP_CHUNK_HEADER_LEN;
    if (tkp_grow_to(&w->z, &w->zcap, bound, 1, 4096, 0)) return w->err = TKP_ERR_NOMEM;
    uint8_t *z = w->z;
    size_t zn = ZSTD_compress2(w->cc, z + TKP_CHUNK_HEADER_LEN, bound - TKP_CHUNK_HEADER_LEN,
                               w->payload.data, raw);
    if (ZSTD_isError(zn)) return w->err = TKP_ERR_NOMEM;
    le32(z, TKP_CHUNK_MAGIC);
    le32(z + 4, (uint32_t)zn);
    le32(z + 8, (uint32_t)raw);
    le32(z + 12, w->seq++);
    if (fwrite(z, 1, zn + TKP_CHUNK_HEADER_LEN, w->f) != zn + TKP_CHUNK_HEADER_LEN)
        w->err = TKP_ERR_IO;
    msgpack_sbuffer_clear(&w->payload);
    return w->err;
}

int tkp_capout_chunk(struct tkp_capout *w, uint64_t ns)
{
    if (w->open && w->payload.size >= CHUNK_RAW) chunk_end(w);
    if (w->err) return w->err;
    if (!w->open) {
        w->open = 1;
        w->stamp++;
        w->prev = ns;
        msgpack_pack_array(&w->pk, 3);
        msgpack_pack_uint64(&w->pk, TKP_REC_CHUNK);
        msgpack_pack_uint64(&w->pk, w->seq);
        msgpack_pack_uint64(&w->pk, ns);
    }
    return 0;
}

void tkp_capout_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    if (n > STR_MAX) {
        n = STR_MAX;
        while (n && ((unsigned char)s[n] & 0xc0) == 0x80)
            n--; /* not inside a character */
    }
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

int tkp_capout_name(struct tkp_capout *w, uint64_t id, const char *s)
{
    if (id >= w->cap_names && TKP_GROW_ZEROED_FROM(w->name_stamp, w->cap_names, id + 1, 256))
        return w->err = TKP_ERR_NOMEM;
    if (w->name_stamp[id] == w->stamp) return 0;
    w->name_stamp[id] = w->stamp;
    msgpack_pack_array(&w->pk, 3);
    msgpack_pack_uint64(&w->pk, TKP_REC_NAME);
    msgpack_pack_uint64(&w->pk, id);
    tkp_capout_str(&w->pk, s);
    return 0;
}

int tkp_capout_thread(struct tkp_capout *w, uint32_t thread, uint64_t tid)
{
    if (w->thread_stamp[thread & 0xffff] == w->stamp) return 0;
    w->thread_stamp[thread & 0xffff] = w->stamp;
    msgpack_pack_array(&w->pk, 3);
    msgpack_pack_uint64(&w->pk, TKP_REC_THREAD);
    msgpack_pack_uint64(&w->pk, thread);
    msgpack_pack_uint64(&w->pk, tid);
    return 0;
}

msgpack_packer *tkp_capout_host(struct tkp_capout *w, int type, uint32_t nfields, uint64_t ns,
                                uint32_t thread, uint64_t step)
{
    msgpack_pack_array(&w->pk, nfields + 1);
    msgpack_pack_uint64(&w->pk, (uint64_t)type);
    msgpack_pack_int64(&w->pk, (int64_t)(ns - w->prev));
    w->prev = ns;
    msgpack_pack_uint64(&w->pk, thread);
    msgpack_pack_uint64(&w->pk, step);
    return &w->pk;
}

msgpack_packer *tkp_capout_rec(struct tkp_capout *w, int type, uint32_t nfields)
{
    msgpack_pack_array(&w->pk, nfields + 1);
    msgpack_pack_uint64(&w->pk, (uint64_t)type);
    return &w->pk;
}

static void release(struct tkp_capout *w)
{
    msgpack_sbuffer_destroy(&w->payload);
    ZSTD_freeCCtx(w->cc);
    free(w->z);
    free(w->name_stamp);
    free(w->path);
    free(w);
}

int tkp_capout_close(struct tkp_capout *w, char *why, size_t n)
{
    int err = chunk_end(w);
    if (fclose(w->f) && !err) err = TKP_ERR_IO;
    if (err) {
        tkp_why(why, n, err, "%s: %s", w->path,
                err == TKP_ERR_IO ? "write error (disk full?)" : tkp_strerror(err));
        unlink(w->path);
    }
    release(w);
    return err;
}

void tkp_capout_abort(struct tkp_capout *w)
{
    if (!w) return;
    fclose(w->f);
    unlink(w->path);
    release(w);
}
