/* tokprof run: runs a command with libtokprof.so preloaded, like `nsys profile`.
 *
 * Everything is passed through the environment the shim reads (LD_PRELOAD, TOKPROF_OUT,
 * TOKPROF_STEP), then the command replaces this process: its exit status, signals and stdio are
 * the command's own, which is what a wrapper in a service manager or a CI job expects. */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "cmd/doctor.h"
#include "base/err.h"

/* An absolute output directory: the program may chdir before its first CUDA call, when the
 * shim opens its file. */
static int out_dir(struct tkp_ctx *ctx, const char *dir, char *out)
{
    if (mkdir(dir, 0777) && errno != EEXIST)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "cannot create output directory '%s': %s", dir,
                            strerror(errno));
    if (!realpath(dir, out))
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "output directory '%s': %s", dir, strerror(errno));
    return 0;
}

static int run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *dir = ".", *step = NULL, *shim = getenv("TOKPROF_SHIM");
    char shim_path[PATH_MAX], dir_path[PATH_MAX];
    int i, err, check = 0;
    const struct tkp_opt opts[] = {{"-o", 's', &dir, 0, NULL, NULL},
                                   {"--output", 's', &dir, 0, NULL, NULL},
                                   {"--step", 's', &step, 0, NULL, NULL},
                                   {"--shim", 's', &shim, 0, NULL, NULL},
                                   {"--check", 'f', &check, 0, NULL, NULL}};
    if ((err = tkp_cmd_parse_cmdline(ctx, argc, argv, opts, 5, &i))) return err;
    if (check) { /* tokprof doctor on this run, which does not start: nothing is created */
        struct tkp_doctor_opts o = {.shim = shim,
                                    .out_dir = dir,
                                    .step = step,
                                    .prog = i < argc ? argv + i : NULL,
                                    .run = 1};
        return tkp_doctor(ctx, &o);
    }
    if (i >= argc) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "no command to run");
    if ((err = tkp_doctor_find_shim(ctx, shim && *shim ? shim : NULL, shim_path,
                                    sizeof(shim_path))) ||
        (err = out_dir(ctx, dir, dir_path)))
        return err;

    /* ours first: a later preload that also wraps CUDA then sits inside our hooks */
    const char *old = getenv("LD_PRELOAD");
    size_t len = strlen(shim_path) + (old ? strlen(old) : 0) + 2;
    char *preload = malloc(len);
    if (!preload) return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
    snprintf(preload, len, "%s%s%s", shim_path, old && *old ? ":" : "", old ? old : "");
    if (setenv("LD_PRELOAD", preload, 1) || setenv("TOKPROF_OUT", dir_path, 1) ||
        (step && setenv("TOKPROF_STEP", step, 1)) ||
        /* NVTX3 is header-only: ranges reach the shim only through its injection hook */
        setenv("NVTX_INJECTION64_PATH", shim_path, 0)) {
        free(preload);
        return tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "cannot set the environment: %s", strerror(errno));
    }
    free(preload);
    fflush(NULL);
    execvp(argv[i], argv + i);
    return tkp_cmd_fail(ctx, TKP_ERR_EXEC, "cannot run '%s': %s", argv[i], strerror(errno));
}

const struct tkp_cmd tkp_cmd_run = {
    .name = "run",
    .brief = "run a command with libtokprof.so preloaded, writing a capture",
    .usage =
        "usage: tokprof run [-o DIR] [--step MODE] [--shim PATH] [--check] [--] COMMAND [ARGS...]\n"
        "\n"
        "Runs COMMAND with libtokprof.so preloaded; it writes DIR/PROGRAM.PID.tokprof (one per\n"
        "process, children included). The command's exit status is tokprof's.\n"
        "\n"
        "  -o DIR       where captures go (default: the current directory; created if missing)\n"
        "  --step MODE  how steps are found: auto, sync, graph, nvtx:RE, kernel:RE, marker\n"
        "               (sets TOKPROF_STEP; default auto)\n"
        "  --shim PATH  the libtokprof.so to preload (default: the one installed next to this\n"
        "               tokprof; the TOKPROF_SHIM environment variable does the same)\n"
        "  --check      do not run COMMAND: say what a capture of it would do, as tokprof doctor\n"
        "               does, with this -o and --step (exit 0 it will work, 1 problems)\n"
        "\n"
        "example:\n"
        "  tokprof run -o /tmp/caps -- python -m vllm.entrypoints.openai.api_server --model m\n"
        "  tokprof summary /tmp/caps/python.*.tokprof\n",
    .run = run,
};
