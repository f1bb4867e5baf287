/* tokprof decoder: the kernel-class heatmap (rows = classes, columns = token steps), drawn for
 * `tokprof heatmap --kind class` and for the HTML report alike. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/err.h"
#include "model/classes.h"
#include "model/model.h"
#include "views/heatmap.h"
#include "views/svg.h"

struct clsrows {
    int map[TKP_CLASSES_MAX]; /* row -> class id */
    const struct tkp_classes *cl;
};

static const char *cls_name(void *arg, size_t row, char *buf)
{
    const struct clsrows *a = arg;
    (void)buf;
    return tkp_classes_name(a->cl, a->map[row]);
}

int tkp_heatmap_class(FILE *f, const struct tkp_model *m, const char *id)
{
    double *cls;
    size_t bin;
    long n = tkp_svg_step_bins(m, &cls, NULL, &bin);
    if (n < 0) return (int)n;
    /* rows: classes with time, and where their names come from (cls_name's arg) */
    struct clsrows a;
    size_t rows = 0;
    double *g = malloc(((size_t)m->nclasses * (size_t)n + 1) * sizeof(*g));
    if (!g) {
        free(cls);
        return TKP_ERR_NOMEM;
    }
    a.cl = m->opts.classes;
    for (int c = 0; c < m->nclasses && c < TKP_CLASSES_MAX; c++) {
        double t = 0;
        for (long i = 0; i < n; i++) /* NaN: a bin not timed (svg.h) */
            if (!isnan(cls[(size_t)c * (size_t)n + (size_t)i]))
                t += cls[(size_t)c * (size_t)n + (size_t)i];
        if (t <= 0) continue;
        memcpy(g + rows * (size_t)n, cls + (size_t)c * (size_t)n, (size_t)n * sizeof(*g));
        a.map[rows++] = c;
    }
    tkp_svg_heatmap(f, id, "GPU time per step by kernel class", g, rows, (size_t)n, bin,
                    "token step", "kernel class", cls_name, &a);
    free(g);
    free(cls);
    return 0;
}
