/* tokprof top [DIR|CAPTURE]: running processes' tokens/s, latency and GPU time, refreshed every
 * second (curses), or one frame (--once, or when stdout is not a terminal). */
#define _XOPEN_SOURCE_EXTENDED 1
#ifndef TKP_NO_CURSES
#include <curses.h>
#endif
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "cmd/live.h"
#include "base/err.h"
#include "capture/follow.h"
#include "model/live.h"
#include "views/live_view.h"
#include "capture/reader.h"

#ifndef TKP_NO_CURSES
static int interactive(struct tkp_ctx *ctx, struct tkp_follow *f, struct tkp_live *l,
                       const struct tkp_classes *cl, struct tkp_live_view *v, unsigned interval)
{
    char warn[320] = "";
    if (!initscr()) return tkp_cmd_fail(ctx, TKP_ERR_IO, "cannot start the terminal screen");
    cbreak();
    noecho();
    nodelay(stdscr, TRUE);
    keypad(stdscr, TRUE);
    curs_set(0);
    int rc = 0;
    uint64_t next = 0;
    while (!tkp_live_stop) {
        if (!v->paused &&
            (rc = tkp_live_pump(ctx, f, l, NULL, 50, interval / 2, warn, sizeof(warn))) < 0)
            break;
        rc = 0;
        int ch, redraw = 0;
        while ((ch = getch()) != ERR) {
            redraw = 1;
            if (ch == 'q' || ch == 'Q')
                tkp_live_stop = 1;
            else if (ch == 'c')
                v->show_classes = 1, v->show_kernels = 0;
            else if (ch == 'k')
                v->show_kernels = 1, v->show_classes = 0;
            else if (ch == 'p' || ch == ' ')
                v->paused = !v->paused;
            else if ((ch == '+' || ch == '=') && v->window_s < 60)
                v->window_s = v->window_s < 5 ? v->window_s + 1 : v->window_s + 5;
            else if (ch == '-' && v->window_s > 1)
                v->window_s = v->window_s <= 5 ? v->window_s - 1 : v->window_s - 5;
        }
        if (tkp_live_stop) break;
        uint64_t now = tkp_live_ms();
        if (!redraw && now < next) {
            napms(20);
            continue;
        }
        next = now + interval;
        char *buf = NULL;
        size_t len = 0;
        FILE *m = open_memstream(&buf, &len);
        if (!m) {
            rc = tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
            break;
        }
        v->name_width = COLS > 20 ? COLS - 20 : 20;
        tkp_live_print_frame(m, l, cl, v);
        fclose(m);
        erase();
        int y = 0;
        for (char *line = buf, *nl; line && *line && y < LINES - 2;
             line = nl ? nl + 1 : NULL, y++) {
            nl = strchr(line, '\n');
            int len = (int)(nl ? nl - line : (long)strlen(line));
            mvaddnstr(y, 0, line, len < COLS ? len : COLS); /* cut at the screen's edge */
        }
        free(buf);
        if (warn[0]) mvaddnstr(LINES - 2, 0, warn, COLS);
        attron(A_REVERSE);
        mvaddnstr(LINES - 1, 0, " c classes  k kernels  p pause  +/- window  q quit ", COLS);
        attroff(A_REVERSE);
        refresh();
    }
    endwin();
    return rc;
}
#endif

