/* tokprof dump: every record as one JSON object per line (JSON Lines), for jq and scripts.
 *
 * Names and threads are resolved inline, so the bookkeeping records (CHUNK, NAME, THREAD) are
 * shown only with --raw. Handles are hex strings, enums are words (enums.h). */
#include <inttypes.h>
#include <string.h>

#include "cmd/cmd.h"
#include "capture/enums.h"
#include "base/err.h"
#include "base/json.h"
#include "model/libcalls.h"
#include "capture/multireader.h"
#include "capture/reader.h"

#define TYPES_MAX 64 /* record types are small numbers (format.h) */

static void dim3(FILE *f, const char *key, const uint32_t v[3])
{
    fprintf(f, ",\"%s\":[%u,%u,%u]", key, v[0], v[1], v[2]);
}

static void hex(FILE *f, const char *key, uint64_t v)
{
    fprintf(f, ",\"%s\":", key);
    tkp_json_hex(f, v);
}

static void word(FILE *f, const char *key, const char *v)
{
    fprintf(f, ",\"%s\":", key);
    tkp_json_str(f, v);
}

static void print_graph(FILE *f, const struct tkp_record *r)
{
    char b[TKP_ENUM_BUF];
    fprintf(f, ",\"graph\":%" PRIu64 ",\"nodes\":[", r->graph.graph);
    for (uint32_t i = 0; i < r->graph.nnodes; i++) {
        const struct tkp_graph_node *n = &r->graph.nodes[i];
        fprintf(f, "%s{\"node\":%" PRIu64, i ? "," : "", n->node);
        word(f, "type", tkp_node_type_str(n->type, b));
        word(f, "name", n->name);
        dim3(f, "grid", n->grid);
        dim3(f, "block", n->block);
        fputs(",\"deps\":[", f);
        for (uint32_t j = 0; j < n->ndeps; j++)
            fprintf(f, "%s%" PRIu64, j ? "," : "", n->deps[j]);
        fputs("]}", f);
    }
    putc(']', f);
}

