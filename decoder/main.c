/* tokprof: explains a capture written by libtokprof.so.
 *
 * Exit codes: 0 ok, 1 a check found a violation, 2 usage error or unreadable input. */
#include <stdio.h>
#include <string.h>

#include "tokprof/tokprof.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: tokprof COMMAND [ARGS]\n"
               "\n"
               "Explains where the GPU time of each output token went, from a capture written by\n"
               "libtokprof.so (LD_PRELOAD=build/shim/libtokprof.so YOUR_SERVER ...).\n"
               "\n"
               "commands:\n"
               "  help       this text\n"
               "  version    print the version\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "help") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "-h")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "version") || !strcmp(argv[1], "--version")) {
        printf("tokprof %s\n", TOKPROF_VERSION_STRING);
        return 0;
    }
    fprintf(stderr, "tokprof: unknown command '%s' (try 'tokprof help')\n", argv[1]);
    return 2;
}
