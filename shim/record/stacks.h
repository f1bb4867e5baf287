/* Sampled host call stacks at launch sites (TOKPROF_STACKS, docs/FORMAT.md "Stacks").
 *
 * Producer side (the launch path, hooks.h): tkp_stacks_on_launch() decides whether this launch is
 * sampled; only a sampled launch unwinds, interns its stack in a process-wide lock-free table and
 * pushes one TKP_EV_STACK ring event (the stack id) right before its LAUNCH event.
 * Writer side: tkp_stacks_note() keeps that id per thread, tkp_stacks_encode() emits the MODULE
 * and STACK records the LAUNCH needs (once per chunk each) and returns the id for its `stack`
 * field. Nothing is symbolised here: the decoder reads the modules' ELF symbols offline. */
#ifndef TKP_RECORD_STACKS_H
#define TKP_RECORD_STACKS_H

#include <msgpack.h>

#include "core/config.h"
#include "record/ring.h"

#define TKP_STACK_DEPTH 32  /* frames kept per stack, outside the shim */

extern int tkp_stacks_mode;     /* enum tkp_stacks_mode (core/config.h), set at capture start */
extern uint32_t tkp_stacks_n;   /* sample:N */

/* Takes TOKPROF_STACKS and TOKPROF_STACKS_UNWINDER from tkp_cfg (shim/init.c, after
 * tkp_config_load). */
void tkp_stacks_config(void);
/* At capture start, before the writer runs: picks the unwinder (libunwind.so.8 by dlopen, else
 * glibc backtrace()), maps the tables, warms the unwinder on this thread, lists the modules.
 * On any failure stacks are turned off with one warning line; capture goes on. */
void tkp_stacks_start(void);
/* Fork child: fresh per-site counts and per-chunk bookkeeping. */
void tkp_stacks_after_fork(void);
/* "off", "first:4 libunwind", ... for the META config map. */
const char *tkp_stacks_desc(void);

/* Slow paths of tkp_stacks_on_launch. */
int tkp_stacks_site_first(uint64_t key, int via);
void tkp_stacks_capture(struct tkp_ring *r, uint64_t ts);

/* Launch path, only when TOKPROF_STACKS is not off. sample:N: a per-thread countdown (the first
 * launch of each thread, then one in N). first:K: the first K launches of each site, where a site
 * is the launched function (host stub, kernel handle or CUfunction) and its entry point: the
 * caller's address is not known without unwinding, so one kernel launched from several call
 * sites gets K stacks in all, from whichever ran first. */
static inline void tkp_stacks_on_launch(struct tkp_ring *r, uint64_t key, int via, uint64_t ts)
{
    if (tkp_stacks_mode == TKP_STACKS_SAMPLE) {
        if (TKP_LIKELY(tkp_tls.stk_left-- > 1)) return;
        tkp_tls.stk_left = tkp_stacks_n;
    } else if (TKP_LIKELY(!tkp_stacks_site_first(key, via))) {
        return;
    }
    tkp_stacks_capture(r, ts);
}

/* Writer thread only. */
void tkp_stacks_note(const struct tkp_ev *e, uint32_t thread);
/* The stack id of the LAUNCH (thread, ts) being encoded, 0 none; emits the MODULE and STACK
 * records it needs into pk first when chunk `seq` has not had them yet. */
uint32_t tkp_stacks_encode(msgpack_packer *pk, uint32_t seq, uint32_t thread, uint64_t ts);

#endif
