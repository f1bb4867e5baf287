/* The META record: program, pid, host, clocks, CUDA versions, devices and the configuration.
 * Devices are asked of a driver the program loaded and initialised, never of one we load. */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/config.h"
#include "core/real.h"
#include "record/stacks.h"
#include "tokprof/format.h"
#include "tokprof/tokprof.h"
#include "writer/meta.h"

static void pack_str(msgpack_packer *pk, const char *s)
{
    size_t n = strlen(s);
    msgpack_pack_str(pk, n);
    msgpack_pack_str_body(pk, s, n);
}

static void pack_kv_str(msgpack_packer *pk, const char *k, const char *v)
{
    pack_str(pk, k);
    pack_str(pk, v ? v : "");
}
static void pack_kv_int(msgpack_packer *pk, const char *k, int64_t v)
{
    pack_str(pk, k);
    msgpack_pack_int64(pk, v);
}

typedef int (*drv_int_fn)(int *);
typedef int (*dev_get_fn)(int *, int);
typedef int (*dev_name_fn)(char *, int, int);
typedef int (*dev_uuid_fn)(unsigned char *, int);

static void pack_devices(msgpack_packer *pk)
{
    /* Only a driver the program loaded and initialised is asked; none is loaded by us here. */
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    int count = 0;
    dev_name_fn get_name = NULL;
    dev_uuid_fn get_uuid = NULL;
    dev_get_fn dev_get = NULL;
    if (h) {
        drv_int_fn get_count = (drv_int_fn)tkp_real_dlsym(h, "cuDeviceGetCount");
        get_name = (dev_name_fn)tkp_real_dlsym(h, "cuDeviceGetName");
        get_uuid = (dev_uuid_fn)tkp_real_dlsym(h, "cuDeviceGetUuid_v2");
        dev_get = (dev_get_fn)tkp_real_dlsym(h, "cuDeviceGet");
        if (!get_count || get_count(&count) != 0 || count < 0 || count > 64) count = 0;
    }
    pack_str(pk, "devices");
    msgpack_pack_array(pk, (size_t)count);
    for (int i = 0; i < count; i++) {
        char name[256] = "";
        unsigned char u[16] = {0};
        char uuid[48] = "";
        int dev = i;
        if (dev_get) dev_get(&dev, i);
        if (get_name) get_name(name, sizeof name - 1, dev);
        if (get_uuid && get_uuid(u, dev) == 0)
            snprintf(uuid, sizeof uuid,
                     "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                     u[0], u[1], u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11],
                     u[12], u[13], u[14], u[15]);
        msgpack_pack_map(pk, 2);
        pack_kv_str(pk, "name", name);
        pack_kv_str(pk, "uuid", uuid);
    }
    if (h) dlclose(h);
}

static int driver_version(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_LAZY | RTLD_NOLOAD);
    int v = 0;
    if (h) {
        drv_int_fn f = (drv_int_fn)tkp_real_dlsym(h, "cuDriverGetVersion");
        if (!f || f(&v) != 0) v = 0;
        dlclose(h);
    }
    return v;
}

static int runtime_version(void)
{
    static const struct { const char *so; int v; } rt[] = {{"libcudart.so.13", 13000},
                                                           {"libcudart.so.12", 12000}};
    for (size_t i = 0; i < sizeof rt / sizeof rt[0]; i++) {
        void *h = dlopen(rt[i].so, RTLD_LAZY | RTLD_NOLOAD);
        if (h) {
            dlclose(h);
            return rt[i].v;
        }
    }
    return 0;
}

static const char *step_mode_name(void)
{
    static char buf[300];
    switch (tkp_cfg.step_mode) {
    case TKP_STEPMODE_SYNC: return "sync";
    case TKP_STEPMODE_GRAPH: return "graph";
    case TKP_STEPMODE_MARKER: return "marker";
    case TKP_STEPMODE_NVTX: snprintf(buf, sizeof buf, "nvtx:%s", tkp_cfg.step_regex); return buf;
    case TKP_STEPMODE_KERNEL:
        snprintf(buf, sizeof buf, "kernel:%s", tkp_cfg.step_regex);
        return buf;
    default: return "auto";
    }
}

void tkp_meta_pack(msgpack_packer *pk, const struct tkp_sink *sink, uint64_t start_realtime_ns,
                   uint64_t start_monotonic_ns)
{
    char host[256] = "";
    gethostname(host, sizeof host - 1);
    msgpack_pack_array(pk, 2);
    msgpack_pack_int(pk, TKP_REC_META);
    msgpack_pack_map(pk, 11 + (size_t)(sink->meta_keys ? sink->meta_keys() : 0));
    pack_kv_str(pk, "program", tkp_cfg.program);
    pack_kv_int(pk, "pid", getpid());
    pack_kv_int(pk, "ppid", getppid());
    pack_kv_str(pk, "hostname", host);
    pack_kv_int(pk, "start_realtime_ns", (int64_t)start_realtime_ns);
    pack_kv_int(pk, "start_monotonic_ns", (int64_t)start_monotonic_ns);
    pack_kv_str(pk, "tokprof_version", TOKPROF_VERSION_STRING);
    pack_kv_int(pk, "cuda_runtime_version", runtime_version());
    pack_kv_int(pk, "cuda_driver_version", driver_version());
    pack_devices(pk);
    pack_str(pk, "config");
    msgpack_pack_map(pk, 12);
    pack_kv_str(pk, "mode", sink->mode);
    pack_kv_int(pk, "max_bytes", (int64_t)tkp_prod.max_bytes); /* the disk bounds: OPERATIONS.md */
    pack_kv_int(pk, "keep", tkp_prod.keep);
    pack_kv_int(pk, "min_free_bytes", (int64_t)tkp_prod.min_free_bytes);
    pack_kv_int(pk, "min_free_pct", tkp_prod.min_free_pct);
    pack_kv_str(pk, "stacks", tkp_stacks_desc());
    pack_kv_str(pk, "step", step_mode_name());
    pack_kv_int(pk, "buffer_mb", tkp_cfg.buffer_mb);
    pack_kv_int(pk, "ring_kb", tkp_cfg.ring_kb);
    pack_kv_int(pk, "flush_ms", tkp_cfg.flush_ms);
    pack_kv_int(pk, "time_ns", tkp_cfg.time_ns); /* host times' grain (TOKPROF_TIME_NS) */
    pack_kv_str(pk, "out", tkp_cfg.out_dir);
    if (sink->meta_pack) sink->meta_pack(pk); /* a flight snapshot says why it was taken */
}
