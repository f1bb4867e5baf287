/* tokprof decoder: SVG flame graph (flame.h). The folded lines become a tree (children merged by
 * name), laid out depth-first; boxes narrower than MIN_W pixels are not drawn (their weight still
 * counts in their parent's width). */
#include "views/flame.h"

#include <stdlib.h>
#include <string.h>

#include "base/hash.h"
#include "base/err.h"

#define WIDTH 1200.0
#define PAD 10.0
#define ROW 16
#define MIN_W 0.3
#define CHAR_W 6.5 /* average width of a 11px sans-serif character */

struct node {
    const char *name;
    uint64_t weight;
    struct node *child, *next;
};

static struct node *child_of(struct node *p, const char *name)
{
    struct node **at = &p->child;
    for (; *at; at = &(*at)->next) {
        int c = strcmp((*at)->name, name);
        if (!c) return *at;
        if (c > 0) break;
    }
    struct node *n = calloc(1, sizeof *n);
    if (!n) return NULL;
    n->name = name;
    n->next = *at;
    *at = n;
    return n;
}

static void free_tree(struct node *n)
{
    while (n) {
        struct node *next = n->next;
        free_tree(n->child);
        free(n);
        n = next;
    }
}

static uint32_t depth_of(const struct node *n)
{
    uint32_t d = 0;
    for (; n; n = n->next) {
        uint32_t c = 1 + depth_of(n->child);
        if (c > d) d = c;
    }
    return d;
}

static void xml(FILE *f, const char *s, size_t max)
{
    for (size_t i = 0; s[i] && i < max; i++) {
        switch (s[i]) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: putc(s[i], f);
        }
    }
}

/* a warm colour derived from the name, stable across runs */
static void color(const char *s, unsigned *r, unsigned *g, unsigned *b)
{
    uint32_t h = tkp_hash_str(s);
    *r = 205 + h % 50;
    *g = (h >> 8) % 230;
    *b = (h >> 16) % 55;
}

struct layout {
    FILE *f;
    double scale; /* pixels per weight unit */
    uint32_t depth;
    uint64_t total;
    const char *unit;
};

static void draw(struct layout *L, const struct node *n, double x, uint32_t level)
{
    for (; n; n = n->next) {
        double w = (double)n->weight * L->scale;
        if (w >= MIN_W) {
            double y = (double)(L->depth - level) * ROW + 30;
            unsigned r, g, b;
            color(n->name, &r, &g, &b);
            fputs("<g><title>", L->f);
            xml(L->f, n->name, (size_t)-1);
            fprintf(L->f, " (%llu %s, %.2f%%)</title>", (unsigned long long)n->weight, L->unit,
                    100.0 * (double)n->weight / (double)L->total);
            fprintf(L->f,
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%d\" rx=\"2\" "
                    "fill=\"rgb(%u,%u,%u)\"/>",
                    x, y, w, ROW - 1, r, g, b);
            size_t fit = (size_t)((w - 6) / CHAR_W);
            if (fit >= 3) {
                fprintf(L->f, "<text x=\"%.1f\" y=\"%.1f\">", x + 3, y + ROW - 4.5);
                size_t len = strlen(n->name);
                if (len <= fit) {
                    xml(L->f, n->name, len);
                } else {
                    xml(L->f, n->name, fit - 2);
                    fputs("..", L->f);
                }
                fputs("</text>", L->f);
            }
            fputs("</g>\n", L->f);
            draw(L, n->child, x, level + 1);
        }
        x += w;
    }
}

int tkp_flame_svg(FILE *out, const struct tkp_flame_line *lines, size_t n, const char *title,
                  const char *unit)
{
    struct node root = {.name = "all"};
    int err = 0;
    for (size_t i = 0; i < n && !err; i++) {
        if (!lines[i].weight) continue;
        struct node *p = &root;
        root.weight += lines[i].weight;
        for (uint32_t k = 0; k < lines[i].n && p; k++) {
            p = child_of(p, lines[i].frames[k]);
            if (p) p->weight += lines[i].weight;
        }
        if (!p) err = TKP_ERR_NOMEM;
    }
    uint32_t depth = 1 + depth_of(root.child);
    double height = (double)depth * ROW + 50;
    fprintf(out,
            "<?xml version=\"1.0\" standalone=\"no\"?>\n"
            "<svg version=\"1.1\" xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
            "height=\"%.0f\" viewBox=\"0 0 %.0f %.0f\" font-family=\"Verdana,sans-serif\" "
            "font-size=\"11\">\n"
            "<rect width=\"100%%\" height=\"100%%\" fill=\"#f8f8f2\"/>\n"
            "<text x=\"%.0f\" y=\"20\" font-size=\"15\" text-anchor=\"middle\">",
            WIDTH, height, WIDTH, height, WIDTH / 2);
    xml(out, title ? title : "", (size_t)-1);
    fputs("</text>\n", out);
    if (root.weight) {
        struct layout L = {out, (WIDTH - 2 * PAD) / (double)root.weight, depth - 1, root.weight,
                           unit ? unit : "samples"};
        draw(&L, &root, PAD, 0);
    } else {
        fprintf(out, "<text x=\"%.0f\" y=\"45\" text-anchor=\"middle\">no samples</text>\n",
                WIDTH / 2);
    }
    fputs("</svg>\n", out);
    free_tree(root.child);
    if (!err && ferror(out)) err = TKP_ERR_IO;
    return err;
}
