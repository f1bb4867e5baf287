/* Fake libnvidia-ml.so.1: NVML for the simulated GPU. Clients (vLLM's platform detection, pynvml)
 * ask NVML for the device count, name, memory, compute capability and UUID before they touch
 * CUDA. The answers come from the fake driver itself (dlopen("libcuda.so.1"), the same device
 * the runtime sees: its name, cuDeviceTotalMem = SIMGPU_MEM, its attributes), so the two never
 * disagree. One device, index 0; its handle is the address of a static. NVML's header is not in
 * the CUDA toolkit: the types below follow nvidia-ml-py's pynvml.py (the structs it passes).
 * Every other NVML function is a generated stub (nvml.names, gen_stubs.py) that answers
 * NVML_ERROR_NOT_SUPPORTED and names itself. Per process, like the real library; the "used"
 * memory is 0 (simulated device memory is per process host memory, nothing is shared). */
#include <cuda.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define NVML_EXPORT __attribute__((visibility("default")))

typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0,
    NVML_ERROR_UNINITIALIZED = 1,
    NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3,
    NVML_ERROR_NOT_FOUND = 6,
    NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_LIBRARY_NOT_FOUND = 12,
    NVML_ERROR_UNKNOWN = 999,
};
typedef struct nvml_device *nvmlDevice_t;
struct nvml_device {
    int index;
};
static struct nvml_device dev0 = {0};

typedef struct {
    unsigned long long total, free, used;
} nvmlMemory_t;
typedef struct {
    unsigned version;
    unsigned long long total, reserved, free, used;
} nvmlMemory_v2_t;

