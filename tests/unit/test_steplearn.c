/* The learned step definition (decoder/capture/steplearn.h) on synthetic captures shaped like the
 * real clients of tests/realstack: torch.compile's scalar reads (2-byte copies) before the steady
 * 8-byte token copies, a CUDA-graph warm-up's flag reads on a side stream, an async server whose
 * event-waited copies change size with the batch, a steady loop with nothing to learn, steps from
 * NVTX (never touched), and a capture read from a stream (no prescan: learned in the pass). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/err.h"
#include "capwriter.h"
#include "capture/reader.h"
#include "capture/steplearn.h"

static const uint32_t one[3] = {1, 1, 1};

struct seg {
    uint64_t bytes, stream;
    uint32_t closed_by;
};

/* One chunk per segment: a launch, a DtoH copy, the STEP record (token). */
static struct capw *capture(const struct seg *s, size_t n, const char *step_mode)
{
    struct capw *w = capw_new();
    capw_chunk_begin(w, 1000);
    if (step_mode) { /* META with config.step */
        msgpack_packer *pk = capw_pk(w);
        msgpack_pack_array(pk, 2);
        msgpack_pack_int(pk, TKP_REC_META);
        msgpack_pack_map(pk, 2);
        msgpack_pack_str_with_body(pk, "program", 7);
        msgpack_pack_str_with_body(pk, "t", 1);
        msgpack_pack_str_with_body(pk, "config", 6);
        msgpack_pack_map(pk, 1);
        msgpack_pack_str_with_body(pk, "step", 4);
        msgpack_pack_str_with_body(pk, step_mode, strlen(step_mode));
    } else {
        capw_meta(w, "t", 1);
    }
    capw_thread(w, 0, 100);
    capw_name(w, 1, "k");
    capw_chunk_end(w);
    uint64_t t = 2000;
    for (size_t i = 0; i < n; i++) {
        capw_chunk_begin(w, t);
        capw_launch(w, 10, 0, i, 1, 7, 0, one, one, 0);
        if (s[i].bytes) /* 0: no copy (a rotated file's first step: it was in the previous) */
            capw_copy(w, 10, 0, i, 0, 2 /* DtoH */, s[i].bytes, s[i].stream, 0);
        capw_step(w, i, 0, 0, t, t + 20, t + 30, s[i].closed_by, 1, 0, 1);
        capw_chunk_end(w);
        t += 100;
    }
    return w;
}

/* Counts token and warm-up STEP records; kinds[i] gets segment i's kind. */
static void count(struct tkp_reader *r, int *tok, int *warm, uint32_t *kinds)
{
    struct tkp_record rec;
    *tok = *warm = 0;
    while (tkp_reader_next(r, &rec) == 1) {
        if (rec.type != TKP_REC_STEP) continue;
        if (kinds) kinds[rec.step] = rec.step_rec.kind;
        if (rec.step_rec.kind == TKP_STEP_TOKEN) (*tok)++;
        if (rec.step_rec.kind == TKP_STEP_WARMUP) (*warm)++;
    }
    tkp_reader_close(r);
}

/* w written to a new temporary file: its path in path (a mkstemp template), its descriptor. */
static int write_tmp(const struct capw *w, char *path)
{
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(capw_write_file(w, path), 0);
    return fd;
}

/* w read from a file (with the prescan): its steps counted as count() does. */
static void read_capw(const struct capw *w, int *tok, int *warm, uint32_t *kinds)
{
    char path[] = "/tmp/tkp_steplearn_XXXXXX";
    close(write_tmp(w, path));
    struct tkp_reader *r;
    cr_assert_eq(tkp_reader_open(path, &r, NULL, 0), 0);
    count(r, tok, warm, kinds);
    unlink(path);
}

/* The capture of segments s (capture()), read from a file (with the prescan). */
static void read_file(const struct seg *s, size_t n, const char *mode, int *tok, int *warm,
                      uint32_t *kinds)
{
    struct capw *w = capture(s, n, mode);
    read_capw(w, tok, warm, kinds);
    capw_free(w);
}

/* Segment i of each case's capture. */
static struct seg compile_reads(int i, uint32_t closed_by)
{
    return (struct seg){i >= 1 && i <= 4 ? 2 : 8, 0, closed_by};
}

