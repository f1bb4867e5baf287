/* tokprof decoder: SVG figures (svg.h). */
#include "views/svg.h"

#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "tokprof/format.h"

#define ML 150 /* margins: left (row labels), top, right (legend), bottom */
#define MT 40
#define MR 110
#define MB 50

void tkp_svg_esc(FILE *f, const char *s)
{
    for (; s && *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default:
            if ((unsigned char)*s >= 0x20 || *s == '\n') fputc(*s, f);
        }
    }
}

const char *tkp_svg_color(double v, char *buf)
{
    /* a viridis-like ramp: five stops, linear between them */
    static const double st[5][3] = {
        {68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
    if (!(v > 0)) v = 0;
    if (v > 1) v = 1;
    double x = v * 4;
    int i = x >= 4 ? 3 : (int)x;
    double t = x - i;
    snprintf(buf, 8, "#%02x%02x%02x", (int)(st[i][0] + t * (st[i + 1][0] - st[i][0])),
             (int)(st[i][1] + t * (st[i + 1][1] - st[i][1])),
             (int)(st[i][2] + t * (st[i + 1][2] - st[i][2])));
    return buf;
}

static void head(FILE *f, const char *id, int w, int h, const char *title)
{
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"%s\" width=\"%d\" height=\"%d\" "
               "viewBox=\"0 0 %d %d\" font-family=\"sans-serif\" font-size=\"11\">\n"
               "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n<text x=\"%d\" y=\"20\" "
               "font-size=\"14\" font-weight=\"bold\">",
            id, w, h, w, h, w, h, ML);
    tkp_svg_esc(f, title);
    fputs("</text>\n", f);
}

static void xaxis(FILE *f, int w, int h, size_t ncols, size_t bin, const char *xlabel)
{
    int pw = w - ML - MR;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", ML, h - MB,
            ML + pw, h - MB);
    for (int t = 0; t <= 5; t++) {
        double x = ML + pw * t / 5.0;
        fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>"
                   "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%zu</text>\n",
                x, h - MB, x, h - MB + 4, x, h - MB + 16, (size_t)(ncols * bin * t / 5));
    }
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", ML + pw / 2, h - 12);
    tkp_svg_esc(f, xlabel);
    if (bin > 1) fprintf(f, " (%zu steps per column)", bin);
    fputs("</text>\n", f);
}

static void fmt_ns(double ns, char *b, size_t n)
{
    if (ns >= 1e6) snprintf(b, n, "%.2f ms", ns / 1e6);
    else if (ns >= 1e3) snprintf(b, n, "%.1f us", ns / 1e3);
    else snprintf(b, n, "%.0f ns", ns);
}

static void legend(FILE *f, int lx, double mx, int ns, const char *what);

/* The cells of a heatmap from (ML, top): colour sqrt(v / mx); zero cells are left blank. */
#define UNTIMED "#d0d0d0" /* a step bin without a timed step (svg.h, tkp_svg_step_bins) */

/* "not timed" under a legend at (x, y) when some of v[0..n) are NaN. */
static void untimed_legend(FILE *f, const double *v, size_t n, int x, int y)
{
    size_t i = 0;
    while (i < n && !isnan(v[i]))
        i++;
    if (i == n) return;
    fprintf(f,
            "<g class=\"legend-untimed\"><rect x=\"%d\" y=\"%d\" width=\"14\" height=\"10\" "
            "fill=\"%s\"/><text x=\"%d\" y=\"%d\">not timed</text></g>\n",
            x, y, UNTIMED, x + 18, y + 9);
}