/* What the fake driver says about device 0, read once. */
static struct {
    nvmlReturn_t status;
    char name[96];
    size_t total;
    int major, minor;
    char uuid[96];
} facts;
static int inits;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static void read_driver(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    CUresult (*name)(char *, int, CUdevice) = h ? (CUresult(*)(char *, int, CUdevice))dlsym(h, "cuDeviceGetName") : NULL;
    CUresult (*mem)(size_t *, CUdevice) = h ? (CUresult(*)(size_t *, CUdevice))dlsym(h, "cuDeviceTotalMem_v2") : NULL;
    CUresult (*attr)(int *, CUdevice_attribute, CUdevice) =
        h ? (CUresult(*)(int *, CUdevice_attribute, CUdevice))dlsym(h, "cuDeviceGetAttribute") : NULL;
    CUresult (*uuid)(CUuuid *, CUdevice) = h ? (CUresult(*)(CUuuid *, CUdevice))dlsym(h, "cuDeviceGetUuid_v2") : NULL;
    CUuuid u;
    if (!name || !mem || !attr || !uuid || name(facts.name, sizeof facts.name, 0) != CUDA_SUCCESS ||
        mem(&facts.total, 0) != CUDA_SUCCESS ||
        attr(&facts.major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 0) != CUDA_SUCCESS ||
        attr(&facts.minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0) != CUDA_SUCCESS ||
        uuid(&u, 0) != CUDA_SUCCESS) {
        facts.status = NVML_ERROR_LIBRARY_NOT_FOUND;
        return;
    }
    /* NVML's form: GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx */
    const unsigned char *b = (const unsigned char *)u.bytes;
    snprintf(facts.uuid, sizeof facts.uuid,
             "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
             b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
    facts.status = NVML_SUCCESS;
}

NVML_EXPORT nvmlReturn_t nvmlInitWithFlags(unsigned flags)
{
    (void)flags;
    pthread_mutex_lock(&lock);
    if (!inits && !facts.status && !facts.name[0])
        read_driver();
    nvmlReturn_t r = facts.status;
    if (r == NVML_SUCCESS)
        inits++;
    pthread_mutex_unlock(&lock);
    return r;
}
NVML_EXPORT nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
NVML_EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

NVML_EXPORT nvmlReturn_t nvmlShutdown(void)
{
    pthread_mutex_lock(&lock);
    nvmlReturn_t r = inits > 0 ? (inits--, NVML_SUCCESS) : NVML_ERROR_UNINITIALIZED;
    pthread_mutex_unlock(&lock);
    return r;
}

static nvmlReturn_t ready(void)
{
    return __atomic_load_n(&inits, __ATOMIC_RELAXED) > 0 ? NVML_SUCCESS : NVML_ERROR_UNINITIALIZED;
}

static nvmlReturn_t device(nvmlDevice_t d)
{
    nvmlReturn_t r = ready();
    return r ? r : d == &dev0 ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

static nvmlReturn_t copy_string(char *out, unsigned len, const char *s)
{
    if (!out)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(out, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

NVML_EXPORT const char *nvmlErrorString(nvmlReturn_t r)
{
    switch (r) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_LIBRARY_NOT_FOUND: return "NVML Shared Library Not Found";
    default: return "Unknown Error";
    }
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned *n)
{
    nvmlReturn_t r = ready();
    if (!r && !n)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (!r)
        *n = 1;
    return r;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned *n) { return nvmlDeviceGetCount_v2(n); }

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned index, nvmlDevice_t *d)
{
    nvmlReturn_t r = ready();
    if (!r && (!d || index != 0))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (!r)
        *d = &dev0;
    return r;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned index, nvmlDevice_t *d)
{
    return nvmlDeviceGetHandleByIndex_v2(index, d);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *d)
{
    nvmlReturn_t r = ready();
    if (!r && (!uuid || !d))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (!r && strcmp(uuid, facts.uuid) != 0)
        r = NVML_ERROR_NOT_FOUND;
    if (!r)
        *d = &dev0;
    return r;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetIndex(nvmlDevice_t d, unsigned *index)
{
    nvmlReturn_t r = device(d);
    if (!r && !index)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (!r)
        *index = 0;
    return r;
}
NVML_EXPORT nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t d, unsigned *minor)
{
    return nvmlDeviceGetIndex(d, minor);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t d, char *name, unsigned len)
{
    nvmlReturn_t r = device(d);
    return r ? r : copy_string(name, len, facts.name);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t d, char *uuid, unsigned len)
{
    nvmlReturn_t r = device(d);
    return r ? r : copy_string(uuid, len, facts.uuid);
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t d, nvmlMemory_t *m)
{
    nvmlReturn_t r = device(d);
    if (!r && !m)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (!r) {
        m->total = m->free = facts.total;
        m->used = 0;
    }
    return r;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t d, nvmlMemory_v2_t *m)
{
    nvmlReturn_t r = device(d);
    if (!r && !m)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (!r) {
        m->total = m->free = facts.total;
        m->reserved = m->used = 0;
    }
    return r;
}

NVML_EXPORT nvmlReturn_t nvmlDeviceGetCudaComputeCapability(nvmlDevice_t d, int *major, int *minor)
{
    nvmlReturn_t r = device(d);
    if (!r && (!major || !minor))
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (!r) {
        *major = facts.major;
        *minor = facts.minor;
    }
    return r;
}

/* One device: every pair of handles is the same GPU, "OK" for every P2P capability. */
NVML_EXPORT nvmlReturn_t nvmlDeviceGetP2PStatus(nvmlDevice_t a, nvmlDevice_t b, int index, int *status)
{
    (void)index;
    nvmlReturn_t r = device(a);
    if (!r)
        r = device(b);
    if (!r && !status)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (!r)
        *status = 0; /* NVML_P2P_STATUS_OK */
    return r;
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned len)
{
    nvmlReturn_t r = ready();
    return r ? r : copy_string(version, len, "580.00.00");
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned len)
{
    nvmlReturn_t r = ready();
    return r ? r : copy_string(version, len, "13.580.00");
}

NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion_v2(int *v)
{
    nvmlReturn_t r = ready();
    if (!r && !v)
        r = NVML_ERROR_INVALID_ARGUMENT;
    if (!r)
        *v = 13000; /* as the fake driver's cuDriverGetVersion */
    return r;
}
NVML_EXPORT nvmlReturn_t nvmlSystemGetCudaDriverVersion(int *v) { return nvmlSystemGetCudaDriverVersion_v2(v); }
