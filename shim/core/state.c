/* The process and thread state every floor reads. */
#include <errno.h>

#include "core/state.h"

__thread struct tkp_tls tkp_tls __attribute__((tls_model("initial-exec")));
union tkp_gate tkp_gate;

static _Atomic(tkp_start_fn) start_fn;

void tkp_state_set_start(tkp_start_fn fn)
{
    atomic_store_explicit(&start_fn, fn, memory_order_release);
}

/* Starting runs inside the program's first CUDA call: files, a thread, maybe a directory. None of
 * that may leak into the errno the program sees. */
int tkp_start_slow(void)
{
    tkp_start_fn fn = atomic_load_explicit(&start_fn, memory_order_acquire);
    if (!fn) return 0;
    int saved = errno;
    int rc = fn();
    errno = saved;
    return rc;
}
