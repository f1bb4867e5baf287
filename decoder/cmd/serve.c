/* tokprof serve --prometheus ADDR:PORT DIR: a sidecar that follows the captures of running
 * processes and exposes their live figures on /metrics (prom.h). Its own process, reading the
 * files: the server it watches never waits for it. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "cmd/live.h"
#include "cmd/live_spec.h"
#include "base/err.h"
#include "base/grow.h"
#include "base/http.h"
#include "capture/follow.h"
#include "model/live.h"
#include "views/prom.h"

#define SERVE_LABELS_MAX 16
#define SERVE_KEEP_ENDED_S 300 /* an ended process's series stay this long, then go */
#define SERVE_SLICE_MS 20      /* records read before the clients are looked at again */
#define SERVE_IDLE_MS 50       /* with nothing new on disk: how long the clients' poll waits */

static int parse_addr(const char *s, struct sockaddr_in *a)
{
    char host[64];
    const char *colon = strrchr(s, ':');
    memset(a, 0, sizeof(*a));
    a->sin_family = AF_INET;
    if (!colon || (size_t)(colon - s) >= sizeof(host)) return -1;
    memcpy(host, s, (size_t)(colon - s));
    host[colon - s] = 0;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port < 0 || port > 65535 || end == colon + 1) return -1;
    a->sin_port = htons((uint16_t)port);
    if (!host[0])
        a->sin_addr.s_addr = htonl(INADDR_ANY);
    else if (inet_pton(AF_INET, host, &a->sin_addr) != 1)
        return -1;
    return 0;
}

/* What a GET is answered with: /metrics, an index at /, else 404. */
struct served {
    const struct tkp_live *l;
    const struct tkp_classes *cl;
    const char *labels;
    const struct tkp_prom_spec *spec;
};

static int answer(void *arg, const char *path, FILE *body, const char **type)
{
    const struct served *S = arg;
    size_t pl = strcspn(path, "?");
    if (pl == 8 && !memcmp(path, "/metrics", 8)) {
        *type = "text/plain; version=0.0.4; charset=utf-8";
        tkp_prom_write(body, S->l, S->cl, S->labels, S->spec);
        return 200;
    }
    if (pl == 1 && path[0] == '/') {
        fputs("tokprof serve: metrics on /metrics\n", body);
        return 200;
    }
    fputs("not found: try /metrics\n", body);
    return 404;
}

struct ended {
    uint64_t pid, at_ms;
};

/* Where --label pairs go, as Prometheus label text `k="v",...`. */
struct labels {
    char text[1024];
    size_t len;
};

/* --label NAME=VALUE, repeatable */
static int label(struct tkp_ctx *ctx, const char *name, const char *kv, void *dst)
{
    struct labels *L = dst;
    const char *eq = strchr(kv, '=');
    size_t kl = eq ? (size_t)(eq - kv) : 0;
    int ok = kl > 0 && (kv[0] < '0' || kv[0] > '9');
    for (size_t k = 0; ok && k < kl; k++)
        ok = kv[k] == '_' || (kv[k] >= 'a' && kv[k] <= 'z') || (kv[k] >= 'A' && kv[k] <= 'Z') ||
             (kv[k] >= '0' && kv[k] <= '9');
    if (!ok || (kl == 3 && !memcmp(kv, "pid", 3)) || (kl == 7 && !memcmp(kv, "program", 7)))
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE,
                            "%s: expected NAME=VALUE with a "
                            "label name [a-zA-Z_][a-zA-Z0-9_]* other than pid and "
                            "program, got '%s'",
                            name, kv);
    char val[256];
    tkp_prom_escape(val, sizeof(val), eq + 1);
    int w = snprintf(L->text + L->len, sizeof(L->text) - L->len, "%s%.*s=\"%s\"",
                     L->len ? "," : "", (int)kl, kv, val);
    if (w < 0 || (size_t)w >= sizeof(L->text) - L->len)
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "%s: too many labels", name);
    L->len += (size_t)w;
    return 0;
}

