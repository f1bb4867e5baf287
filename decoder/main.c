/* tokprof: explains a capture written by libtokprof.so.
 *
 * The only file that prints errors and picks exit codes: 0 ok, 1 a check found a violation,
 * 2 usage error or unreadable input (the reason on one line of stderr), 3 a check could not
 * decide an assertion (inconclusive) and found no violation. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"
#include "base/err.h"
#include "tokprof/tokprof.h"

static const struct tkp_cmd *const cmds[] = {&tkp_cmd_summary, &tkp_cmd_dump, &tkp_cmd_run, &tkp_cmd_doctor,
                                             &tkp_cmd_gemm, &tkp_cmd_moe, &tkp_cmd_check,
                                             &tkp_cmd_steps, &tkp_cmd_kernels, &tkp_cmd_analyze,
                                             &tkp_cmd_diff, &tkp_cmd_export, &tkp_cmd_heatmap,
                                             &tkp_cmd_report, &tkp_cmd_stacks,
                                             &tkp_cmd_table, &tkp_cmd_ingest,
                                             &tkp_cmd_top, &tkp_cmd_serve,
                                             &tkp_cmd_import, &tkp_cmd_whatif};
#define NCMDS (sizeof(cmds) / sizeof(*cmds))

static void usage(FILE *f)
{
    fprintf(f, "usage: tokprof COMMAND [ARGS]\n"
               "\n"
               "Explains where the GPU time of each output token went, from a capture written by\n"
               "libtokprof.so (tokprof run YOUR_SERVER ..., or LD_PRELOAD=libtokprof.so).\n"
               "\n"
               "commands:\n");
    for (size_t i = 0; i < NCMDS; i++)
        fprintf(f, "  %-10s %s\n", cmds[i]->name, cmds[i]->brief);
    fprintf(f, "  %-10s %s\n", "help", "this text; 'tokprof help COMMAND' for one command");
    fprintf(f, "  %-10s %s\n", "version", "print the version");
}

static const struct tkp_cmd *find(const char *name)
{
    for (size_t i = 0; i < NCMDS; i++)
        if (!strcmp(cmds[i]->name, name)) return cmds[i];
    return NULL;
}

static void warn(struct tkp_ctx *ctx, const char *fmt, ...)
{
    va_list ap;
    (void)ctx;
    fflush(stdout); /* keep warnings after the output they follow when both go to a terminal */
    fputs("tokprof: warning: ", stderr);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fputc('\n', stderr);
}

static int is_help(const char *a)
{
    return !strcmp(a, "--help") || !strcmp(a, "-h");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *name = argv[1];
    if (!strcmp(name, "help") || is_help(name)) {
        if (argc < 3) {
            usage(stdout);
            return 0;
        }
        const struct tkp_cmd *c = find(argv[2]);
        if (!c) {
            fprintf(stderr, "tokprof: unknown command '%s' (try 'tokprof help')\n", argv[2]);
            return 2;
        }
        fputs(c->usage, stdout);
        return 0;
    }
    if (!strcmp(name, "version") || !strcmp(name, "--version")) {
        printf("tokprof %s\n", TOKPROF_VERSION_STRING);
        return 0;
    }
    const struct tkp_cmd *c = find(name);
    if (!c) {
        fprintf(stderr, "tokprof: unknown command '%s' (try 'tokprof help')\n", name);
        return 2;
    }
    struct tkp_ctx ctx = {.out = stdout, .argv0 = argv[0], .warn = warn};
    int err = c->run(argc - 1, argv + 1, &ctx);
    if (ctx.help) { /* --help or -h among the command's options (cmd.h: tkp_cmd_parse) */
        fputs(c->usage, stdout);
        return 0;
    }
    if (fflush(stdout) && !err)
        snprintf(ctx.why, sizeof(ctx.why), "cannot write the output"), err = TKP_ERR_IO;
    if (!err) return 0;
    fprintf(stderr, "tokprof %s: %s", c->name, ctx.why[0] ? ctx.why : tkp_strerror(err));
    if (err == TKP_ERR_USAGE) fprintf(stderr, " (try 'tokprof help %s')", c->name);
    fputc('\n', stderr);
    return err == TKP_ERR_VIOLATION ? 1 : err == TKP_ERR_INCONCLUSIVE ? 3 : 2;
}
