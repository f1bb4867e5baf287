/* The public step markers (include/tokprof/tokprof.h): tokprof_step_begin/end from the program. */
#include "core/clock.h"
#include "core/config.h"
#include "core/state.h"
#include "record/ring.h"
#include "record/step.h"
#include "tokprof/format.h"
#include "tokprof/tokprof.h"

static void marker(int kind)
{
    if (!tkp_active()) return;
    struct tkp_ring *r = tkp_ring_self();
    if (!r) return;
    uint64_t ts = tkp_stamp();
    struct tkp_ev *e = tkp_ring_reserve(r);
    if (e) {
        e->type = TKP_REC_MARKER;
        e->sub = (uint8_t)kind;
        e->step = tkp_step_current(r);
        e->ts = ts;
        e->a = 0;
        tkp_ring_commit(r);
    }
    if (tkp_cfg.step_mode == TKP_STEPMODE_MARKER) tkp_step_on_marker(r, kind, ts);
}

TKP_EXPORT void tokprof_step_begin(void)
{
    marker(TKP_MARK_STEP_BEGIN);
}

TKP_EXPORT void tokprof_step_end(void)
{
    marker(TKP_MARK_STEP_END);
}