static int serve_run(int argc, char **argv, struct tkp_ctx *ctx)
{
    const char *addr = NULL, *path = NULL, *classes = NULL, *specpath = NULL, *arg[2];
    struct labels lab = {"", 0};
    uint64_t keep_s = SERVE_KEEP_ENDED_S;
    size_t n;
    const struct tkp_opt opts[] = {{"--prometheus", 's', &addr, 0, NULL, NULL},
                                   {"--classes", 's', &classes, 0, NULL, NULL},
                                   {"--spec", 's', &specpath, 0, NULL, NULL},
                                   {"--keep-ended", 'u', &keep_s, 86400, NULL, NULL},
                                   {"--label", 'c', &lab, 0, NULL, label}};
    int rc = tkp_cmd_parse_args(ctx, argc, argv, opts, 5, arg, 2, &n);
    if (rc) return rc;
    if (n > 1) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "one DIR or CAPTURE ('%s')", arg[1]);
    if (n) path = arg[0];
    struct sockaddr_in sa;
    if (!addr) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "expected --prometheus ADDR:PORT");
    if (parse_addr(addr, &sa))
        return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "--prometheus: expected IPv4:PORT, got '%s'", addr);
    if (!path) return tkp_cmd_fail(ctx, TKP_ERR_USAGE, "expected DIR or CAPTURE");
    struct tkp_classes *cl = NULL;
    struct tkp_follow *f = NULL;
    struct tkp_live *l = NULL;
    struct tkp_spec *sp = NULL;
    struct tkp_live_mons *ms = NULL;
    struct ended *ended = NULL;
    struct tkp_httpd *httpd = NULL;
    size_t nended = 0, capended = 0;
    int s = -1;
    if ((rc = tkp_cmd_classes(ctx, classes, &cl))) goto out;
    if (specpath && (rc = tkp_live_load_spec(ctx, specpath, &sp))) goto out;
    struct tkp_follow_opts fo = {0};
    if ((rc = tkp_follow_open(path, &fo, &f, ctx->why, sizeof(ctx->why)))) goto out;
    if (tkp_live_new(cl, &l) || (sp && tkp_live_mons_new(sp, NULL, NULL, &ms))) {
        rc = tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
        goto out;
    }
    s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    if (s >= 0) setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (s < 0 || bind(s, (struct sockaddr *)&sa, sizeof(sa)) || listen(s, SOMAXCONN)) {
        rc = tkp_cmd_fail(ctx, TKP_ERR_IO, "--prometheus %s: %s", addr, strerror(errno));
        goto out;
    }
    const char **ids = NULL;
    int *warn = NULL;
    struct tkp_prom_spec ps = {0};
    if (sp) {
        int nas = tkp_live_spec_nas(sp);
        ids = calloc((size_t)nas + 1, sizeof(*ids));
        warn = calloc((size_t)nas + 1, sizeof(*warn));
        if (!ids || !warn) {
            free(ids);
            free(warn);
            rc = tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
            goto out;
        }
        for (int a = 0; a < nas; a++)
            ids[a] = tkp_live_spec_id(sp, a, &warn[a]);
        ps = (struct tkp_prom_spec){nas, ids, warn, tkp_live_mons_violations, ms};
    }
    struct served S = {l, cl, lab.text, sp ? &ps : NULL};
    if (tkp_httpd_new(s, &httpd)) {
        rc = tkp_cmd_fail(ctx, TKP_ERR_NOMEM, "out of memory");
        goto out_spec;
    }
    tkp_live_signals();
    while (!tkp_live_stop) {
        /* Records, at most SERVE_SLICE_MS of them, then the clients (base/http.c: each
         * connection a small state behind one poll, so a slow or idle client holds nobody).
         * When the files had nothing new, the clients' poll is the wait: a scrape is answered
         * as it arrives, or after at most one slice of reading. */
        uint64_t t0 = tkp_live_ms();
        if ((rc = tkp_live_pump(ctx, f, l, ms, 0, SERVE_SLICE_MS, NULL, 0)) < 0) break;
        int busy = tkp_live_ms() - t0 >= SERVE_SLICE_MS;
        rc = 0;
        uint64_t now = tkp_live_ms();
        for (size_t i = 0; i < tkp_live_nprocs(l); i++) {
            const struct tkp_lcount *c = tkp_live_proc(l, i);
            if (!c->ended) continue;
            size_t k = 0;
            while (k < nended && ended[k].pid != c->pid)
                k++;
            if (k == nended) {
                if (TKP_GROW_FROM(ended, capended, nended + 1, 4)) continue;
                ended[nended++] = (struct ended){c->pid, now};
            } else if (now - ended[k].at_ms >= keep_s * 1000) {
                uint64_t pid = c->pid;
                tkp_live_forget(l, pid);
                tkp_live_mons_forget(ms, pid);
                ended[k] = ended[--nended];
                i--;
            }
        }
        if ((rc = tkp_httpd_poll(httpd, busy ? 0 : SERVE_IDLE_MS, answer, &S)) < 0) {
            rc = tkp_cmd_fail(ctx, rc, "--prometheus %s: %s", addr, strerror(errno));
            break;
        }
    }
out_spec:
    free(ids);
    free(warn);
out:
    tkp_httpd_free(httpd);
    if (s >= 0) close(s);
    free(ended);
    tkp_live_mons_free(ms);
    tkp_live_free(l);
    tkp_follow_close(f);
    tkp_live_spec_free(sp);
    tkp_classes_free(cl);
    return rc < 0 ? rc : 0;
}

const struct tkp_cmd tkp_cmd_serve = {
    "serve",
    "expose running processes' live figures as Prometheus metrics",
    "usage: tokprof serve --prometheus ADDR:PORT [--spec SPEC] [--label NAME=VALUE]...\n"
    "                     [--classes FILE] [--keep-ended S] DIR|CAPTURE\n"
    "\n"
    "A sidecar: follows the captures of running processes (DIR: every process's capture in it,\n"
    "new ones included) and answers GET /metrics in the Prometheus text format: a histogram of\n"
    "token-step durations; tokens, steps, launches, GPU kernels and dropped records as counters;\n"
    "GPU busy seconds and GPU seconds per kernel class as counters; with --spec, each\n"
    "assertion's violations and whether it holds so far. Every series is labelled by program,\n"
    "pid and the --label pairs; kernel names are never labels (bounded cardinality). It runs in\n"
    "its own process and only reads the files: the server never waits for it. An ended\n"
    "process's series stay --keep-ended seconds (default 300), then go. Clients are served\n"
    "side by side, GET only: an idle or slow one delays no other scrape.\n"
    "\n"
    "  --prometheus ADDR:PORT  where to listen, e.g. 127.0.0.1:9464 (:9464 for every address)\n"
    "  --spec SPEC             step and record assertions (docs/SPEC.md) checked per process\n"
    "  --label NAME=VALUE      a label added to every series (repeatable)\n"
    "\n"
    "A Grafana dashboard for these metrics: docs/grafana-tokprof.json.\n"
    "\n"
    "example:\n"
    "  tokprof serve --prometheus 127.0.0.1:9464 --label cluster=a tokprof-out/\n",
    serve_run,
};
