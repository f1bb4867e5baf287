/* unrep IN OUT [gpu]: a capture written with TOKPROF_TEST_REP=shadow (each REP record followed by a
 * record [34, bin] holding the records it stands for, packed as the shim would have written them
 * without REPs) rewritten without REPs: each REP dropped, each shadow replaced by its bytes, every
 * other byte kept. Its decoded records must be the capture's (rep_check.py). With `gpu`, the same
 * for a capture written with TOKPROF_TEST_GPU=shadow: each GPU_RUN dropped (REPs are kept), its
 * shadow (the same kernels as a COLS) in its place (gpu_run_check.py). Prints the number of
 * REPs (GPU_RUNs) replaced; exit 1 on a malformed input, 3 when there was no REP (nothing was compared). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "base/mp.h"
#include "tokprof/format.h"
#include "tokprof/rep.h"

static int type_at(const struct tkp_mp *c, uint64_t *type)
{
    struct tkp_mp d = *c;
    uint32_t n;
    return tkp_mp_array(&d, &n) || !n || tkp_mp_u64(&d, type) ? -1 : 0;
}

int main(int argc, char **argv)
{
    if (argc != 3 && !(argc == 4 && !strcmp(argv[3], "gpu"))) {
        fprintf(stderr, "usage: unrep IN OUT [gpu]\n");
        return 2;
    }
    uint64_t drop = argc == 4 ? TKP_REC_GPU_RUN : TKP_REC_REP;
    FILE *in = fopen(argv[1], "rb"), *out = fopen(argv[2], "wb");
    if (!in || !out) return perror("unrep"), 1;
    uint8_t h[16];
    if (fread(h, 1, 16, in) != 16) return fprintf(stderr, "unrep: short header\n"), 1;
    fwrite(h, 1, 16, out);
    long reps = 0;
    for (;;) {
        uint8_t ch[16];
        size_t got = fread(ch, 1, 16, in);
        if (!got) break;
        if (got != 16) return fprintf(stderr, "unrep: torn chunk header\n"), 1;
        uint32_t clen, rlen;
        memcpy(&clen, ch + 4, 4);
        memcpy(&rlen, ch + 8, 4);
        uint8_t *z = malloc(clen), *raw = malloc(rlen ? rlen : 1), *o = malloc(rlen + 16);
        if (!z || !raw || !o || fread(z, 1, clen, in) != clen)
            return fprintf(stderr, "unrep: torn chunk\n"), 1;
        if (ZSTD_decompress(raw, rlen, z, clen) != rlen)
            return fprintf(stderr, "unrep: bad frame\n"), 1;
        size_t on = 0;
        struct tkp_mp c;
        tkp_mp_init(&c, raw, rlen);
        while (tkp_mp_left(&c)) {
            const uint8_t *p = c.p;
            uint64_t type;
            if (type_at(&c, &type) || tkp_mp_skip(&c)) return fprintf(stderr, "unrep: bad record\n"), 1;
            if (type == drop) {
                reps++;
                continue;
            }
            if (type == TKP_REC_REP_SHADOW) {
                struct tkp_mp d = {p, c.p};
                uint32_t n, len;
                const uint8_t *b;
                if (tkp_mp_array(&d, &n) || tkp_mp_u64(&d, &type) || tkp_mp_bin(&d, &b, &len))
                    return fprintf(stderr, "unrep: bad shadow\n"), 1;
                if (on + len > rlen + 16) { /* a shadow's bytes replace a shorter REP */
                    o = realloc(o, on + len + rlen + 16);
                    if (!o) return 1;
                }
                memcpy(o + on, b, len), on += len;
                continue;
            }
            if (on + (size_t)(c.p - p) > rlen + 16) {
                o = realloc(o, on + (size_t)(c.p - p) + rlen + 16);
                if (!o) return 1;
            }
            memcpy(o + on, p, (size_t)(c.p - p)), on += (size_t)(c.p - p);
        }
        size_t zcap = ZSTD_compressBound(on);
        uint8_t *zz = malloc(zcap);
        size_t zn = ZSTD_compress(zz, zcap, o, on, 3);
        if (ZSTD_isError(zn)) return fprintf(stderr, "unrep: zstd\n"), 1;
        uint32_t zn32 = (uint32_t)zn, on32 = (uint32_t)on;
        memcpy(ch + 4, &zn32, 4);
        memcpy(ch + 8, &on32, 4);
        fwrite(ch, 1, 16, out);
        fwrite(zz, 1, zn, out);
        free(z), free(raw), free(o), free(zz);
    }
    fclose(in);
    if (fclose(out)) return perror("unrep"), 1;
    printf("%ld\n", reps);
    return reps ? 0 : 3;
}