static struct seg later_recompile(int i, uint32_t closed_by)
{
    return (struct seg){(i >= 1 && i <= 4) || i == 80 ? 2 : 8, 0, closed_by};
}

static struct seg graph_flags(int i, uint32_t closed_by)
{
    return i == 1 || i == 2 ? (struct seg){1, 9, closed_by} : (struct seg){8, 0, closed_by};
}

static struct seg async_batch(int i, uint32_t closed_by)
{
    uint64_t b = i < 8 ? (uint64_t)i + 1 : i < 70 ? 8 : (uint64_t)(80 - i);
    return (struct seg){4 * b, 3, closed_by};
}

/* llama-bench: a context (and a stream) per test: four prompt evaluations on one stream, then the
 * generated tokens on another, every one ending with the logits' copy (n_vocab x 4 bytes) */
static struct seg new_context(int i, uint32_t closed_by)
{
    return (struct seg){2048, i < 4 ? 5 : 6, closed_by};
}

static struct seg rotated(int i, uint32_t closed_by)
{
    return (struct seg){i == 0 ? 0 : 8, 0, closed_by};
}

static struct seg one_read(int i, uint32_t closed_by)
{
    return (struct seg){i == 1 ? 2 : 8, 0, closed_by};
}

/* torch.compile: a prefill token (8 B), four 2-byte scalar reads, then 32 steady tokens. */
Test(steplearn, compile_scalar_reads_are_warmup)
{
    struct seg s[37];
    for (int i = 0; i < 37; i++)
        s[i] = compile_reads(i, TKP_CLOSE_STREAM_SYNC);
    int tok, warm;
    uint32_t kinds[37];
    read_file(s, 37, "auto", &tok, &warm, kinds);
    cr_expect_eq(tok, 33, "token steps %d, want 33", tok);
    cr_expect_eq(warm, 4);
    cr_expect_eq(kinds[0], TKP_STEP_TOKEN, "the prefill stays a token");
    for (int i = 1; i <= 4; i++)
        cr_expect_eq(kinds[i], TKP_STEP_WARMUP);
}

/* Captures of n segments (seg(i)) read from a file: want_tok token and want_warm warm-up steps. */
static const struct learn_case {
    const char *what;
    struct seg (*seg)(int i, uint32_t closed_by);
    uint32_t closed_by;
    int n;
    const char *mode; /* META config.step (NULL: none) */
    int want_tok, want_warm;
} learn_cases[] = {
    /* a recompile later in the run reads the same 2-byte scalar: warm-up there too */
    {"later recompile", later_recompile, TKP_CLOSE_STREAM_SYNC, 100, NULL, 95, 5},
    /* the CUDA-graph recipe: prefill, two warm-up forwards reading a 1-byte flag on a side
     * stream, then 12 replays each ending with the token copy on the main stream */
    {"graph warm-up flags", graph_flags, TKP_CLOSE_STREAM_SYNC, 15, "auto", 13, 2},
    /* vLLM's async output: the sampled ids' copy (4 B per request) waited through an event; the
     * batch grows, then shrinks. Sizes seen only early are the batch, not a warm-up */
    {"event-waited sizes", async_batch, TKP_CLOSE_EVENT_SYNC, 80, "auto", 80, 0},
    /* steps the user chose (NVTX ranges here) are never relabelled */
    {"other step modes", compile_reads, TKP_CLOSE_NVTX, 37, "nvtx:^decode$", 37, 0},
    /* a loop moved to a new stream (a new context) keeps its tokens: logits are no scalar */
    {"new context", new_context, TKP_CLOSE_STREAM_SYNC, 100, "auto", 100, 0},
    /* a rotated file: its first step's end copy is in the previous file; not a warm-up */
    {"rotated first step", rotated, TKP_CLOSE_STREAM_SYNC, 40, "auto", 40, 0},
    /* too few steps to learn from: as written */
    {"short capture", one_read, TKP_CLOSE_STREAM_SYNC, 6, "auto", 6, 0},
};

Test(steplearn, each_case)
{
    for (size_t k = 0; k < sizeof(learn_cases) / sizeof(learn_cases[0]); k++) {
        const struct learn_case *c = &learn_cases[k];
        struct seg s[100];
        cr_assert_leq(c->n, 100);
        for (int i = 0; i < c->n; i++)
            s[i] = c->seg(i, c->closed_by);
        int tok, warm;
        read_file(s, (size_t)c->n, c->mode, &tok, &warm, NULL);
        cr_expect_eq(tok, c->want_tok, "%s: token steps %d, want %d", c->what, tok, c->want_tok);
        cr_expect_eq(warm, c->want_warm, "%s: warm-up steps %d, want %d", c->what, warm,
                     c->want_warm);
    }
}

