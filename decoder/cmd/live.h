/* tokprof decoder: what the live commands (top, serve, check --follow) share at the command
 * layer: feeding the follow reader's records on, Ctrl-C, and spec monitors per process. */
#ifndef TKP_CMD_LIVE_H
#define TKP_CMD_LIVE_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

struct tkp_ctx;
struct tkp_follow;
struct tkp_live;
struct tkp_record;
struct tkp_spec;
struct tkp_mon;
struct tkp_viol;

/* Set by SIGINT / SIGTERM once tkp_live_signals() installed the handlers. */
extern volatile sig_atomic_t tkp_live_stop;
void tkp_live_signals(void);
uint64_t tkp_live_ms(void); /* CLOCK_MONOTONIC milliseconds */

/* Feeds what the follow reader has to l (and, when not NULL, to the monitors ms) until nothing
 * new came for wait_ms or budget_ms passed (or Ctrl-C). Warnings go to ctx->warn, or, when
 * last_warn is not NULL, the last one into it (a curses screen). Returns 0, 1 when every followed
 * process ended (until_exit), or an error with ctx->why set. */
struct tkp_live_mons;
int tkp_live_pump(struct tkp_ctx *ctx, struct tkp_follow *f, struct tkp_live *l,
                  struct tkp_live_mons *ms, int wait_ms, uint64_t budget_ms, char *last_warn,
                  size_t wl);

#endif
