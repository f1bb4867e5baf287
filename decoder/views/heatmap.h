/* tokprof decoder: the kernel-class heatmap (heatmap.c). */
#ifndef TKP_VIEWS_HEATMAP_H
#define TKP_VIEWS_HEATMAP_H

#include <stdio.h>

struct tkp_model;

/* The step x class heatmap of a finished model, as <svg id="id"> (`tokprof heatmap`; the report
 * embeds it). Returns 0 or NOMEM. */
int tkp_heatmap_class(FILE *f, const struct tkp_model *m, const char *id);

#endif
