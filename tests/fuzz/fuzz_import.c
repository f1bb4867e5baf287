/* Fuzz target for tokprof import (decoder/import/: the streaming JSON reader and the Kineto
 * importer). regression_driver.c replays corpus/import/ in CTest (fuzz_import_corpus).
 *
 * One input is a trace file (JSON, or gzip: zlib reads both); it is imported with the default
 * step source and with an annotation source. A refusal must say why on one line that names a
 * byte offset or the file, and leave no output behind; an import that succeeds must have written
 * a capture the reader reads to its end without a bad chunk, and the model must take it. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/reader.h"
#include "import/kineto.h"
#include "model/classes.h"
#include "model/model.h"

static struct tkp_classes *classes(void)
{
    static struct tkp_classes *cl;
    char why[256];
    if (!cl && tkp_classes_new(NULL, &cl, why, sizeof(why))) abort();
    return cl;
}

static void check_capture(const char *path)
{
    struct tkp_reader *r;
    char why[256];
    if (tkp_reader_open(path, &r, why, sizeof(why))) abort(); /* the importer wrote a bad file */
    struct tkp_model_opts mo = {.classes = classes(), .from = -1, .to = -1};
    struct tkp_model m;
    struct tkp_record rec;
    tkp_model_init(&m, &mo);
    /* every joined GPU record names a segment that has a STEP record (the join is by segment) */
    static uint64_t steps[4096], joins[4096];
    size_t nsteps = 0, njoins = 0;
    for (int k; (k = tkp_reader_next(r, &rec)) != 0;) {
        if (k < 0 || tkp_model_add(&m, &rec)) abort(); /* a bad chunk or record was written */
        uint64_t key = (uint64_t)rec.thread << 32 | rec.step;
        if (rec.type == TKP_REC_STEP && nsteps < 4096) steps[nsteps++] = key;
        if ((rec.type == TKP_REC_GPU_KERNEL || rec.type == TKP_REC_GPU_COPY) &&
            rec.gpu.join != TKP_JOIN_NONE && njoins < 4096)
            joins[njoins++] = key;
    }
    for (size_t i = 0; i < njoins; i++) {
        size_t j = 0;
        while (j < nsteps && steps[j] != joins[i])
            j++;
        if (j == nsteps && nsteps < 4096) abort(); /* joined to a segment that is not there */
    }
    tkp_model_finish(&m);
    if (m.bad_joins) abort(); /* a GPU record joined to a host record that is not there */
    tkp_model_free(&m);
    tkp_reader_close(r);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char in[] = "/tmp/tkp_fuzz_import_XXXXXX", out[64];
    int fd = mkstemp(in);
    if (fd < 0) abort();
    if (write(fd, data, size) != (ssize_t)size) abort();
    close(fd);
    snprintf(out, sizeof(out), "%s.tokprof", in);
    static const struct tkp_import_opts opts[] = {{TKP_IMPORT_STEP_AUTO, NULL},
                                                  {TKP_IMPORT_STEP_ANNOTATION, "^(Profiler|exec)"}};
    for (size_t i = 0; i < sizeof(opts) / sizeof(*opts); i++) {
        struct tkp_import_stats st;
        char why[512];
        why[0] = 0;
        if (tkp_import_kineto(in, out, &opts[i], &st, why, sizeof(why))) {
            if (!why[0] || strchr(why, '\n')) abort(); /* every refusal says why, on one line */
            if (!access(out, F_OK)) abort();           /* and leaves nothing half-written */
            continue;
        }
        check_capture(out);
        unlink(out);
    }
    unlink(in);
    return 0;
}
