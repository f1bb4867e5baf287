/* Fuzz target for the spec parser and compiler (libFuzzer's entry point), with a plain main()
 * that replays every file of the directories it is given, so CTest runs the corpus without a
 * fuzzing toolchain. Build with -fsanitize=fuzzer -DTKP_LIBFUZZER to fuzz for real. */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check/ast.h"
#include "check/results.h"
#include "check/parse.h"
#include "check/compile.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = 0;
    struct tkp_spec *sp = NULL;
    struct tkp_spec_err e;
    int rc = tkp_spec_parse(text, "fuzz", &sp, &e); /* sp owns text from here */
    if (!rc) rc = tkp_spec_compile(sp, &e);
    if (!rc) {
        FILE *null = fopen("/dev/null", "w");
        if (null) {
            tkp_report_explain(null, sp);
            fclose(null);
        }
    } else if (e.msg[0] == 0) {
        abort(); /* every failure must say why */
    }
    tkp_spec_free(sp);
    return 0;
}

#ifndef TKP_LIBFUZZER
int main(int argc, char **argv)
{
    int n = 0;
    for (int i = 1; i < argc; i++) {
        DIR *d = opendir(argv[i]);
        if (!d) {
            fprintf(stderr, "fuzz_spec: cannot open %s\n", argv[i]);
            return 1;
        }
        for (struct dirent *de; (de = readdir(d));) {
            if (de->d_name[0] == '.') continue;
            char path[4096];
            snprintf(path, sizeof(path), "%s/%s", argv[i], de->d_name);
            FILE *f = fopen(path, "rb");
            if (!f) continue;
            static uint8_t buf[1 << 20];
            size_t len = fread(buf, 1, sizeof(buf), f);
            fclose(f);
            LLVMFuzzerTestOneInput(buf, len);
            /* and every prefix cut at a few points: truncated specs are the common input */
            for (size_t cut = 1; cut < len; cut += len / 7 + 1)
                LLVMFuzzerTestOneInput(buf, cut);
            n++;
        }
        closedir(d);
    }
    printf("fuzz_spec: replayed %d inputs\n", n);
    return n ? 0 : 1;
}
#endif