static void cells(FILE *f, const double *grid, size_t nrows, size_t ncols, int top, double cw,
                  int cellh, double mx)
{
    char c[8];
    fputs("<g class=\"cells\" shape-rendering=\"crispEdges\">\n", f);
    for (size_t r = 0; r < nrows; r++)
        for (size_t col = 0; col < ncols; col++) {
            double v = grid[r * ncols + col];
            if (isnan(v)) { /* unknown (no GPU record): grey, never the colour of 0 */
                fprintf(f,
                        "<rect class=\"untimed\" data-col=\"%zu\" x=\"%.2f\" y=\"%d\" "
                        "width=\"%.2f\" height=\"%d\" fill=\"%s\"/>\n",
                        col, ML + col * cw, top + (int)r * cellh, cw + 0.05, cellh, UNTIMED);
                continue;
            }
            if (v <= 0) continue;
            fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"%d\" fill=\"%s\"/>\n",
                    ML + col * cw, top + (int)r * cellh, cw + 0.05, cellh,
                    tkp_svg_color(mx > 0 ? sqrt(v / mx) : 0, c));
        }
    fputs("</g>\n", f);
}

void tkp_svg_heatmap(FILE *f, const char *id, const char *title, const double *grid, size_t nrows,
                     size_t ncols, size_t bin, const char *xlabel, const char *ylabel,
                     const char *(*rowname)(void *arg, size_t row, char *buf), void *arg)
{
    int cellh = nrows > 60 ? 4 : nrows > 20 ? 10 : 18;
    int w = 1200, h = MT + (int)nrows * cellh + MB;
    if (h < 260) h = 260;
    double pw = w - ML - MR, cw = ncols ? pw / (double)ncols : pw, mx = 0;
    char b[64];
    for (size_t i = 0; i < nrows * ncols; i++)
        if (grid[i] > mx) mx = grid[i];
    head(f, id, w, h, title);
    cells(f, grid, nrows, ncols, MT, cw, cellh, mx);
    size_t every = nrows > 60 ? (nrows + 29) / 30 : 1;
    for (size_t r = 0; r < nrows; r += every) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", ML - 4,
                MT + (int)r * cellh + cellh / 2 + 4);
        tkp_svg_esc(f, rowname(arg, r, b));
        fputs("</text>\n", f);
    }
    fprintf(f, "<text x=\"12\" y=\"%d\" transform=\"rotate(-90 12 %d)\" text-anchor=\"middle\">",
            MT + (h - MT - MB) / 2, MT + (h - MT - MB) / 2);
    tkp_svg_esc(f, ylabel);
    fputs("</text>\n", f);
    xaxis(f, w, h, ncols, bin, xlabel);
    legend(f, w - MR + 20, mx, 1, "GPU time");
    untimed_legend(f, grid, nrows * ncols, w - MR + 20, MT + 200);
    fputs("</svg>\n", f);
}

static void fmt_val(double v, int ns, char *b, size_t n)
{
    if (ns) fmt_ns(v, b, n);
    else if (v >= 100 || v == (double)(uint64_t)v) snprintf(b, n, "%.0f", v);
    else snprintf(b, n, "%.2f", v);
}

/* the colour scale, sqrt: small values stay visible */
static void legend(FILE *f, int lx, double mx, int ns, const char *what)
{
    char c[8], b[64];
    int lh = 160;
    fputs("<g class=\"legend\">\n", f);
    for (int i = 0; i < 32; i++)
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"14\" height=\"%d\" fill=\"%s\"/>\n", lx,
                MT + lh - (i + 1) * lh / 32, lh / 32 + 1, tkp_svg_color(i / 31.0, c));
    fmt_val(mx, ns, b, sizeof(b));
    fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", lx + 18, MT + 8, b);
    fmt_val(mx / 4, ns, b, sizeof(b));
    fprintf(f, "<text x=\"%d\" y=\"%d\">%s</text>\n", lx + 18, MT + lh / 2 + 4, b);
    fprintf(f, "<text x=\"%d\" y=\"%d\">0</text>\n<text x=\"%d\" y=\"%d\">", lx + 18, MT + lh, lx,
            MT + lh + 16);
    tkp_svg_esc(f, what);
    fputs("</text>\n</g>\n", f);
}

