/* tokprof decoder: small SVG writers shared by `tokprof heatmap` and `tokprof report` — a heatmap
 * with axes, legend and colour scale, a line chart and a stacked bar chart. Every figure is one
 * self-contained <svg> element with an id (the report's test looks for them); text is escaped.
 * They write to f and never fail (stdio errors show in ferror(f)). */
#ifndef TKP_SVG_H
#define TKP_SVG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "model/model.h"

#define TKP_SVG_MAX_COLS 1000 /* longer series are binned to at most this many columns */
#define TKP_SVG_MAX_ROWS 250  /* and steps down the side to at most this many rows */

/* Writes s with &, <, >, " escaped. */
void tkp_svg_esc(FILE *f, const char *s);
/* A colour for v in [0, 1] (a perceptual ramp from dark blue to yellow), as "#rrggbb" in buf[8]. */
const char *tkp_svg_color(double v, char *buf);

/* A heatmap of grid[row * ncols + col] (ns), columns = step bins of `bin` steps from step
 * `first`; rows labelled by rowname(i). Title and axis names given. */
void tkp_svg_heatmap(FILE *f, const char *id, const char *title, const double *grid, size_t nrows,
                     size_t ncols, size_t bin, const char *xlabel, const char *ylabel,
                     const char *(*rowname)(void *arg, size_t row, char *buf), void *arg);
/* A heatmap with the steps down the side: grid[row * ncols + col], rows labelled rowname(row)
 * (bins of steps), columns colname(col) (categories: experts). Under the cells one bar per column
 * for its total, with the exact value in data-total (and data-col, a <title>). `ns`: the values
 * are ns (else counts); `what` names them under the colour scale. */
void tkp_svg_heatmap_rows(FILE *f, const char *id, const char *title, const double *grid,
                          size_t nrows, size_t ncols, const char *xlabel, const char *ylabel,
                          const char *(*rowname)(void *arg, size_t row, char *buf),
                          const char *(*colname)(void *arg, size_t col, char *buf), void *arg,
                          const uint64_t *coltot, int ns, const char *what);
/* A line chart of y[0..n) (ns) against the index, with axes. */
void tkp_svg_lines(FILE *f, const char *id, const char *title, const double *y, size_t n,
                   size_t bin, const char *ylabel);
/* Two distributions of n values each (ns, sorted ascending), a and b, as quantile curves on one
 * chart with their labels: an observed and a predicted inter-token latency. */
void tkp_svg_quantiles(FILE *f, const char *id, const char *title, const double *a,
                       const double *b, size_t n, const char *la, const char *lb);
/* Stacked bars: v[s * n + i] for series s < ns (names[s]), bin i < n. */
void tkp_svg_stacked(FILE *f, const char *id, const char *title, const double *v, size_t n,
                     size_t ns, const char *const *names, size_t bin);

/* The token steps of the thread with the most of them, binned to at most TKP_SVG_MAX_COLS
 * columns: *bin steps a column. Fills cls[c * ncols + col] with the mean GPU time per step of
 * class c (when cls is not NULL) and host[col] with the mean host duration (when not NULL).
 * Returns ncols, or a negative tkp_err (NOMEM): *cls and *host are malloc'd, caller frees. */
long tkp_svg_step_bins(const struct tkp_model *m, double **cls, double **host, size_t *bin);


#endif
