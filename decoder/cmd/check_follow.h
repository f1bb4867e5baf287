/* tokprof decoder: `tokprof check --follow` (cmd/check_follow.c). */
#ifndef TKP_CMD_CHECK_FOLLOW_H
#define TKP_CMD_CHECK_FOLLOW_H

struct tkp_ctx;

/* tokprof check --follow (cmd/check_follow.c), reached from cmd/check.c once it has parsed the
 * options: checks the captures at path (a DIR or a CAPTURE) against spec, printing each
 * violation as its step closes (json: one JSON line each); exit_on stops at the first
 * error-severity one. Returns 0, TKP_ERR_VIOLATION, or a tkp_err with ctx->why set. */
int tkp_cmd_check_follow(struct tkp_ctx *ctx, const char *spec, const char *path, int json,
                         int exit_on);

#endif