static int top_run(int argc, char **argv, struct tkp_ctx *ctx)
{
    int once = 0;
    uint64_t window = 10, interval = 1000;
    const char *path = NULL, *classes = NULL, *arg[2];
    size_t n;
    const struct tkp_opt opts[] = {{"--once", 'f', &once, 0, NULL, NULL},
                                   {"--window", 'u', &window, 60, NULL, NULL},
                                   {"--interval", 'u', &interval, 60000, NULL, NULL},
                                   {"--classes", 's', &classes, 0, NULL, NULL}};
    int rc = tkp_cmd_parse_args(ctx, argc, argv, opts, 4, arg, 2, &n);
    if (rc) return rc;
    if (n > 1) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "one DIR or CAPTURE ('%s')", arg[1]);
    if (n) path = arg[0];
    if (!path) /* where the shim writes by default */
        path = getenv("TOKPROF_OUT") && *getenv("TOKPROF_OUT") ? getenv("TOKPROF_OUT") : ".";
    if (!window) window = 1;
    if (interval < 100) interval = 100;
    struct tkp_classes *cl = NULL;
    struct tkp_follow *f = NULL;
    struct tkp_live *l = NULL;
    if ((rc = tkp_cmd_classes(ctx, classes, &cl))) return rc;
    struct tkp_follow_opts fo = {.until_exit = 0};
    if ((rc = tkp_follow_open(path, &fo, &f, ctx->why, sizeof(ctx->why)))) goto out;
    if ((rc = tkp_live_new(cl, &l))) {
        rc = tkp_cmd_fail(ctx, rc, "out of memory");
        goto out;
    }
    struct tkp_live_view v = {
        .source = path, .window_s = (unsigned)window, .show_classes = 1, .name_width = 100};
    tkp_live_signals();
#ifdef TKP_NO_CURSES
    int plain = 1; /* a release build without curses: plain frames on a terminal too */
#else
    int plain = !isatty(STDOUT_FILENO);
#endif
    if (once || plain) {
        /* one frame of everything already written; without a terminal, one per interval */
        v.show_kernels = 1;
        do {
            if ((rc = tkp_live_pump(ctx, f, l, NULL, 0, UINT64_MAX, NULL, 0)) < 0) goto out;
            tkp_live_print_frame(ctx->out, l, cl, &v);
            fflush(ctx->out);
            if (once) break;
            for (uint64_t t0 = tkp_live_ms(); !tkp_live_stop && tkp_live_ms() - t0 < interval;)
                if ((rc = tkp_live_pump(ctx, f, l, NULL, 100, interval, NULL, 0)) < 0) goto out;
            fputc('\n', ctx->out);
        } while (!tkp_live_stop);
        rc = 0;
    } else {
#ifndef TKP_NO_CURSES
        rc = interactive(ctx, f, l, cl, &v, (unsigned)interval);
#endif
    }
out:
    tkp_live_free(l);
    tkp_follow_close(f);
    tkp_classes_free(cl);
    return rc < 0 ? rc : 0;
}

const struct tkp_cmd tkp_cmd_top = {
    "top",
    "watch running processes' tokens/s, latency and GPU time live",
    "usage: tokprof top [--once] [--window S] [--interval MS] [--classes FILE] [DIR|CAPTURE]\n"
    "\n"
    "Follows the captures of running processes as the shim writes them (DIR: every process's\n"
    "capture in it, new ones included; by default $TOKPROF_OUT, else the current directory, as\n"
    "for the shim) and shows per process and thread, over the last S seconds (default 10):\n"
    "tokens/s, steps/s, inter-token latency\n"
    "p50/p99, a tokens/s history, GPU busy share and idle split, the verdict (gpu-bound,\n"
    "launch-bound, host-bound), the top kernel classes or kernels by GPU time, the worst recent\n"
    "step and its cause, and dropped records. Figures lag the program by one flush period\n"
    "(TOKPROF_FLUSH_MS): only whole chunks are read.\n"
    "\n"
    "  --once          print one frame of what is written so far, and exit\n"
    "  --window S      the window, 1 to 60 seconds (default 10)\n"
    "  --interval MS   refresh period (default 1000)\n"
    "  --classes FILE  kernel class rules (see tokprof kernels)\n"
    "\n"
    "Keys: c classes, k kernels, p or space pause, + and - the window, q quit. When stdout is not\n"
    "a terminal, a plain frame is printed every interval until Ctrl-C.\n"
    "\n"
    "example:\n"
    "  tokprof top --once tokprof-out/\n",
    top_run,
};
