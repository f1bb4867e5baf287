/* Fuzz target for the capture reader and its consumers (libFuzzer's entry point): the input is
 * one capture file. It is decoded record by record through an in-memory stream, fed to the step
 * model, and handed to `tokprof dump --raw` and `tokprof summary` through a memfd, so the
 * printers and the summary's tables are fuzzed too, and to `tokprof summary` twice over (two
 * inputs: the multireader's merge). regression_driver.c replays corpus/reader/ in CTest (and
 * prefixes of each file: torn captures are the common input); tests/fuzz/run_fuzz.sh builds it
 * with -fsanitize=fuzzer -DTKP_LIBFUZZER to fuzz for real.
 *
 * Two input forms. An input that starts with the capture magic is a capture file, as written.
 * Any other input is a list of chunk payloads (raw msgpack) separated by the byte 0xc1, which
 * msgpack never uses: the harness compresses each into a chunk with the right header and seq.
 * Mutating a zstd frame almost always breaks its checksum, so the second form is what lets the
 * fuzzer reach the record decoder, the name and thread tables and the model. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <zstd.h>

#include "model/classes.h"
#include "cmd/cmd.h"
#include "model/model.h"
#include "capture/reader.h"

static void quiet(struct tkp_ctx *ctx, const char *fmt, ...)
{
    (void)ctx;
    (void)fmt;
}

static struct tkp_classes *classes(void)
{
    static struct tkp_classes *cl;
    char why[256];
    if (!cl && tkp_classes_new(NULL, &cl, why, sizeof(why))) abort();
    return cl;
}

/* Reader and model straight from memory. */
static void decode(const uint8_t *data, size_t size)
{
    FILE *f = fmemopen((void *)data, size, "rb");
    if (!f) return; /* size 0 */
    struct tkp_reader *r;
    char why[256];
    why[0] = 0;
    if (tkp_reader_open_stream(f, &r, why, sizeof(why))) {
        if (!why[0]) abort(); /* every refusal says why */
        return;
    }
    struct tkp_model_opts mo = {.classes = classes(), .from = -1, .to = -1};
    struct tkp_model m;
    struct tkp_record rec;
    int err = 0, k;
    tkp_model_init(&m, &mo);
    while ((k = tkp_reader_next(r, &rec)) == 1)
        if (!err) err = tkp_model_add(&m, &rec);
    if (k < 0 && (!tkp_reader_error(r) || !tkp_reader_error(r)->msg[0])) abort();
    if (!err) tkp_model_finish(&m);
    tkp_model_free(&m);
    tkp_reader_close(r);
}

/* The commands, through a file path. */
static void commands(const uint8_t *data, size_t size)
{
    static int fd = -1;
    static FILE *null;
    if (fd < 0 && (fd = memfd_create("fuzz_reader", 0)) < 0) return;
    if (!null && !(null = fopen("/dev/null", "w"))) return;
    if (ftruncate(fd, 0) || pwrite(fd, data, size, 0) != (ssize_t)size) return;
    char path[64];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    const struct tkp_cmd *cmds[] = {&tkp_cmd_dump, &tkp_cmd_summary};
    for (size_t i = 0; i < sizeof(cmds) / sizeof(*cmds); i++) {
        char *argv[] = {(char *)cmds[i]->name, i == 0 ? "--raw" : "--json", path, NULL};
        struct tkp_ctx ctx = {.out = null, .argv0 = "tokprof", .warn = quiet};
        int err = cmds[i]->run(3, argv, &ctx);
        if (err && !ctx.why[0]) abort(); /* a failure main.c could not explain */
    }
    /* the same capture twice: two processes to the multireader (merge, renumbering) */
    char *argv[] = {"summary", path, path, NULL};
    struct tkp_ctx ctx = {.out = null, .argv0 = "tokprof", .warn = quiet};
    if (tkp_cmd_summary.run(3, argv, &ctx) && !ctx.why[0]) abort();
}

static void le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

/* Payloads separated by 0xc1 -> a capture in *out (malloc'd). Returns its size, 0 on failure. */
static size_t wrap(const uint8_t *data, size_t size, uint8_t **out)
{
    size_t cap = TKP_FILE_HEADER_LEN, len = TKP_FILE_HEADER_LEN, n = 1;
    for (size_t i = 0; i < size; i++)
        n += data[i] == 0xc1;
    cap += n * TKP_CHUNK_HEADER_LEN + ZSTD_compressBound(size) * 2 + n * 64;
    uint8_t *f = malloc(cap);
    if (!f) return 0;
    static ZSTD_CCtx *cc;
    if (!cc && !(cc = ZSTD_createCCtx())) abort();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, 1);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 1);
    memcpy(f, TKP_FILE_MAGIC, TKP_FILE_MAGIC_LEN);
    f[8] = TKP_FORMAT_VERSION, f[9] = 0, f[10] = 1, f[11] = 0;
    le32(f + 12, TKP_FILE_HEADER_LEN);
    uint32_t seq = 0;
    for (size_t at = 0; at <= size; seq++) {
        const uint8_t *e = memchr(data + at, 0xc1, size - at);
        size_t plen = e ? (size_t)(e - (data + at)) : size - at;
        size_t z = ZSTD_compress2(cc, f + len + TKP_CHUNK_HEADER_LEN,
                                  cap - len - TKP_CHUNK_HEADER_LEN, data + at, plen);
        if (ZSTD_isError(z)) abort();
        memcpy(f + len, "TKPC", 4);
        le32(f + len + 4, (uint32_t)z);
        le32(f + len + 8, (uint32_t)plen);
        le32(f + len + 12, seq);
        len += TKP_CHUNK_HEADER_LEN + z;
        at += plen + 1;
    }
    *out = f;
    return len;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *f = NULL;
    if (size >= TKP_FILE_MAGIC_LEN && !memcmp(data, TKP_FILE_MAGIC, TKP_FILE_MAGIC_LEN)) {
        decode(data, size);
        commands(data, size);
    } else if ((size = wrap(data, size, &f))) {
        decode(f, size);
        commands(f, size);
    }
    free(f);
    return 0;
}
