/* tokprof decoder: `tokprof check --follow` (cmd_check_follow.c). */
#ifndef TKP_CMD_CHECK_FOLLOW_H
#define TKP_CMD_CHECK_FOLLOW_H

struct tkp_ctx;

/* tokprof check --follow (cmd_check_follow.c), reached from cmd_check.c. */
int tkp_cmd_check_follow(int argc, char **argv, struct tkp_ctx *ctx);

#endif