void tkp_svg_heatmap_rows(FILE *f, const char *id, const char *title, const double *grid,
                          size_t nrows, size_t ncols, const char *xlabel, const char *ylabel,
                          const char *(*rowname)(void *arg, size_t row, char *buf),
                          const char *(*colname)(void *arg, size_t col, char *buf), void *arg,
                          const uint64_t *coltot, int ns, const char *what)
{
    const int mt = MT + 20, bars = 70; /* column labels above the cells; the totals below */
    int cellh = nrows > 150 ? 2 : nrows > 60 ? 4 : nrows > 20 ? 10 : 18;
    int ph = (int)nrows * cellh, w = 1200, h = mt + ph + 12 + bars + MB;
    if (h < 330) h = 330;
    double pw = w - ML - MR, cw = ncols ? pw / (double)ncols : pw, mx = 0;
    uint64_t tmax = 0, tall = 0;
    char b[64];
    for (size_t i = 0; i < nrows * ncols; i++)
        if (grid[i] > mx) mx = grid[i];
    for (size_t col = 0; col < ncols; col++) {
        if (coltot[col] > tmax) tmax = coltot[col];
        tall += coltot[col];
    }
    head(f, id, w, h, title);
    cells(f, grid, nrows, ncols, mt, cw, cellh, mx);
    /* column labels: every one that has room (14 px) */
    size_t every = cw >= 14 ? 1 : (size_t)ceil(14 / cw);
    fputs("<g class=\"columns\">\n", f);
    for (size_t col = 0; col < ncols; col += every) {
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\" data-col=\"%zu\">",
                ML + (col + 0.5) * cw, mt - 4, col);
        tkp_svg_esc(f, colname(arg, col, b));
        fputs("</text>\n", f);
    }
    fputs("</g>\n", f);
    /* row labels: steps, one every 12 px */
    size_t rev = cellh >= 12 ? 1 : (size_t)(12 + cellh - 1) / (size_t)cellh;
    for (size_t r = 0; r < nrows; r += rev) {
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">", ML - 4,
                mt + (int)r * cellh + (cellh < 12 ? 4 : cellh / 2 + 4));
        tkp_svg_esc(f, rowname(arg, r, b));
        fputs("</text>\n", f);
    }
    fprintf(f, "<text x=\"12\" y=\"%d\" transform=\"rotate(-90 12 %d)\" text-anchor=\"middle\">",
            mt + ph / 2, mt + ph / 2);
    tkp_svg_esc(f, ylabel);
    fputs("</text>\n", f);
    /* the totals: one bar per column, its exact value in data-total */
    int by = mt + ph + 12;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"black\"/>\n", ML,
            by + bars, ML + pw, by + bars);
    fputs("<g class=\"totals\">\n", f);
    for (size_t col = 0; col < ncols; col++) {
        double bh = tmax ? (double)bars * (double)coltot[col] / (double)tmax : 0;
        fmt_val((double)coltot[col], ns, b, sizeof(b));
        fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"#3b528b\" "
                   "data-col=\"%zu\" data-total=\"%" PRIu64 "\"><title>",
                ML + col * cw + cw * 0.1, by + bars - bh, cw * 0.8, bh, col, coltot[col]);
        char nb[64];
        tkp_svg_esc(f, colname(arg, col, nb));
        fprintf(f, ": %s (%.1f%%)</title></rect>\n", b,
                tall ? 100.0 * (double)coltot[col] / (double)tall : 0.0);
    }
    fputs("</g>\n", f);
    fmt_val((double)tmax, ns, b, sizeof(b));
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">total</text>"
               "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">max %s</text>\n",
            ML - 4, by + bars / 2, ML - 4, by + bars / 2 + 14, b);
    fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\">", ML + (int)pw / 2, h - 12);
    tkp_svg_esc(f, xlabel);
    fputs("</text>\n", f);
    legend(f, w - MR + 20, mx, ns, what);
    untimed_legend(f, grid, nrows * ncols, w - MR + 20, mt + 200);
    fputs("</svg>\n", f);
}