/* Two serving threads, each with its own stream, the first's steps before the second's: each
 * thread's steady state is its own (minillm --threads). */
Test(steplearn, threads_learn_apart)
{
    struct capw *w = capw_new();
    capw_chunk_begin(w, 1000);
    capw_meta(w, "t", 1);
    capw_thread(w, 0, 100);
    capw_thread(w, 1, 101);
    capw_name(w, 1, "k");
    for (uint32_t th = 0; th < 2; th++)
        for (uint64_t i = 0; i < 20; i++) {
            capw_launch(w, 10, th, i, 1, 7 + th, 0, one, one, 0);
            capw_copy(w, 10, th, i, 0, 2, 4, 7 + th, 0);
            capw_step(w, i, th, 0, 1, 2, 3, TKP_CLOSE_STREAM_SYNC, 1, 0, 1);
        }
    capw_chunk_end(w);
    int tok, warm;
    read_capw(w, &tok, &warm, NULL);
    capw_free(w);
    cr_expect_eq(tok, 40);
    cr_expect_eq(warm, 0);
}

/* A stream (no prescan, as stdin): the window's steps are delivered as written, later ones with
 * a learned warm-up signature are classified. */
Test(steplearn, stream_learns_in_its_pass)
{
    struct seg s[100];
    for (int i = 0; i < 100; i++)
        s[i] = later_recompile(i, TKP_CLOSE_STREAM_SYNC);
    struct capw *w = capture(s, 100, "auto");
    struct tkp_reader *r;
    cr_assert_eq(tkp_reader_open_stream(capw_tmpfile(w), &r, NULL, 0), 0);
    int tok, warm;
    uint32_t kinds[100];
    count(r, &tok, &warm, kinds);
    cr_expect_eq(kinds[1], TKP_STEP_TOKEN, "in the window: as written");
    cr_expect_eq(kinds[80], TKP_STEP_WARMUP, "after it: learned");
    cr_expect_eq(warm, 1);
    capw_free(w);
}

/* The prescan decompresses the head once, for the learner and the reader's pass: the file
 * overwritten after the first record is read, the pass still delivers the head (the learning
 * window's 64 steps, classified), then meets the overwritten bytes where the prescan stopped.
 * A pass that read the head from the file again would stop at once. */
Test(steplearn, head_decompressed_once)
{
    struct seg s[100];
    for (int i = 0; i < 100; i++)
        s[i] = compile_reads(i, TKP_CLOSE_STREAM_SYNC);
    struct capw *w = capture(s, 100, "auto");
    char path[] = "/tmp/tkp_steplearn_XXXXXX";
    int fd = write_tmp(w, path);
    struct tkp_reader *r;
    struct tkp_record rec;
    cr_assert_eq(tkp_reader_open(path, &r, NULL, 0), 0);
    cr_assert_eq(tkp_reader_next(r, &rec), 1);
    off_t size = lseek(fd, 0, SEEK_END);
    static uint8_t junk[1 << 16];
    memset(junk, 0xff, sizeof(junk));
    for (off_t at = TKP_FILE_HEADER_LEN; at < size; at += (off_t)sizeof(junk)) /* every chunk */
        cr_assert_gt(pwrite(fd, junk, (size_t)(size - at) < sizeof(junk) ? (size_t)(size - at)
                                                                         : sizeof(junk), at), 0);
    close(fd);
    int k, steps = 0, warm = 0;
    while ((k = tkp_reader_next(r, &rec)) == 1)
        if (rec.type == TKP_REC_STEP) steps++, warm += rec.step_rec.kind == TKP_STEP_WARMUP;
    cr_expect_eq(steps, TKP_LEARN_WINDOW, "the head's steps, from memory: %d", steps);
    cr_expect_eq(warm, 4);
    cr_expect_eq(k, TKP_ERR_CHUNK, "then the file, where the prescan stopped: %d", k);
    tkp_reader_close(r);
    unlink(path);
    capw_free(w);
}
