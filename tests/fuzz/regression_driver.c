/* The plain main() of every fuzz target (zstd's tests/fuzz/regression_driver.c): replays each
 * file named on the command line, and each file of each directory named, through the target's
 * LLVMFuzzerTestOneInput, whole and cut at 7 points (truncated inputs are the common real ones:
 * a killed program's capture, a spec being typed). CTest runs it over each target's corpus
 * without a fuzzing toolchain; scripts/test.sh again under ASan+UBSan. Exit 0 when at least
 * one input was replayed (a target crashes or aborts on a bad one), 1 when none or a path
 * cannot be opened. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define INPUT_MAX (16u << 20)

static int replay(const char *path, uint8_t *buf)
{
    FILE *f = fopen(path, "rb");
    if (!f) return 0;
    size_t len = fread(buf, 1, INPUT_MAX, f);
    fclose(f);
    LLVMFuzzerTestOneInput(buf, len);
    for (size_t cut = 1; cut < len; cut += len / 7 + 1)
        LLVMFuzzerTestOneInput(buf, cut);
    return 1;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int main(int argc, char **argv)
{
    const char *me = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    uint8_t *buf = malloc(INPUT_MAX);
    int n = 0;
    if (!buf) return 1;
    for (int i = 1; i < argc; i++) {
        struct stat st;
        if (stat(argv[i], &st)) {
            fprintf(stderr, "%s: cannot open %s\n", me, argv[i]);
            return 1;
        }
        if (!S_ISDIR(st.st_mode)) {
            n += replay(argv[i], buf);
            continue;
        }
        /* in name order, so that a crash reproduces with the same inputs before it */
        struct dirent **ents;
        int k = scandir(argv[i], &ents, NULL, NULL);
        if (k < 0) {
            fprintf(stderr, "%s: cannot open %s\n", me, argv[i]);
            return 1;
        }
        qsort(ents, (size_t)k, sizeof(*ents), by_name);
        for (int j = 0; j < k; j++) {
            char path[4096];
            if (ents[j]->d_name[0] != '.') {
                snprintf(path, sizeof(path), "%s/%s", argv[i], ents[j]->d_name);
                n += replay(path, buf);
            }
            free(ents[j]);
        }
        free(ents);
    }
    free(buf);
    printf("%s: %d inputs replayed\n", me, n);
    return n ? 0 : 1;
}
