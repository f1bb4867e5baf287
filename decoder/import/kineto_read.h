/* tokprof decoder: the reading half of tokprof import's Kineto importer (kineto.h): the trace's
 * JSON, streamed, into the kept events (runtime calls, GPU work, annotations) and the file's
 * top-level facts. kineto.c joins them and writes the capture. Internal to decoder/import/. */
#ifndef TKP_IMPORT_KINETO_READ_H
#define TKP_IMPORT_KINETO_READ_H

#include <stddef.h>
#include <stdint.h>
#include <zlib.h>

#include "base/jsonr.h"
#include "base/map.h"
#include "import/kineto.h"

#define TKP_KINETO_NONE UINT64_MAX /* a handle or stream the trace does not give */
#define TKP_KINETO_DEVICES_MAX 16
#define TKP_KINETO_TIME_MAX (INT64_C(1) << 62) /* ns: later times are refused (bad_times) */

/* host records: what a runtime call becomes */
enum {
    TKP_KH_LAUNCH = 1,
    TKP_KH_GRAPH,
    TKP_KH_COPY,
    TKP_KH_SYNC,
    TKP_KH_EVREC,
    TKP_KH_WAIT,
    TKP_KH_PUSH,
    TKP_KH_POP,
    TKP_KH_OTHER
};

struct tkp_khost {
    int64_t ts, dur;
    uint64_t corr;
    int64_t gpu; /* the first GPU event of the same correlation, -1 none */
    uint32_t thread, name;
    uint8_t cls, sub, flags, has_corr; /* sub: via, sync kind or copy kind */
    uint32_t seg, index;
};

struct tkp_kgpu {
    int64_t ts, dur;
    uint64_t corr, stream, bytes;
    int64_t host; /* the host event of the same correlation, -1 none */
    uint32_t name, smem, grid[3], block[3];
    uint8_t copy, ckind, cdir, has_corr;
};

struct tkp_kseg {
    uint32_t thread;
    uint32_t seg;
    int kind;
    uint32_t closed_by;
    int64_t begin, mark, end, gpu_end;
    uint64_t launches, graphs, copies;
};

struct tkp_kineto_names {
    char **s;
    size_t n, cap;
    struct tkp_map ix; /* s by content */
};

struct tkp_kineto_imp {
    const struct tkp_import_opts *opts;
    struct tkp_import_stats *st;
    struct tkp_jsonr j;
    gzFile gz;
    const char *gzwhy;
    struct tkp_kineto_names nm;
    struct tkp_khost *h;
    size_t nh, caph;
    struct tkp_kgpu *g;
    size_t ng, capg;
    struct tkp_kseg *segs;
    size_t nsegs, capsegs;
    uint64_t *tids; /* capture thread -> OS tid */
    size_t ntids, captids;
    /* the file's top-level facts */
    int64_t base_ns;
    uint64_t pid, rt_version, drv_version, hip_version;
    int has_pid;
    char *trace_name;
    char *devices[TKP_KINETO_DEVICES_MAX];
    int ndevices;
    /* the event being read */
    char ph[8], cat[32], akind[16];
    char *name;
    size_t name_len, name_cap;
    char *why;
    size_t whylen;
};

/* Reads the whole trace at `in` into im (zeroed, with opts, st, why and whylen set). Returns 0 or a
 * tkp_err with one line in im->why. */
int tkp_kineto_read(struct tkp_kineto_imp *im, const char *in);
/* The id of name s (len bytes) in t, added when new. Returns 0 or TKP_ERR_NOMEM. */
int tkp_kineto_intern(struct tkp_kineto_names *t, const char *s, size_t len, uint32_t *id);
/* Frees what tkp_kineto_read() allocated in im. */
void tkp_kineto_free(struct tkp_kineto_imp *im);

#endif
