/* tokprof decoder: the live commands' shared command-layer pieces (see cmd/live.h). */
#include "cmd/live.h"
#include "cmd/live_spec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cmd/cmd.h"
#include "capture/follow.h"
#include "model/live.h"

volatile sig_atomic_t tkp_live_stop;

static void on_signal(int sig)
{
    (void)sig;
    tkp_live_stop = 1;
}

void tkp_live_signals(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal; /* no SA_RESTART: a wait in poll() ends at Ctrl-C */
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN); /* a scraper that hangs up is not our end */
}

uint64_t tkp_live_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- feeding ---- */

int tkp_live_pump(struct tkp_ctx *ctx, struct tkp_follow *f, struct tkp_live *l,
                  struct tkp_live_mons *ms, int wait_ms, uint64_t budget_ms, char *last_warn,
                  size_t wl)
{
    uint64_t end = budget_ms == UINT64_MAX ? UINT64_MAX : tkp_live_ms() + budget_ms;
    struct tkp_record rec;
    int rc = 0;
    for (;;) {
        int k = tkp_follow_next(f, &rec, wait_ms);
        const char *w;
        while ((w = tkp_follow_warning(f)))
            if (last_warn)
                snprintf(last_warn, wl, "%s", w);
            else
                ctx->warn(ctx, "%s", w);
        if (k == TKP_FOLLOW_RECORD) {
            if (l && (rc = tkp_live_add(l, &rec))) break;
            if (ms && (rc = tkp_live_mons_feed(ms, &rec))) break;
        } else if (k == TKP_FOLLOW_EXITED) {
            if (l) tkp_live_exited(l, rec.pid);
            if (ms && (rc = tkp_live_mons_exited(ms, rec.pid))) break;
        } else if (k == TKP_FOLLOW_END) {
            rc = 1;
            break;
        } else if (k < 0) {
            rc = k;
            break;
        } else {
            break; /* idle */
        }
        if (tkp_live_stop || tkp_live_ms() >= end) break;
    }
    if (rc < 0) return tkp_cmd_fail(ctx, rc, "out of memory");
    return rc;
}
