/* Several captures as one timeline (decoder/capture/multireader.h): grouping by process from the names
 * and META pids, the merge by host time, per-process renumbering of threads and graphs, and the
 * lifetime of name strings across a process's rotated files (run under ASan). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "capwriter.h"
#include "base/err.h"
#include "capture/multireader.h"
#include "capture/reader.h"

static const uint32_t one[3] = {1, 1, 1};
static char dir[64];

static void mkdir_tmp(void)
{
    strcpy(dir, "/tmp/tkp_multi_XXXXXX");
    cr_assert(mkdtemp(dir));
}

static void rm_tmp(void)
{
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    cr_assert_eq(system(cmd), 0);
}

/* One chunk: META (pid), thread 0 -> tid, a name, launches at base + 10, +20, ... and a GRAPH 1
 * with its GRAPH_LAUNCH. */
static void write_cap(const char *name, uint64_t pid, uint32_t tid, const char *kernel,
                      uint64_t base, int launches)
{
    char path[128];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    struct capw *w = capw_new();
    capw_chunk_begin(w, base);
    capw_meta(w, "prog", pid);
    capw_thread(w, 0, tid);
    capw_name(w, 3, kernel);
    for (int i = 0; i < launches; i++)
        capw_launch(w, 10, 0, 0, 3, 0, 1, one, one, 0);
    capw_graph(w, 1, 0, NULL);
    capw_graph_launch(w, 10, 0, 0, 1, 0, 5);
    capw_chunk_end(w);
    cr_assert_eq(capw_write_file(w, path), 0);
    capw_free(w);
}

struct seen {
    uint64_t pid, host_ns;
    uint32_t thread;
    const char *name;
};

static int read_dir(struct tkp_reader **r, struct seen *out, int max)
{
    const char *paths[] = {dir};
    char why[256];
    int err = tkp_reader_open_many(paths, 1, r, why, sizeof(why));
    cr_assert_eq(err, 0, "%s", why);
    struct tkp_record rec;
    int n = 0;
    while (tkp_reader_next(*r, &rec) == 1) {
        if (rec.type != TKP_REC_LAUNCH && rec.type != TKP_REC_GRAPH_LAUNCH) continue;
        cr_assert_lt(n, max);
        out[n].pid = rec.pid;
        out[n].host_ns = rec.host_ns;
        out[n].thread = rec.thread;
        out[n].name = rec.type == TKP_REC_LAUNCH ? rec.launch.name : NULL;
        if (rec.type == TKP_REC_GRAPH_LAUNCH) out[n].host_ns = rec.graph_launch.graph;
        n++;
    }
    cr_assert_null(tkp_reader_error(*r));
    return n;
}

/* A rotated process: its files read in rotation order, as one process (one group: nothing
 * renumbered), and the names of its first file still valid after the last one was read. */
Test(multi, rotated_files_are_one_process)
{
    mkdir_tmp();
    write_cap("prog.77.tokprof", 77, 700, "first_file_kernel", 1000, 2);
    write_cap("prog.77.1.tokprof", 77, 700, "second_file_kernel", 2000, 2);
    write_cap("prog.77.2.tokprof", 77, 700, "third_file_kernel", 3000, 1);
    struct tkp_reader *r;
    struct seen s[16];
    int n = read_dir(&r, s, 16);
    cr_assert_eq(n, 3 + 3 + 2);
    cr_assert_eq(tkp_reader_nfiles(r), 3);
    cr_assert_not(tkp_reader_is_merged(r));
    cr_assert_str_eq(s[0].name, "first_file_kernel"); /* its reader was closed long ago */
    cr_assert_str_eq(s[3].name, "second_file_kernel");
    cr_assert_str_eq(s[6].name, "third_file_kernel");
    for (int i = 0; i < n; i++) {
        cr_assert_eq(s[i].pid, 77);
        cr_assert_eq(s[i].thread, 0);
    }
    tkp_reader_close(r);
    rm_tmp();
}

/* Two processes: records merged by host time, each process's thread 0 and graph 1 kept apart;
 * a program named with a numeric suffix is told from a rotation by its META pid. */
Test(multi, processes_merged_by_time)
{
    mkdir_tmp();
    write_cap("py.11.4567.tokprof", 4567, 1, "a", 1000, 3); /* launches at 1010, 1020, 1030 */
    write_cap("py.11.4568.tokprof", 4568, 2, "b", 1015, 2); /* 1025, 1035 */
    struct tkp_reader *r;
    struct seen s[16];
    int n = read_dir(&r, s, 16);
    cr_assert_eq(n, 4 + 3);
    cr_assert(tkp_reader_is_merged(r));
    static const uint64_t want_pid[] = {4567, 4567, 4568, 4567, 4568, 4567, 4568};
    for (int i = 0; i < n; i++)
        cr_assert_eq(s[i].pid, want_pid[i], "record %d: pid %llu", i, (unsigned long long)s[i].pid);
    cr_assert_eq(s[0].host_ns, 1010);
    cr_assert_eq(s[2].host_ns, 1025);
    cr_assert_neq(s[0].thread, s[2].thread, "thread 0 of each process stays apart");
    cr_assert_neq(s[5].host_ns, s[6].host_ns, "graph 1 of each process stays apart (ids)");
    tkp_reader_close(r);
    rm_tmp();
}

Test(multi, errors_name_the_input)
{
    mkdir_tmp();
    const char *paths[] = {dir};
    struct tkp_reader *r;
    char why[256];
    cr_assert_eq(tkp_reader_open_many(paths, 1, &r, why, sizeof(why)), TKP_ERR_IO);
    cr_assert(strstr(why, "no *.tokprof file"), "%s", why);
    cr_assert_null(r);
    rm_tmp();
}

/* TOKPROF_KEEP removed the first files: the rotated ones left are still one process. */
Test(multi, rotated_files_without_the_first)
{
    mkdir_tmp();
    write_cap("prog.77.3.tokprof", 77, 700, "k3", 3000, 1);
    write_cap("prog.77.2.tokprof", 77, 700, "k2", 2000, 1);
    write_cap("prog.77.snap0.tokprof", 77, 700, "snap", 2500, 1);
    struct tkp_reader *r;
    struct seen s[16];
    int n = read_dir(&r, s, 16);
    cr_assert_eq(n, 6);
    cr_assert_eq(tkp_reader_nfiles(r), 3);
    cr_assert(tkp_reader_is_merged(r), "the snapshot is a group of its own");
    cr_assert_str_eq(s[0].name, "k2");
    cr_assert_str_eq(s[2].name, "snap");
    cr_assert_str_eq(s[4].name, "k3");
    cr_assert_eq(s[0].thread, s[4].thread, "one process: one thread");
    cr_assert_neq(s[0].thread, s[2].thread);
    tkp_reader_close(r);
    rm_tmp();
}
