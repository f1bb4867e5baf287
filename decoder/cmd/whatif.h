/* tokprof decoder: whatif's kernel-duration rule (--scale CLASS_OR_REGEX=F), for the commands that
 * replay a change too (report --whatif). */
#ifndef TKP_CMD_WHATIF_H
#define TKP_CMD_WHATIF_H

#include "cmd/cmd.h"
#include "model/classes.h"
#include "model/critpath.h"

struct tkp_whatif_rule;
/* Parses arg (CLASS_OR_REGEX=F, a class of cl or an extended regex, as whatif's --scale; opt names
 * the option in messages) and points ch->scale and ch->scale_arg at it; *out owns it (cl must
 * outlive it). Returns 0, or a tkp_err with the reason in ctx->why. */
int tkp_whatif_rule_new(struct tkp_ctx *ctx, const struct tkp_classes *cl, const char *opt,
                        const char *arg, struct tkp_crit_change *ch, struct tkp_whatif_rule **out);
void tkp_whatif_rule_free(struct tkp_whatif_rule *r); /* accepts NULL */

#endif
