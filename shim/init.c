/* Process-level state of the shim: lazy start at the first CUDA call.
 *
 * The constructor does nothing costly: every child of a traced server inherits LD_PRELOAD
 * (compilers, shells, nvidia-smi), and those must pay nothing and write nothing. */
#include "tokprof/tokprof.h"

__attribute__((constructor)) static void tkp_on_load(void)
{
}