static void yaxis(FILE *f, int h, double mx, const char *ylabel)
{
    char b[32];
    int ph = h - MT - MB;
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", ML, MT, ML,
            h - MB);
    for (int t = 0; t <= 4; t++) {
        double y = h - MB - ph * t / 4.0;
        fmt_ns(mx * t / 4, b, sizeof(b));
        fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%s</text>"
                   "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#ddd\"/>\n",
                ML - 4, y + 4, b, ML, y, 1200 - MR, y);
    }
    fprintf(f, "<text x=\"12\" y=\"%d\" transform=\"rotate(-90 12 %d)\" text-anchor=\"middle\">",
            MT + ph / 2, MT + ph / 2);
    tkp_svg_esc(f, ylabel);
    fputs("</text>\n", f);
}

void tkp_svg_lines(FILE *f, const char *id, const char *title, const double *y, size_t n,
                   size_t bin, const char *ylabel)
{
    int w = 1200, h = 300;
    double mx = 0, pw = w - ML - MR, ph = h - MT - MB;
    for (size_t i = 0; i < n; i++)
        if (y[i] > mx) mx = y[i];
    if (mx <= 0) mx = 1;
    head(f, id, w, h, title);
    yaxis(f, h, mx, ylabel);
    fputs("<polyline class=\"series\" fill=\"none\" stroke=\"#3b528b\" stroke-width=\"1.2\" points=\"", f);
    for (size_t i = 0; i < n; i++)
        fprintf(f, "%.1f,%.1f ", ML + pw * ((double)i + 0.5) / (double)n, h - MB - ph * y[i] / mx);
    fputs("\"/>\n", f);
    xaxis(f, w, h, n, bin, "token step");
    fputs("</svg>\n", f);
}

void tkp_svg_quantiles(FILE *f, const char *id, const char *title, const double *a,
                       const double *b, size_t n, const char *la, const char *lb)
{
    int w = 1200, h = 300;
    double mx = 0, pw = w - ML - MR, ph = h - MT - MB;
    for (size_t i = 0; i < n; i++)
        mx = a[i] > mx ? a[i] : b[i] > mx ? b[i] : mx;
    if (mx <= 0) mx = 1;
    head(f, id, w, h, title);
    yaxis(f, h, mx, "inter-token latency");
    const double *v[2] = {a, b};
    const char *col[2] = {"#3b528b", "#e66101"}, *lbl[2] = {la, lb};
    for (int k = 0; k < 2; k++) {
        fprintf(f, "<polyline class=\"series\" fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\" "
                   "points=\"", col[k]);
        for (size_t i = 0; i < n; i++)
            fprintf(f, "%.1f,%.1f ", ML + pw * ((double)i + 0.5) / (double)n,
                    h - MB - ph * v[k][i] / mx);
        fputs("\"/>\n", f);
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                   "<text x=\"%d\" y=\"%d\">", w - MR + 8, MT + 16 * k, col[k], w - MR + 22, MT + 9 + 16 * k);
        tkp_svg_esc(f, lbl[k]);
        fputs("</text>\n", f);
    }
    fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"black\"/>\n", ML, h - MB,
            w - MR, h - MB);
    for (int q = 0; q <= 100; q += 10)
        fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%d%%</text>\n",
                ML + pw * q / 100.0, h - MB + 14, q);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">share of token intervals "
               "(sorted)</text>\n</svg>\n", ML + pw / 2, h - MB + 32);
}

