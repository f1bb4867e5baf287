/* CUDA driver hooks (hooks_drv.c): what the other hooks ask of them. The interposed entry points
 * themselves are exported, not declared (shim/exports.txt). */
#ifndef TKP_HOOKS_HOOKS_DRV_H
#define TKP_HOOKS_HOOKS_DRV_H

#include <stdint.h>

/* While any stream captures, a launch on a capturing stream is graph topology (recorded at
 * instantiation), not an execution. Costs one driver query, only during captures. */
int tkp_stream_capturing(uint64_t stream, int ptsz);

#endif
