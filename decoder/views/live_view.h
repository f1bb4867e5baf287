/* tokprof decoder: the text frame of `tokprof top` — one block per process: its window figures
 * (live.h), one row per thread, a tokens/s history, the GPU idle split, the top classes or
 * kernels, the worst recent step and its cause. The same text goes to stdout (--once, not a
 * terminal) and, line by line, to the curses screen. */
#ifndef TKP_LIVE_VIEW_H
#define TKP_LIVE_VIEW_H

#include <stdio.h>

#include "model/classes.h"
#include "model/live.h"

struct tkp_live_view {
    const char *source; /* what is followed, for the title */
    unsigned window_s;
    int show_classes, show_kernels, paused;
    int name_width; /* kernel names are cut at this many bytes */
};

void tkp_live_print_frame(FILE *f, const struct tkp_live *l, const struct tkp_classes *cl,
                          const struct tkp_live_view *v);

#endif