void tkp_svg_stacked(FILE *f, const char *id, const char *title, const double *v, size_t n,
                     size_t ns, const char *const *names, size_t bin)
{
    int w = 1200, h = 340;
    double mx = 0, pw = w - ML - MR, ph = h - MT - MB, cw = n ? pw / (double)n : pw;
    char c[8];
    for (size_t i = 0; i < n; i++) {
        double t = 0;
        for (size_t s = 0; s < ns; s++)
            t += v[s * n + i];
        if (t > mx) mx = t; /* false for NaN */
    }
    if (mx <= 0) mx = 1;
    head(f, id, w, h, title);
    yaxis(f, h, mx, "GPU time per step");
    fputs("<g class=\"bars\" shape-rendering=\"crispEdges\">\n", f);
    for (size_t i = 0; i < n; i++) {
        double base = 0;
        if (ns && isnan(v[i])) { /* no timed step in the bin: unknown, a grey band, not 0 */
            fprintf(f,
                    "<rect class=\"untimed\" data-col=\"%zu\" x=\"%.2f\" y=\"%d\" "
                    "width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n",
                    i, ML + i * cw, MT, cw + 0.05, ph, UNTIMED);
            continue;
        }
        for (size_t s = 0; s < ns; s++) {
            double hv = ph * v[s * n + i] / mx;
            if (hv <= 0) continue;
            fprintf(f, "<rect x=\"%.2f\" y=\"%.2f\" width=\"%.2f\" height=\"%.2f\" fill=\"%s\"/>\n",
                    ML + i * cw, h - MB - base - hv, cw + 0.05, hv,
                    tkp_svg_color(ns > 1 ? (double)s / (double)(ns - 1) : 0.5, c));
            base += hv;
        }
    }
    fputs("</g>\n<g class=\"legend\">\n", f);
    for (size_t s = 0; s < ns; s++) {
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" "
                   "y=\"%d\">",
                w - MR + 10, MT + (int)s * 16, tkp_svg_color(ns > 1 ? (double)s / (double)(ns - 1) : 0.5, c),
                w - MR + 26, MT + (int)s * 16 + 10);
        tkp_svg_esc(f, names[s]);
        fputs("</text>\n", f);
    }
    fputs("</g>\n", f);
    untimed_legend(f, v, ns ? n : 0, w - MR + 10, MT + (int)ns * 16 + 4);
    xaxis(f, w, h, n, bin, "token step");
    fputs("</svg>\n", f);
}

long tkp_svg_step_bins(const struct tkp_model *m, double **cls, double **host, size_t *bin)
{
    size_t best = 0, cur = 0, n = 0;
    uint32_t thread = 0;
    for (size_t i = 0; i < m->nsteps; i++) {
        if (i && m->steps[i].thread != m->steps[i - 1].thread) cur = 0;
        if (m->steps[i].kind == TKP_STEP_TOKEN && ++cur > best) best = cur, thread = m->steps[i].thread;
    }
    size_t b = best > TKP_SVG_MAX_COLS ? (best + TKP_SVG_MAX_COLS - 1) / TKP_SVG_MAX_COLS : 1;
    size_t ncols = best ? (best + b - 1) / b : 0, nc = (size_t)m->nclasses;
    double *cnt = calloc(ncols + 1, sizeof(*cnt));
    if (cls) *cls = calloc(nc * ncols + 1, sizeof(**cls));
    if (host) *host = calloc(ncols + 1, sizeof(**host));
    if (!cnt || (cls && !*cls) || (host && !*host)) {
        free(cnt);
        if (cls) free(*cls), *cls = NULL;
        if (host) free(*host), *host = NULL;
        return TKP_ERR_NOMEM;
    }
    double *timed = calloc(ncols + 1, sizeof(*timed)); /* of cnt, the timed steps */
    if (!timed) {
        free(cnt);
        if (cls) free(*cls), *cls = NULL;
        if (host) free(*host), *host = NULL;
        return TKP_ERR_NOMEM;
    }
    for (size_t i = 0; i < m->nsteps; i++) {
        const struct tkp_mstep *s = &m->steps[i];
        if (s->kind != TKP_STEP_TOKEN || s->thread != thread) continue;
        size_t col = n++ / b;
        cnt[col]++;
        if (host) (*host)[col] += (double)tkp_mstep_host_ns(s);
        if (!tkp_mstep_timed(s)) continue; /* its GPU time is unknown: not a 0 in the mean */
        timed[col]++;
        for (size_t c = 0; cls && c < nc; c++)
            (*cls)[c * ncols + col] += (double)s->class_ns[c];
    }
    for (size_t col = 0; col < ncols; col++) {
        double k = cnt[col] ? cnt[col] : 1;
        if (host) (*host)[col] /= k;
        for (size_t c = 0; cls && c < nc; c++)
            (*cls)[c * ncols + col] = timed[col] ? (*cls)[c * ncols + col] / timed[col] : NAN;
    }
    free(cnt);
    free(timed);
    *bin = b;
    return (long)ncols;
}
