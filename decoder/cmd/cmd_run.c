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
#include "base/err.h"

/* The shim next to this tokprof: build tree (build/decoder/tokprof -> build/shim/) first, then
 * an install (PREFIX/bin/tokprof -> PREFIX/lib/). */
static int find_shim(struct tkp_ctx *ctx, const char *given, char *out, size_t outlen)
{
    char exe[PATH_MAX], cand[2][PATH_MAX + 32];
    if (given) {
        if (!realpath(given, out) || access(out, R_OK))
            return tkp_cmd_fail(ctx, TKP_ERR_NOSHIM, "cannot use shim '%s': %s", given,
                                strerror(errno));
        return 0;
    }
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return tkp_cmd_fail(ctx, TKP_ERR_NOSHIM,
                            "cannot find libtokprof.so (/proc/self/exe: "
                            "%s); name it with --shim PATH or TOKPROF_SHIM",
                            strerror(errno));
    exe[n] = 0;
    char *slash = strrchr(exe, '/');
    *slash = 0;
    snprintf(cand[0], sizeof(cand[0]), "%s/../shim/libtokprof.so", exe);
    snprintf(cand[1], sizeof(cand[1]), "%s/../lib/libtokprof.so", exe);
    for (int i = 0; i < 2; i++)
        if (realpath(cand[i], out) && !access(out, R_OK) && strlen(out) < outlen) return 0;
    return tkp_cmd_fail(ctx, TKP_ERR_NOSHIM,
                        "cannot find libtokprof.so (looked for %s and %s); "
                        "name it with --shim PATH or TOKPROF_SHIM",
                        cand[0], cand[1]);
}

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
    int i, err;
    const struct tkp_opt opts[] = {{"-o", 's', &dir, 0, NULL, NULL},
                                   {"--output", 's', &dir, 0, NULL, NULL},
                                   {"--step", 's', &step, 0, NULL, NULL},
                                   {"--shim", 's', &shim, 0, NULL, NULL}};
    if ((err = tkp_cmd_parse_cmdline(ctx, argc, argv, opts, 4, &i))) return err;
    if (i >= argc) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "no command to run");
    if ((err = find_shim(ctx, shim && *shim ? shim : NULL, shim_path, sizeof(shim_path))) ||
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
        "usage: tokprof run [-o DIR] [--step MODE] [--shim PATH] [--] COMMAND [ARGS...]\n"
        "\n"
        "Runs COMMAND with libtokprof.so preloaded; it writes DIR/PROGRAM.PID.tokprof (one per\n"
        "process, children included). The command's exit status is tokprof's.\n"
        "\n"
        "  -o DIR       where captures go (default: the current directory; created if missing)\n"
        "  --step MODE  how steps are found: auto, sync, graph, nvtx:RE, kernel:RE, marker\n"
        "               (sets TOKPROF_STEP; default auto)\n"
        "  --shim PATH  the libtokprof.so to preload (default: the one installed next to this\n"
        "               tokprof; the TOKPROF_SHIM environment variable does the same)\n"
        "\n"
        "example:\n"
        "  tokprof run -o /tmp/caps -- python -m vllm.entrypoints.openai.api_server --model m\n"
        "  tokprof summary /tmp/caps/python.*.tokprof\n",
    .run = run,
};
