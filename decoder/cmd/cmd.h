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
    /* set by tkp_cmd_parse() on --help or -h: main.c prints the command's usage, exit 0 */
    int help;
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
extern const struct tkp_cmd tkp_cmd_gemm, tkp_cmd_moe; /* cmd/gemm.c, cmd/moe.c */
extern const struct tkp_cmd tkp_cmd_steps, tkp_cmd_kernels; /* cmd/steps.c, cmd/kernels.c */
extern const struct tkp_cmd tkp_cmd_stacks; /* cmd/stacks.c */
extern const struct tkp_cmd tkp_cmd_whatif; /* cmd/whatif.c */
extern const struct tkp_cmd tkp_cmd_doctor; /* cmd/doctor.c */
extern const struct tkp_cmd tkp_cmd_table, tkp_cmd_ingest; /* cmd/table.c, cmd/ingest.c */
extern const struct tkp_cmd tkp_cmd_top, tkp_cmd_serve; /* cmd/top.c, cmd/serve.c (live) */
extern const struct tkp_cmd tkp_cmd_import; /* cmd/import.c */
/* cmd/analyze.c, cmd/diff.c, cmd/export.c, cmd/heatmap.c, cmd/report.c */
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

/* One option of a command for the option parser (tkp_cmd_parse and its two siblings below):
 * its name and where its value goes. A value is the next argument (`--opt V`) or, for a long
 * option, what follows '=' (`--opt=V`). Given twice, the last 's' or 'u' value wins; a 'c'
 * option sees every one (repeatable options, choices, values of other types). */
struct tkp_opt {
    const char *name;  /* "--json", "-o" */
    char kind;         /* 'f': a flag, *(int *)dst = 1 (it takes no value); 's': a string,
                        * *(const char **)dst; 'u': a decimal number up to max, *(uint64_t *)dst
                        * (an int64_t works); 'c': the value handed to fn */
    void *dst;
    uint64_t max;      /* 'u' */
    const char *needs; /* the message when the value is missing; NULL: "NAME needs a value" */
    /* 'c': takes the value v of option `name` (dst as given here); returns 0, or a tkp_err with
     * one line in ctx->why naming the option */
    int (*fn)(struct tkp_ctx *ctx, const char *name, const char *v, void *dst);
};
/* The one option parser of the commands, and what every command gets from it alike:
 *  - an option not in opts: "unknown option '--x'"; a missing value: "--x needs a value" (or
 *    the option's own `needs`); a flag given a value: "--x takes no value"; a number that is
 *    not one: "--x: 'v' is not a number" -- each TKP_ERR_USAGE with the line in ctx->why;
 *  - `--help` or `-h` (before `--`): ctx->help = 1 and TKP_ERR_USAGE, so the command stops
 *    and main.c prints its usage on stdout (exit 0);
 *  - `--` ends the options: every later argument is an argument, even one starting with '-';
 *    a lone `-` is always an argument.
 * The first problem in argument order is the one reported.
 *
 * tkp_cmd_parse: argv[1..argc) by the n options of opts, every other argument a capture
 * (tkp_cmd_input; *path gets the first). Returns 0, or TKP_ERR_USAGE with the reason in
 * ctx->why (the above, more than TKP_CMD_INPUTS_MAX captures, or no capture given). */
int tkp_cmd_parse(struct tkp_ctx *ctx, int argc, char **argv, const struct tkp_opt *opts, size_t n,
                  const char **path);
/* The same, for a command whose other arguments are not (all) captures: they go, in order, to
 * args[0..*nargs), at most max of them (one more: "too many arguments ('ARG')"). The command
 * checks how many it got and what they are. */
int tkp_cmd_parse_args(struct tkp_ctx *ctx, int argc, char **argv, const struct tkp_opt *opts,
                       size_t n, const char **args, size_t max, size_t *nargs);
/* The same, for a command that runs a command line (tokprof run): options end at the first
 * argument that is not one (or after `--`); *first gets its index in argv (argc: none). */
int tkp_cmd_parse_cmdline(struct tkp_ctx *ctx, int argc, char **argv, const struct tkp_opt *opts,
                          size_t n, int *first);

/* The arguments of a command whose only options are --json and --classes FILE, followed by
 * captures (collected with tkp_cmd_input): *path gets the first capture, *cl the classes
 * (tkp_cmd_classes: the caller frees them). Returns 0, or TKP_ERR_USAGE with the reason in
 * ctx->why (an unknown option, no capture) or tkp_cmd_classes' error (nothing to free then). */
int tkp_cmd_args_json_classes(struct tkp_ctx *ctx, int argc, char **argv, const char **path,
                              int *json, struct tkp_classes **cl);

/* Opens a capture for a command, with "PATH: reason" in ctx->why on failure. `path` may be a
 * directory (its *.tokprof files, merged: multireader.h); when it is the first argument
 * tkp_cmd_input() collected, all of them are opened, merged. */
int tkp_cmd_open(struct tkp_ctx *ctx, const char *path, struct tkp_reader **r);

/* A command's -o FILE: FILE opened with fopen's mode, or standard output (ctx->out) for "-".
 * NULL with errno when it cannot be opened (the caller says so). */
FILE *tkp_cmd_output(struct tkp_ctx *ctx, const char *path, const char *mode);

/* After the last tkp_reader_next() of a command (for each file of a merged reader): a torn or
 * bad chunk becomes the warning
 * "PATH: torn tail at byte N (incomplete chunk): decoded up to there" (the capture stays
 * usable: it is how a killed program's capture ends), and names or threads a chunk used without
 * defining them get one warning with their counts. */
void tkp_cmd_warn_reader(struct tkp_ctx *ctx, const char *path, const struct tkp_reader *r);

/* The model of one capture argument: opens `path` (tkp_cmd_open), feeds every record to m
 * (initialised by the caller), finishes, warns about a torn tail (tkp_cmd_warn_reader) and late
 * GPU records, and closes the reader. Returns 0 or a tkp_err with ctx->why set. */
struct tkp_model;
int tkp_cmd_load_model(struct tkp_ctx *ctx, const char *path, struct tkp_model *m);

/* Opens `path` and feeds every record to a fresh model (opts: token steps, classes `cl`) and
 * acc (model/analysis.h), with a progress line on stderr when it is a TTY. On success the caller
 * owns *m and *a. Returns 0 or a tkp_err with ctx->why set (nothing to free then). */
struct tkp_acc;
int tkp_cmd_load_analysis(struct tkp_ctx *ctx, const char *path, const struct tkp_classes *cl,
                          struct tkp_model *m, struct tkp_acc **a);
/* The same with the model's options mo (tkp_cmd_load_analysis': token steps, classes cl). */
struct tkp_model_opts;
int tkp_cmd_load_analysis_opts(struct tkp_ctx *ctx, const char *path,
                               const struct tkp_model_opts *mo, struct tkp_model *m,
                               struct tkp_acc **a);

/* One cell of a row of a columns.def table (spec c; has, v, str as tkp_steprow_cell's) on f:
 * JSON (`"name":value`, a comma before it unless first; null when !has) or CSV (a comma before it
 * unless first; empty when !has; a word quoted when it holds a comma, quote or line break, its
 * quotes doubled: RFC 4180). F64: six decimals. */
struct tkp_colspec;
void tkp_cmd_cell(FILE *f, int json, int first, const struct tkp_colspec *c, int has, int64_t v,
                  const char *str);

#endif