/* GPU_KERNEL / GPU_COPY: GPU times, and the host record they join (thread/tid/step/launch). */
static void print_gpu(FILE *f, const struct tkp_record *r)
{
    char b[TKP_ENUM_BUF];
    fprintf(f, ",\"start_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64, r->gpu.start_ns, r->gpu.end_ns);
    word(f, "name", r->gpu.name);
    if (r->type == TKP_REC_GPU_COPY) {
        word(f, "kind", tkp_copy_kind_str(r->gpu.kind, b));
        word(f, "dir", tkp_copy_dir_str(r->gpu.dir, b));
        fprintf(f, ",\"bytes\":%" PRIu64, r->gpu.bytes);
    }
    fprintf(f, ",\"stream\":%u,\"correlation\":%u", r->gpu.stream, r->gpu.correlation);
    if (r->thread == TKP_GPU_THREAD_NONE) fputs(",\"thread\":null,\"tid\":null,\"step\":null", f);
    else fprintf(f, ",\"thread\":%u,\"tid\":%u,\"step\":%" PRIu64, r->thread, r->tid, r->step);
    word(f, "join", tkp_gpu_join_str(r->gpu.join));
    fprintf(f, ",\"index\":%u", r->gpu.index);
    if (r->gpu.graph == TKP_GRAPH_UNKNOWN) fputs(",\"graph\":null,\"node\":null", f);
    else fprintf(f, ",\"graph\":%" PRIu64 ",\"node\":%" PRIu64, r->gpu.graph, r->gpu.node);
    if (r->type == TKP_REC_GPU_KERNEL) {
        dim3(f, "grid", r->gpu.grid);
        dim3(f, "block", r->gpu.block);
    }
}

static void print_gpu_info(FILE *f, const struct tkp_record *r)
{
    word(f, "status", tkp_gpu_status_str(r->gpu_info.status));
    word(f, "mode", r->gpu_info.mode);
    word(f, "reason", r->gpu_info.reason);
    word(f, "clock", r->gpu_info.clock);
    fprintf(f,
            ",\"records\":%" PRIu64 ",\"dropped\":%" PRIu64 ",\"bad_time\":%" PRIu64
            ",\"unjoined\":%" PRIu64 ",\"filtered\":%" PRIu64 ",\"buffer_bytes_peak\":%" PRIu64,
            r->gpu_info.records, r->gpu_info.dropped, r->gpu_info.bad_time, r->gpu_info.unjoined,
            r->gpu_info.filtered, r->gpu_info.buffer_bytes_peak);
}

static void print_lib_call(FILE *f, const struct tkp_record *r)
{
    char b[7][24];
    fprintf(f, ",\"call\":%u", r->lib_call.call);
    word(f, "lib", tkp_lib_str(r->lib_call.lib, b[6]));
    word(f, "op", r->lib_call.op);
    fprintf(f, ",\"m\":%" PRIu64 ",\"n\":%" PRIu64 ",\"k\":%" PRIu64 ",\"batch\":%" PRIu64,
            r->lib_call.m, r->lib_call.n, r->lib_call.k, r->lib_call.batch);
    word(f, "atype", tkp_dtype_str(r->lib_call.atype, b[0]));
    word(f, "btype", tkp_dtype_str(r->lib_call.btype, b[1]));
    word(f, "ctype", tkp_dtype_str(r->lib_call.ctype, b[2]));
    word(f, "compute", tkp_compute_str(r->lib_call.compute, b[3]));
    word(f, "transa", tkp_trans_str(r->lib_call.transa, b[4]));
    word(f, "transb", tkp_trans_str(r->lib_call.transb, b[5]));
    hex(f, "stream", r->lib_call.stream);
    hex(f, "a_ptr", r->lib_call.a_ptr);
    fprintf(f, ",\"call_ns\":%" PRIu64 ",\"status\":%u,\"captured\":%s", r->lib_call.call_ns,
            r->lib_call.status, r->lib_call.flags & TKP_LIBF_CAPTURED ? "true" : "false");
}

/* pid: with several files, each record says its process (META has its own "pid" key). */
static void print_record(FILE *f, const struct tkp_record *r, int pid)
{
    static const char *const meta_skip[] = {"type", NULL};
    char b[TKP_ENUM_BUF];
    fprintf(f, "{\"type\":\"%s\"", tkp_rec_str(r->type));
    if (pid && r->type != TKP_REC_META) fprintf(f, ",\"pid\":%" PRIu64, r->pid);
    if (tkp_record_has_time(r->type))
        fprintf(f, ",\"host_ns\":%" PRIu64 ",\"tid\":%u,\"step\":%" PRIu64, r->host_ns, r->tid,
                r->step);
    switch (r->type) {
    case TKP_REC_CHUNK:
        fprintf(f, ",\"seq\":%" PRIu64 ",\"base_ns\":%" PRIu64 ",\"offset\":%" PRIu64, r->chunk.seq,
                r->chunk.base_ns, r->offset);
        break;
    case TKP_REC_NAME:
        fprintf(f, ",\"id\":%" PRIu64, r->name.id);
        word(f, "name", r->name.str);
        break;
    case TKP_REC_THREAD:
        fprintf(f, ",\"thread\":%u,\"tid\":%u", r->thread, r->tid);
        break;
    case TKP_REC_META:
        /* the map's own keys, so that `jq .program` works; its bytes were checked by the
         * reader, so a failure here cannot happen */
        tkp_json_msgpack_members(f, r->meta.map, r->meta.map_len, meta_skip);
        break;
    case TKP_REC_LAUNCH:
        word(f, "name", r->launch.name);
        hex(f, "stream", r->launch.stream);
        word(f, "via", tkp_via_str(r->launch.via, b));
        dim3(f, "grid", r->launch.grid);
        dim3(f, "block", r->launch.block);
        fprintf(f, ",\"smem\":%u", r->launch.smem);
        if (r->launch.call) fprintf(f, ",\"call\":%u", r->launch.call);
        if (r->launch.stack) fprintf(f, ",\"stack\":%u", r->launch.stack);
        break;
    case TKP_REC_STACK:
        fprintf(f, ",\"id\":%" PRIu64 ",\"pcs\":[", r->stack.id);
        for (uint32_t i = 0; i < r->stack.n; i++) {
            if (i) putc(',', f);
            tkp_json_hex(f, r->stack.pcs[i]);
        }
        putc(']', f);
        break;
    case TKP_REC_MODULE:
        fprintf(f, ",\"id\":%" PRIu64, r->module.id);
        word(f, "path", r->module.path);
        word(f, "build_id", r->module.build_id);
        hex(f, "base", r->module.base);
        fprintf(f, ",\"size\":%" PRIu64, r->module.size);
        break;
    case TKP_REC_LIB_CALL:
        print_lib_call(f, r);
        break;
    case TKP_REC_GRAPH_LAUNCH:
        if (r->graph_launch.graph == TKP_GRAPH_UNKNOWN) fputs(",\"graph\":-1", f);
        else fprintf(f, ",\"graph\":%" PRIu64, r->graph_launch.graph);
        hex(f, "stream", r->graph_launch.stream);
        word(f, "via", tkp_via_str(r->graph_launch.via, b));
        break;
    case TKP_REC_GRAPH:
        print_graph(f, r);
        break;
    case TKP_REC_COPY:
        word(f, "kind", tkp_copy_kind_str(r->copy.kind, b));
        word(f, "dir", tkp_copy_dir_str(r->copy.dir, b));
        fprintf(f, ",\"bytes\":%" PRIu64, r->copy.bytes);
        hex(f, "stream", r->copy.stream);
        fprintf(f, ",\"async\":%s,\"pinned\":%s", r->copy.flags & TKP_COPY_ASYNC ? "true" : "false",
                r->copy.flags & TKP_COPY_PINNED ? "true" : "false");
        break;
    case TKP_REC_SYNC:
        word(f, "kind", tkp_sync_kind_str(r->sync.kind, b));
        hex(f, "handle", r->sync.handle);
        fprintf(f, ",\"wait_ns\":%" PRIu64, r->sync.wait_ns);
        break;
    case TKP_REC_EVENT_RECORD:
        hex(f, "event", r->event_record.event);
        hex(f, "stream", r->event_record.stream);
        break;
    case TKP_REC_STREAM_WAIT:
        hex(f, "stream", r->stream_wait.stream);
        hex(f, "event", r->stream_wait.event);
        break;
    case TKP_REC_STEP:
        fprintf(f, ",\"step\":%" PRIu64 ",\"tid\":%u", r->step, r->tid);
        word(f, "kind", tkp_step_kind_str(r->step_rec.kind, b));
        fprintf(f, ",\"begin_ns\":%" PRIu64 ",\"mark_ns\":%" PRIu64 ",\"end_ns\":%" PRIu64,
                r->step_rec.begin_ns, r->step_rec.mark_ns, r->step_rec.end_ns);
        word(f, "closed_by", tkp_closed_by_str(r->step_rec.closed_by, b));
        fprintf(f, ",\"launches\":%" PRIu64 ",\"graph_launches\":%" PRIu64 ",\"copies\":%" PRIu64,
                r->step_rec.launches, r->step_rec.graph_launches, r->step_rec.copies);
        break;
    case TKP_REC_NVTX:
        word(f, "kind", tkp_nvtx_kind_str(r->nvtx.kind, b));
        word(f, "name", r->nvtx.name);
        fprintf(f, ",\"range_id\":%" PRIu64, r->nvtx.range_id);
        break;
    case TKP_REC_LOSS:
        fprintf(f, ",\"tid\":%u,\"dropped\":%" PRIu64, r->tid, r->loss.dropped);
        break;
    case TKP_REC_MARKER:
        word(f, "kind", tkp_marker_kind_str(r->marker.kind, b));
        fprintf(f, ",\"value\":%" PRId64, r->marker.value);
        break;
    case TKP_REC_GPU_KERNEL:
    case TKP_REC_GPU_COPY:
        print_gpu(f, r);
        break;
    case TKP_REC_GPU_INFO:
        print_gpu_info(f, r);
        break;
    default:
        break;
    }
    fputs("}\n", f);
}

/* --type launch,copy: a set of record types */
static int parse_types(struct tkp_ctx *ctx, const char *list, unsigned char want[TYPES_MAX])
{
    char buf[256];
    snprintf(buf, sizeof(buf), "%s", list);
    memset(want, 0, TYPES_MAX);
    for (char *save, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        int found = 0;
        for (int i = 0; i < TYPES_MAX; i++)
            if (tkp_rec_str(i) && !strcmp(tkp_rec_str(i), t)) want[i] = found = 1;
        if (!found)
            return tkp_cmd_fail(ctx, TKP_ERR_USAGE,
                                "unknown record type '%s' (types: meta, "
                                "launch, graph_launch, graph, copy, sync, event_record, "
                                "stream_wait, step, nvtx, loss, marker, lib_call, stack, module, "
                                "chunk, name, thread)",
                                t);
    }
    return 0;
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    unsigned char want[TYPES_MAX];
    const char *path, *types = NULL;
    int raw = 0, err;
    const struct tkp_opt opts[] = {{"--raw", 'f', &raw, 0, NULL, NULL},
                                   {"--type", 's', &types, 0, NULL, NULL}};
    if ((err = tkp_cmd_parse(ctx, argc, argv, opts, 2, &path))) return err;
    if (types) {
        if ((err = parse_types(ctx, types, want))) return err;
    } else {
        memset(want, 1, sizeof(want));
        want[TKP_REC_CHUNK] = want[TKP_REC_NAME] = want[TKP_REC_THREAD] = (unsigned char)raw;
    }

    struct tkp_reader *r;
    struct tkp_record rec;
    if ((err = tkp_cmd_open(ctx, path, &r))) return err;
    int pid = tkp_reader_nfiles(r) > 1;
    while (tkp_reader_next(r, &rec) == 1)
        if (rec.type < TYPES_MAX && want[rec.type]) print_record(ctx->out, &rec, pid);
    tkp_cmd_warn_reader(ctx, path, r);
    tkp_reader_close(r);
    return 0;
}

const struct tkp_cmd tkp_cmd_dump = {
    .name = "dump",
    .brief = "print every record as one JSON line",
    .usage =
        "usage: tokprof dump [--type T[,T...]] [--raw] CAPTURE...\n"
        "\n"
        "Prints each record of the capture FILE as one JSON object per line, in file order, with\n"
        "a \"type\" field (meta, launch, graph_launch, graph, copy, sync, event_record,\n"
        "stream_wait, step, nvtx, loss, marker, lib_call, stack, module). Kernel names and\n"
        "thread ids are resolved;\n"
        "timestamps are absolute CLOCK_MONOTONIC nanoseconds (host_ns); handles are \"0x..\".\n"
        "A capture cut short (a killed program) is decoded up to its last whole chunk, with a\n"
        "warning on stderr.\n"
        "CAPTURE... is one or more captures or directories (their *.tokprof files), merged on\n"
        "one timeline by host time; a process's rotated files read as one (docs/OPERATIONS.md).\n"
        "Then each record has a \"pid\" and, merged from several processes, \"thread\" is\n"
        "renumbered to stay unique per process.\n"
        "\n"
        "  --type T   only records of these types (comma-separated)\n"
        "  --raw      also the bookkeeping records: chunk, name, thread (templates and runs,\n"
        "             FORMAT.md, are always expanded into the records they stand for)\n"
        "\n"
        "example: the ten most launched kernels\n"
        "  tokprof dump --type launch server.1234.tokprof | jq -r .name | sort | uniq -c |\n"
        "      sort -rn | head\n",
    .run = run,
};
