/* Writes test captures for the CLI tests (tests/data/README.md):
 *   mkcapture golden OUT      the golden capture (golden.c)
 *   mkcapture torn OUT        the golden capture cut 7 bytes into its last chunk's frame
 *   mkcapture badheader OUT   16 bytes that are not a tokprof header
 *   mkcapture gpu_ontime OUT  60 steps, each step's GPU records in the next chunk (latecap.c)
 *   mkcapture gpu_late OUT    the same records, every GPU record in the last chunk
 *   mkcapture moe_grouped OUT an MoE with grouped expert kernels and cuBLAS calls around them */
#include <stdio.h>
#include <string.h>

#include "golden.h"
#include "latecap.h"

int main(int argc, char **argv)
{
    size_t off[GOLDEN_CHUNKS], len;
    if (argc != 3) {
        fprintf(stderr, "usage: mkcapture golden|torn|badheader|gpu_ontime|gpu_late|moe_grouped OUT\n");
        return 2;
    }
    struct capw *w = !strcmp(argv[1], "badheader") ? capw_new_bare() : capw_new();
    if (!strcmp(argv[1], "moe_grouped")) {
        moecap_build(w);
    } else if (!strcmp(argv[1], "gpu_ontime") || !strcmp(argv[1], "gpu_late")) {
        latecap_build(w, !strcmp(argv[1], "gpu_late"));
    } else if (!strcmp(argv[1], "badheader")) {
        capw_bytes(w, "GIF89a, not TKP!", 16);
    } else {
        golden_build(w, off);
        if (!strcmp(argv[1], "torn")) {
            const uint8_t *d = capw_data(w, &len);
            struct capw *t = capw_new_bare();
            capw_bytes(t, d, off[GOLDEN_CHUNKS - 1] + 16 + 7);
            capw_free(w);
            w = t;
        } else if (strcmp(argv[1], "golden")) {
            fprintf(stderr, "mkcapture: unknown kind '%s'\n", argv[1]);
            return 2;
        }
    }
    int err = capw_write_file(w, argv[2]);
    capw_free(w);
    if (err) {
        perror(argv[2]);
        return 1;
    }
    return 0;
}
