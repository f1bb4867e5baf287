/* tokprof decoder: the spec checker run for `tokprof report` — kept apart from cmd_report.c
 * because the spec headers and the model's classes.h both name a `tkp_class`. */
#ifndef TKP_CMD_REPORT_CHECK_H
#define TKP_CMD_REPORT_CHECK_H

struct tkp_ctx;

/* Loads and compiles SPEC, checks CAPTURE against it in one streaming pass and renders the
 * result table of `tokprof check` into *text (malloc'd, caller frees). *violated is 1 when an
 * error-severity assertion failed. Returns 0 or a tkp_err with ctx->why set. */
int tkp_report_spec(struct tkp_ctx *ctx, const char *spec, const char *capture, char **text,
                    int *violated);

#endif
