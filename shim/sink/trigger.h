/* Flight-recorder triggers (trigger.c): a slow step, a signal, a touched file, tokprof_trigger().
 * Writer thread, except the signal handler and tokprof_trigger(). */
#ifndef TKP_SINK_TRIGGER_H
#define TKP_SINK_TRIGGER_H

#include <stddef.h>
#include <stdint.h>

enum tkp_trigger_kind {
    TKP_TRIG_NONE = 0,
    TKP_TRIG_STEP = 1,
    TKP_TRIG_SIGNAL = 2,
    TKP_TRIG_FILE = 3,
    TKP_TRIG_API = 4,
};

/* Signal handler (only if the program left the signal at its default) and the file's baseline. */
void tkp_trigger_start(void);
/* The writer encoded a STEP record: a token step slower than TOKPROF_TRIGGER becomes pending. */
void tkp_trigger_on_step(int kind, uint64_t begin_ns, uint64_t end_ns);
/* The oldest pending trigger, if any: returns its kind (TKP_TRIG_NONE when none) and fills when
 * it happened and a short description. Triggers that arrive together are merged; *merged
 * counts the extra ones. */
int tkp_trigger_take(uint64_t now, uint64_t *at_ns, char *why, size_t cap, unsigned *merged);
void tkp_trigger_after_fork(void);
const char *tkp_trigger_name(int kind);

#endif
