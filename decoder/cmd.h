/* tokprof decoder: the one entry signature every subcommand (cmd_*.c) has, and the context
 * main.c hands it. Commands write results to ctx->out and never print errors themselves: they
 * return a tkp_err and leave the reason in ctx->why (tkp_cmd_fail), and report non-fatal
 * problems through ctx->warn, which main.c implements. */
#ifndef TKP_CMD_H
#define TKP_CMD_H

#include <stdint.h>
#include <stdio.h>

struct tkp_reader;

#define TKP_CMD_INPUTS_MAX 256 /* capture arguments of one command (a directory counts once) */

struct tkp_ctx {
    FILE *out;
    const char *argv0; /* how tokprof was invoked (for tokprof run's shim lookup) */
    char why[512];     /* one line: why the command failed */
    /* the capture arguments tkp_cmd_input() collected (argv strings, not owned) */
    const char *inputs[TKP_CMD_INPUTS_MAX];
    size_t ninputs;
    /* prints "tokprof: warning: ..." on stderr; the command keeps going */
    void (*warn)(struct tkp_ctx *ctx, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
};

/* argv[0] is the command name; argv[argc] is NULL. Returns 0 or a negative tkp_err. */
typedef int tkp_cmd_fn(int argc, char **argv, struct tkp_ctx *ctx);

struct tkp_cmd {
    const char *name;
    const char *brief; /* one line for `tokprof help` */
    const char *usage; /* the full text of `tokprof help NAME`, with an example */
    tkp_cmd_fn *run;
};

extern const struct tkp_cmd tkp_cmd_dump, tkp_cmd_summary, tkp_cmd_run, tkp_cmd_check;
extern const struct tkp_cmd tkp_cmd_gemm, tkp_cmd_moe; /* cmd_gemm.c, cmd_moe.c */
extern const struct tkp_cmd tkp_cmd_steps, tkp_cmd_kernels; /* cmd_steps.c, cmd_kernels.c */
extern const struct tkp_cmd tkp_cmd_stacks; /* cmd_stacks.c */
extern const struct tkp_cmd tkp_cmd_top, tkp_cmd_serve; /* cmd_top.c, cmd_serve.c (live) */
/* cmd_analyze.c, cmd_diff.c, cmd_export.c, cmd_heatmap.c, cmd_report.c */
extern const struct tkp_cmd tkp_cmd_analyze, tkp_cmd_diff, tkp_cmd_export, tkp_cmd_heatmap,
    tkp_cmd_report;

/* Formats ctx->why and returns err: `return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "...")`. */
int tkp_cmd_fail(struct tkp_ctx *ctx, int err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* For commands that read several captures: records the capture argument `arg` (*first gets
 * the first one, the path the command names in its messages). Returns 0 or TKP_ERR_USAGE. */
int tkp_cmd_input(struct tkp_ctx *ctx, const char **first, const char *arg);
/* The kernel classes: built in, overridden by the rules file path (NULL: none). Returns 0, or
 * the error after one line saying why (a bad rules file names its line). */
struct tkp_classes;
int tkp_cmd_classes(struct tkp_ctx *ctx, const char *path, struct tkp_classes **cl);
/* An option's decimal value v (NULL: missing) into *out, at most max. Returns 0, or a usage
 * error naming opt ("--from: 'x' is not a number"). */
int tkp_cmd_num(struct tkp_ctx *ctx, const char *opt, const char *v, uint64_t max, uint64_t *out);

/* The arguments of a command whose only options are --json and --classes FILE, followed by
 * captures (collected with tkp_cmd_input): *path gets the first capture. Returns 0, or
 * TKP_ERR_USAGE with the reason in ctx->why (an unknown option, no capture). */
int tkp_cmd_args_json_classes(struct tkp_ctx *ctx, int argc, char **argv, const char **path,
                              int *json, const char **classes);

/* Opens a capture for a command, with "PATH: reason" in ctx->why on failure. `path` may be a
 * directory (its *.tokprof files, merged: multireader.h); when it is the first argument
 * tkp_cmd_input() collected, all of them are opened, merged. */
int tkp_cmd_open(struct tkp_ctx *ctx, const char *path, struct tkp_reader **r);

/* After the last tkp_reader_next() of a command (for each file of a merged reader): a torn or
 * bad chunk becomes the warning
 * "PATH: torn tail at byte N (incomplete chunk): decoded up to there" (the capture stays
 * usable: it is how a killed program's capture ends), and names or threads a chunk used without
 * defining them get one warning with their counts. */
void tkp_cmd_warn_reader(struct tkp_ctx *ctx, const char *path, const struct tkp_reader *r);

#endif
