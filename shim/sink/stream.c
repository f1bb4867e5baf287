/* The stream sink: every chunk appended to <program>.<pid>.tokprof as it is made, with a size cap,
 * rotation and a keep count (TOKPROF_MAX_MB, TOKPROF_KEEP). A failed write is cut back to the
 * last whole chunk, so the file decodes without a torn tail. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"
#include "sink/file.h"
#include "sink/stream.h"
#include "tokprof/format.h"

static struct {
    int fd;
    unsigned index;         /* rotation: 0 is <program>.<pid>.tokprof, K is <...>.K.tokprof */
    uint64_t bytes;         /* written to the current file */
    uint64_t last_chunk;    /* bytes of the last chunk: the rotation guess for the next */
    uint32_t fseq;          /* seq of the next chunk in the current file */
    int rotate;             /* the next put starts file index+1 */
    int last;               /* the exit's chunk comes next: it starts no new file */
    char path[PATH_MAX];
} out = {.fd = -1};

static int open_stream_file(unsigned index)
{
    int fd = tkp_file_create(TKP_OUT_STREAM, index, TKP_FILE_STREAM, out.path, sizeof out.path);
    if (fd < 0) return -1;
    out.fd = fd;
    out.index = index;
    out.bytes = TKP_FILE_HEADER_LEN;
    return 0;
}

static int stream_open(tkp_meta_payload_fn meta)
{
    (void)meta; /* every file starts with the writer's own first chunk */
    if (tkp_file_open_dir()) return -1;
    out.fseq = 0;
    out.rotate = 0;
    out.last = 0;
    out.last_chunk = 0;
    if (open_stream_file(0)) {
        tkp_warn("cannot create %s: %s; capture off, the program is unaffected", out.path,
                 strerror(errno));
        return -1;
    }
    return 0;
}

static void stream_last_chunk(void)
{
    out.last = 1;
}

static uint32_t stream_chunk_begin(uint32_t gseq, int *first)
{
    (void)gseq;
    /* Rotate before a file would pass the cap, guessing this chunk is as big as the last; a file
     * always holds at least one chunk besides its header. */
    if (tkp_prod.max_bytes && out.fseq > 0 && out.bytes + out.last_chunk > tkp_prod.max_bytes &&
        !out.last) {
        out.rotate = 1;
        out.fseq = 0;
    }
    *first = out.fseq == 0;
    return out.fseq;
}

static int stream_put(const void *frame, size_t zn, uint32_t raw, uint64_t t_begin,
                      uint64_t t_end)
{
    (void)t_begin, (void)t_end;
    if (tkp_file_failed()) return -1;
    tkp_file_test_delay();
    if (out.rotate) {
        /* the next file (locked) before the last one is closed (its lock let go): a follower
         * never finds the writer gone between the two (file.c, TKP_FILE_LOCKED) */
        int prev = out.fd;
        out.rotate = 0;
        out.fd = -1;
        int failed = open_stream_file(out.index + 1), e = errno;
        if (prev >= 0) close(prev);
        if (failed) {
            tkp_file_fail(out.path, e);
            return -1;
        }
    }
    if (out.fd < 0) return -1;
    unsigned char hdr[TKP_CHUNK_HEADER_LEN];
    tkp_file_chunk_header(hdr, (uint32_t)zn, raw, out.fseq);
    if (tkp_file_write(out.fd, hdr, sizeof hdr) || tkp_file_write(out.fd, frame, zn)) {
        int e = errno;
        if (ftruncate(out.fd, (off_t)out.bytes)) { /* best effort: keep the file whole */ }
        tkp_file_fail(out.path, e);
        return -1;
    }
    out.bytes += sizeof hdr + zn;
    out.last_chunk = sizeof hdr + zn;
    out.fseq++;
    return 0;
}

static void stream_close(void)
{
    if (out.fd >= 0) close(out.fd);
    out.fd = -1;
}

void tkp_stream_after_fork(void)
{
    if (out.fd >= 0) close(out.fd); /* the parent's file: its fd, not ours to write */
    out.fd = -1;
    out.fseq = 0;
    out.rotate = 0;
    out.index = 0;
    tkp_file_reset();
}

static const char *stream_path(void)
{
    return out.path;
}

const struct tkp_sink tkp_stream_sink = {
    .mode = "stream",
    .open = stream_open,
    .chunk_begin = stream_chunk_begin,
    .last_chunk = stream_last_chunk,
    .put = stream_put,
    .low_space = tkp_file_low_space,
    .fits = tkp_file_fits,
    .close = stream_close,
    .path = stream_path,
};
