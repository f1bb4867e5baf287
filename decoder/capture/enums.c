/* tokprof decoder: words for the format's numbers (see enums.h). */
#include "capture/enums.h"

#include <stdio.h>

#include "tokprof/format.h"

#define N(a) (sizeof(a) / sizeof(*(a)))

static const char *pick(const char *const *names, uint32_t n, uint32_t v, char *buf)
{
    if (v < n && names[v]) return names[v];
    snprintf(buf, TKP_ENUM_BUF, "unknown(%u)", v);
    return buf;
}

const char *tkp_via_str(uint32_t via, char buf[TKP_ENUM_BUF])
{
    static const char *const names[] = {
        [TKP_VIA_RUNTIME] = "runtime",   [TKP_VIA_RUNTIME_EX] = "runtime_ex",
        [TKP_VIA_DRIVER] = "driver",     [TKP_VIA_DRIVER_EX] = "driver_ex",
        [TKP_VIA_GRAPH_RT] = "graph_rt", [TKP_VIA_GRAPH_DRV] = "graph_drv",
    };
    uint32_t base = via & ~(uint32_t)TKP_VIA_PTSZ;
    if (base >= N(names) || !names[base]) return pick(names, 0, via, buf);
    if (!(via & TKP_VIA_PTSZ)) return names[base];
    snprintf(buf, TKP_ENUM_BUF, "%s_ptsz", names[base]);
    return buf;
}

const char *tkp_copy_kind_str(uint32_t v, char buf[TKP_ENUM_BUF])
{
    static const char *const names[] = {"memcpy", "memset"};
    return pick(names, N(names), v, buf);
}

const char *tkp_copy_dir_str(uint32_t v, char buf[TKP_ENUM_BUF])
{
    static const char *const names[] = {"HtoH", "HtoD", "DtoH", "DtoD", "default"};
    return pick(names, N(names), v, buf);
}

const char *tkp_sync_kind_str(uint32_t v, char buf[TKP_ENUM_BUF])
{
    static const char *const names[] = {"stream", "event",       "device",
                                        "ctx",    "event_query", "memcpy"};
    return pick(names, N(names), v, buf);
}

const char *tkp_step_kind_str(uint32_t v, char buf[TKP_ENUM_BUF])
{
    static const char *const names[] = {"token", "outside", "warmup", "part"};
    return pick(names, N(names), v, buf);
}

const char *tkp_closed_by_str(uint32_t v, char buf[TKP_ENUM_BUF])
{
    static const char *const names[] = {"event_sync",    "stream_sync", "device_sync",
                                        "blocking_copy", "next_step",   "nvtx",
                                        "marker",        "exit",        "event_query"};
    return pick(names, N(names), v, buf);
}

const char *tkp_nvtx_kind_str(uint32_t v, char buf[TKP_ENUM_BUF])
{
    static const char *const names[] = {"push", "pop", "mark", "range_start", "range_end"};
    return pick(names, N(names), v, buf);
}

const char *tkp_marker_kind_str(uint32_t v, char buf[TKP_ENUM_BUF])
{
    static const char *const names[] = {"step_begin", "step_end"};
    return pick(names, N(names), v, buf);
}

const char *tkp_node_type_str(uint32_t v, char buf[TKP_ENUM_BUF])
{
    static const char *const names[] = {"kernel", "memcpy", "memset", "other"};
    return pick(names, N(names), v, buf);
}

const char *tkp_rec_str(uint32_t type)
{
    static const char *const names[] = {
        [TKP_REC_CHUNK] = "chunk",
        [TKP_REC_NAME] = "name",
        [TKP_REC_META] = "meta",
        [TKP_REC_THREAD] = "thread",
        [TKP_REC_LAUNCH] = "launch",
        [TKP_REC_GRAPH_LAUNCH] = "graph_launch",
        [TKP_REC_GRAPH] = "graph",
        [TKP_REC_COPY] = "copy",
        [TKP_REC_SYNC] = "sync",
        [TKP_REC_EVENT_RECORD] = "event_record",
        [TKP_REC_STREAM_WAIT] = "stream_wait",
        [TKP_REC_STEP] = "step",
        [TKP_REC_NVTX] = "nvtx",
        [TKP_REC_LOSS] = "loss",
        [TKP_REC_MARKER] = "marker",
        [TKP_REC_LIB_CALL] = "lib_call",
        [TKP_REC_STACK] = "stack",
        [TKP_REC_MODULE] = "module",
        [TKP_REC_GPU_KERNEL] = "gpu_kernel",
        [TKP_REC_GPU_COPY] = "gpu_copy",
        [TKP_REC_GPU_INFO] = "gpu_info",
    };
    return type < N(names) ? names[type] : NULL;
}

const char *tkp_gpu_status_str(uint32_t v)
{
    static const char *const names[] = {
        [TKP_GPU_ON] = "on",           [TKP_GPU_OFF] = "off",         [TKP_GPU_NO_CUPTI] = "no_cupti",
        [TKP_GPU_BUSY] = "cupti_busy", [TKP_GPU_NO_DEVICE] = "no_gpu", [TKP_GPU_ERROR] = "error",
    };
    return v < N(names) ? names[v] : "unknown";
}

const char *tkp_gpu_join_str(uint32_t v)
{
    static const char *const names[] = {[TKP_JOIN_NONE] = "none", [TKP_JOIN_LAUNCH] = "launch",
                                        [TKP_JOIN_GRAPH_LAUNCH] = "graph_launch",
                                        [TKP_JOIN_COPY] = "copy"};
    return v < N(names) ? names[v] : "unknown";
}
