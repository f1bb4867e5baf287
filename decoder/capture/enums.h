/* tokprof decoder: the words for the format's numbers (docs/FORMAT.md "Field values"), as dump
 * prints them and as users type them in filters. An unknown value (a newer writer) becomes
 * "unknown(N)" in the caller's buffer rather than an error. */
#ifndef TKP_ENUMS_H
#define TKP_ENUMS_H

#include <stdint.h>

#define TKP_ENUM_BUF 24 /* enough for "unknown(4294967295)" and "driver_ex_ptsz" */

/* Each returns a static string, or buf filled with "unknown(N)". */
const char *tkp_via_str(uint32_t via, char buf[TKP_ENUM_BUF]); /* "runtime", "graph_rt_ptsz" */
const char *tkp_copy_kind_str(uint32_t kind, char buf[TKP_ENUM_BUF]);
const char *tkp_copy_dir_str(uint32_t dir, char buf[TKP_ENUM_BUF]);
const char *tkp_sync_kind_str(uint32_t kind, char buf[TKP_ENUM_BUF]);
const char *tkp_step_kind_str(uint32_t kind, char buf[TKP_ENUM_BUF]);
const char *tkp_closed_by_str(uint32_t closed_by, char buf[TKP_ENUM_BUF]);
const char *tkp_nvtx_kind_str(uint32_t kind, char buf[TKP_ENUM_BUF]);
const char *tkp_marker_kind_str(uint32_t kind, char buf[TKP_ENUM_BUF]);
const char *tkp_node_type_str(uint32_t type, char buf[TKP_ENUM_BUF]);
/* "launch", "graph_launch", ... for the dump "type" field; NULL for an unknown type. */
const char *tkp_rec_str(uint32_t type);

/* GPU_INFO.status and GPU_KERNEL/GPU_COPY.join as words ("cupti_busy", "graph_launch"). */
const char *tkp_gpu_status_str(uint32_t v);
const char *tkp_gpu_join_str(uint32_t v);

#endif
