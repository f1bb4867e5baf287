/* simgpu truth log (SIMGPU_LOG=FILE): one JSON line per executed kernel, copy or memset, written
 * at enqueue time, in host launch order, under sim_lock. Flushed at every host synchronisation
 * and at exit, so a killed process leaves most of it behind. Format: README.md, "Truth log".
 *
 * One log per process: the file is opened at the first op the process executes (a process that
 * executes nothing -- a compiler worker that only loads libcuda -- leaves no file and truncates
 * none), "%p" in FILE stands for the pid, and every line carries "pid". A forked child starts its
 * own log (appending when FILE has no %p, so it never truncates its parent's). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sim.h"

static FILE *logf;
static const char *log_path;
static int log_failed, log_append, exit_hooked;
static uint64_t seq;
static long log_pid;
static pthread_mutex_t flush_lock = PTHREAD_MUTEX_INITIALIZER;

static void at_exit_flush(void) { tlog_flush(); }

/* The child's copy of the parent's log (and its unflushed buffer) is dropped, not flushed. */
static void at_fork_child(void)
{
    logf = NULL;
    log_failed = 0;
    log_append = 1;
    seq = 0;
    pthread_mutex_init(&flush_lock, NULL);
}

void tlog_init(void)
{
    const char *path = getenv("SIMGPU_LOG");
    if (!path || !*path)
        return;
    log_path = path;
    pthread_atfork(NULL, NULL, at_fork_child);
}

/* Under flush_lock: the process's log, opened at its first op. */
static FILE *log_open(void)
{
    if (logf || log_failed || !log_path)
        return logf;
    char path[4096];
    size_t o = 0;
    int per_pid = 0;
    for (const char *c = log_path; *c && o + 24 < sizeof path; c++) {
        if (c[0] == '%' && c[1] == 'p') {
            o += (size_t)snprintf(path + o, sizeof path - o, "%ld", (long)getpid());
            per_pid = 1;
            c++;
        } else {
            path[o++] = *c;
        }
    }
    path[o] = 0;
    log_pid = (long)getpid();
    logf = fopen(path, log_append && !per_pid ? "a" : "w");
    if (!logf) {
        log_failed = 1;
        fprintf(stderr, "simgpu: cannot open SIMGPU_LOG=%s\n", path);
        return NULL;
    }
    if (!exit_hooked) {
        exit_hooked = 1;
        atexit(at_exit_flush);
    }
    return logf;
}

void tlog_flush(void)
{
    if (!logf)
        return;
    pthread_mutex_lock(&flush_lock);
    fflush(logf);
    pthread_mutex_unlock(&flush_lock);
}

static void put_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (; s && *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void put_id(FILE *f, const char *key, uint64_t id)
{
    if (id)
        fprintf(f, ",\"%s\":%" PRIu64, key, id);
    else
        fprintf(f, ",\"%s\":null", key);
}

void tlog_write(const struct sim_op *op)
{
    seq++;
    sim_observe(op);
    if (!log_path)
        return;
    static const char *kinds[] = {"kernel", "copy", "memset"};
    static const char *vias[] = {"driver", "runtime", "library", "graph"};
    static const char *dirs[] = {"HtoD", "DtoH", "DtoD", "HtoH"};
    pthread_mutex_lock(&flush_lock);
    FILE *f = log_open();
    if (!f) {
        pthread_mutex_unlock(&flush_lock);
        return;
    }
    fprintf(f, "{\"seq\":%" PRIu64 ",\"kind\":\"%s\",\"name\":", seq, kinds[op->kind]);
    put_json_string(f, op->name);
    fprintf(f, ",\"stream\":%d,\"handle\":\"0x%" PRIxPTR "\"", op->stream->id, (uintptr_t)op->handle);
    fprintf(f, ",\"start_ns\":%" PRId64 ",\"end_ns\":%" PRId64 ",\"via\":\"%s\"", op->start, op->end,
            vias[op->via >= 0 && op->via <= 3 ? op->via : 0]);
    put_id(f, "graph_node", op->graph_node);
    put_id(f, "graph_exec", op->graph_exec);
    fprintf(f, ",\"grid\":[%u,%u,%u],\"block\":[%u,%u,%u],\"flops\":%.17g,\"bytes\":%.17g", op->grid[0],
            op->grid[1], op->grid[2], op->block[0], op->block[1], op->block[2], op->flops, op->bytes);
    if (op->kind == 1)
        fprintf(f, ",\"dir\":\"%s\",\"pinned\":%s", dirs[op->dir & 3], op->pinned ? "true" : "false");
    if (op->faulted)
        fprintf(f, ",\"faulted\":true");
    fprintf(f, ",\"tid\":%ld,\"pid\":%ld}\n", (long)syscall(SYS_gettid), log_pid);
    pthread_mutex_unlock(&flush_lock);
}
