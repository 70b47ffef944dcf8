/*
 * A fake libnvidia-ml.so.1 that the real pynvml loads through its real ctypes paths.
 *
 * State comes from the text file named by $FAKE_NVML_STATE, re-read on every call, so a test can change
 * readings and faults while an exporter runs (tests/fakes/nvml.py writes it atomically). One
 * "key value" per line:
 *
 *   init_error N            return code of nvmlInit*      (12 = library not found, 9 = driver not loaded)
 *   count N                 number of GPUs (at most 16)
 *   count_error N           return code of nvmlDeviceGetCount_v2
 *   now_us N                fixed "now" for samples, microseconds since the epoch (0: the real clock)
 *   sample_period_us N      NVML's sampling period (default 166667, one sixth of a second)
 *   sample_buffer N         samples NVML keeps (default 120)
 *   driver_version S
 *   gpu.I.uuid S            default GPU-fa4e0000-0000-0000-0000-00000000000I
 *   gpu.I.name S
 *   gpu.I.util N            percent, returned by utilization rates and by every new sample
 *   gpu.I.mem_util N
 *   gpu.I.mem_used N        bytes
 *   gpu.I.mem_total N       bytes
 *   gpu.I.mig N             -1: not MIG-capable, 0: MIG off (default), K > 0: MIG on with K MIG devices
 *                           (UUIDs MIG-<parent uuid without GPU->-<j>, memory = the GPU's divided by K)
 *   gpu.I.mig_created N     MIG devices created yet, of the `mig` slots (-1, default: all): 0 is a GPU just switched
 *                           into MIG mode, before its GPU instances are created (empty slots answer NOT_FOUND)
 *   gpu.I.error N           returned by every call on this GPU or its MIG devices (15 = GPU is lost)
 *   gpu.I.handle_error N    returned by nvmlDeviceGetHandleByIndex_v2
 *   gpu.I.samples_error N   returned by nvmlDeviceGetSamples (3 = not supported)
 *   gpu.I.util_error N      returned by nvmlDeviceGetUtilizationRates
 *   gpu.I.memory_error N    returned by nvmlDeviceGetMemoryInfo(_v2)
 *   gpu.I.mig_handle_error N returned by nvmlDeviceGetMigDeviceHandleByIndex for an existing MIG device
 *                           (4 = no permission: a container not given that MIG device)
 *   gpu.I.minor N           device minor number, the N of /dev/nvidiaN (nvmlDeviceGetMinorNumber); -1 (default):
 *                           the GPU's index. The kernel numbers GPUs in probe order, NVML in PCI bus order, so
 *                           the two can differ on a real node
 *   gpu.I.mig_generation N  MIG devices re-created so far (default 0): each new generation gives them new UUIDs
 *                           (MIG-<parent uuid without GPU->-<j>-g<N>) at the same slots, as destroying and creating
 *                           GPU instances again does (`nvidia-smi mig -dgi`, then `-cgi`)
 *   gpu.I.hang S            a call group ("samples", "utilization" or "memory") that blocks on this GPU and its MIG
 *                           devices while this names it, as a hung GPU blocks the driver call for seconds; the call
 *                           then answers from the state as it is when released (fake_nvml_hung counts the calls
 *                           held, so a test knows one is in before it moves its clocks and lets it go)
 *
 * A missing state file acts as "driver not loaded". Samples are stateless: the ones newer than the
 * caller's lastSeenTimeStamp, on a grid of sample_period_us, carry the current utilization. MIG behaves
 * like real NVML: a MIG-enabled GPU and its MIG devices answer NOT_SUPPORTED to utilization queries.
 * Calls are counted (fake_nvml_calls) so a test can prove a scrape makes none.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef int nvmlReturn_t;

#define NVML_SUCCESS 0
#define NVML_ERROR_UNINITIALIZED 1
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_SUPPORTED 3
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_UNKNOWN 999

#define NVML_VALUE_TYPE_UNSIGNED_INT 1
#define NVML_GPU_UTILIZATION_SAMPLES 1
#define NVML_MEMORY_UTILIZATION_SAMPLES 2

#define MAX_GPUS 16
#define MAX_MIG 7
#define STR_LEN 96

typedef struct { unsigned long long total, free, used; } nvmlMemory_t;
typedef struct { unsigned int version; unsigned long long total, reserved, free, used; } nvmlMemory_v2_t;
typedef struct { unsigned int gpu, memory; } nvmlUtilization_t;
typedef union {
    double dVal; unsigned int uiVal; unsigned long ulVal; unsigned long long ullVal;
    long long sllVal; int siVal; unsigned short usVal;
} nvmlValue_t;
typedef struct { unsigned long long timeStamp; nvmlValue_t sampleValue; } nvmlSample_t;

/* A device handle points into this table: [gpu][0] is the GPU, [gpu][1 + j] its MIG device j. */
struct fake_device { int gpu; int mig; };
typedef struct fake_device *nvmlDevice_t;
static struct fake_device devices[MAX_GPUS][MAX_MIG + 1];

struct fake_gpu {
    char uuid[STR_LEN], name[STR_LEN];
    unsigned util, mem_util;
    unsigned long long mem_used, mem_total;
    int mig, error, handle_error, samples_error, util_error, memory_error, mig_handle_error, minor;
    int mig_created, mig_generation;
    char hang[16];
};

struct fake_state {
    int loaded, init_error, count_error;
    unsigned count, buffer;
    unsigned long long now_us, period_us;
    char driver[80];
    struct fake_gpu gpu[MAX_GPUS];
};

/* ---- call accounting, for tests ---- */
enum { C_INIT, C_SHUTDOWN, C_COUNT, C_HANDLE, C_UUID, C_NAME, C_UTIL, C_MEMORY, C_SAMPLES, C_MIG, C_DRIVER,
       C_OTHER, C_N };
static const char *call_names[C_N] = {"init", "shutdown", "count", "handle", "uuid", "name", "utilization",
                                      "memory", "samples", "mig", "driver", "other"};
static unsigned long calls[C_N];
static int init_refcount;
static int hung_calls;

static void count_call(int which) { __atomic_fetch_add(&calls[which], 1, __ATOMIC_RELAXED); }

unsigned long fake_nvml_calls(const char *name) {
    unsigned long total = 0;
    for (int i = 0; i < C_N; i++)
        if (name == NULL || name[0] == '\0' || strcmp(name, call_names[i]) == 0)
            total += __atomic_load_n(&calls[i], __ATOMIC_RELAXED);
    return total;
}

unsigned long fake_nvml_hung(void) { return (unsigned long)__atomic_load_n(&hung_calls, __ATOMIC_RELAXED); }

void fake_nvml_reset(void) {
    for (int i = 0; i < C_N; i++) __atomic_store_n(&calls[i], 0, __ATOMIC_RELAXED);
    __atomic_store_n(&init_refcount, 0, __ATOMIC_RELAXED);
}

/* ---- state file ---- */
static void copy_str(char *dst, size_t size, const char *src) {
    snprintf(dst, size, "%s", src);
}

static void set_gpu_field(struct fake_gpu *g, const char *field, const char *value) {
    long long n = strtoll(value, NULL, 10);
    if (!strcmp(field, "uuid")) copy_str(g->uuid, sizeof g->uuid, value);
    else if (!strcmp(field, "name")) copy_str(g->name, sizeof g->name, value);
    else if (!strcmp(field, "util")) g->util = (unsigned)n;
    else if (!strcmp(field, "mem_util")) g->mem_util = (unsigned)n;
    else if (!strcmp(field, "mem_used")) g->mem_used = (unsigned long long)n;
    else if (!strcmp(field, "mem_total")) g->mem_total = (unsigned long long)n;
    else if (!strcmp(field, "mig")) g->mig = (int)n;
    else if (!strcmp(field, "error")) g->error = (int)n;
    else if (!strcmp(field, "handle_error")) g->handle_error = (int)n;
    else if (!strcmp(field, "samples_error")) g->samples_error = (int)n;
    else if (!strcmp(field, "util_error")) g->util_error = (int)n;
    else if (!strcmp(field, "memory_error")) g->memory_error = (int)n;
    else if (!strcmp(field, "mig_handle_error")) g->mig_handle_error = (int)n;
    else if (!strcmp(field, "minor")) g->minor = (int)n;
    else if (!strcmp(field, "mig_created")) g->mig_created = (int)n;
    else if (!strcmp(field, "mig_generation")) g->mig_generation = (int)n;
    else if (!strcmp(field, "hang")) copy_str(g->hang, sizeof g->hang, value);
}

static void read_state(struct fake_state *s) {
    memset(s, 0, sizeof *s);
    s->period_us = 166667;
    s->buffer = 120;
    copy_str(s->driver, sizeof s->driver, "550.54.15");
    for (int i = 0; i < MAX_GPUS; i++) {
        snprintf(s->gpu[i].uuid, STR_LEN, "GPU-fa4e0000-0000-0000-0000-%012d", i);
        copy_str(s->gpu[i].name, STR_LEN, "NVIDIA H100 80GB HBM3");
        s->gpu[i].mem_total = 85899345920ULL;
        s->gpu[i].minor = -1;
        s->gpu[i].mig_created = -1;
    }
    const char *path = getenv("FAKE_NVML_STATE");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (f == NULL) return;
    s->loaded = 1;
    char line[512], key[128], value[256];
    while (fgets(line, sizeof line, f)) {
        value[0] = '\0';
        if (sscanf(line, "%127s %255[^\n]", key, value) < 1) continue;
        long long n = strtoll(value, NULL, 10);
        if (!strncmp(key, "gpu.", 4)) {
            char *dot = NULL;
            long i = strtol(key + 4, &dot, 10);
            if (i < 0 || i >= MAX_GPUS || dot == NULL || *dot != '.') continue;
            set_gpu_field(&s->gpu[i], dot + 1, value);
        } else if (!strcmp(key, "init_error")) s->init_error = (int)n;
        else if (!strcmp(key, "count")) s->count = n < 0 ? 0 : (n > MAX_GPUS ? MAX_GPUS : (unsigned)n);
        else if (!strcmp(key, "count_error")) s->count_error = (int)n;
        else if (!strcmp(key, "now_us")) s->now_us = (unsigned long long)n;
        else if (!strcmp(key, "sample_period_us")) s->period_us = n > 0 ? (unsigned long long)n : 1;
        else if (!strcmp(key, "sample_buffer")) s->buffer = n > 0 ? (unsigned)n : 1;
        else if (!strcmp(key, "driver_version")) copy_str(s->driver, sizeof s->driver, value);
    }
    fclose(f);
}

/* MIG devices that exist on a GPU: `mig` of them, or `mig_created` while fewer were created yet. */
static int created(const struct fake_gpu *g) {
    return g->mig_created >= 0 && g->mig_created < g->mig ? g->mig_created : g->mig;
}

/* Common checks for a call on a device: initialised, state readable, handle valid, GPU not failing. */
static nvmlReturn_t resolve(nvmlDevice_t device, struct fake_state *s, struct fake_gpu **gpu, int *mig) {
    if (__atomic_load_n(&init_refcount, __ATOMIC_RELAXED) <= 0) return NVML_ERROR_UNINITIALIZED;
    read_state(s);
    if (!s->loaded) return NVML_ERROR_DRIVER_NOT_LOADED;
    char *base = (char *)devices, *p = (char *)device;
    if (device == NULL || p < base || p >= base + sizeof devices) return NVML_ERROR_INVALID_ARGUMENT;
    if (device->gpu < 0 || (unsigned)device->gpu >= s->count) return NVML_ERROR_INVALID_ARGUMENT;
    *gpu = &s->gpu[device->gpu];
    *mig = device->mig;
    if ((*gpu)->error) return (*gpu)->error;
    if (*mig >= 0 && *mig >= created(*gpu)) return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

static nvmlDevice_t handle_of(int gpu, int mig) {
    struct fake_device *d = &devices[gpu][mig + 1];
    d->gpu = gpu;
    d->mig = mig;
    return d;
}

/* Block while the device's GPU is set to hang `call`, re-reading the state every millisecond; then resolve the
 * device again against the state as it is now (the clock and readings a test moved while the call was held). */
static nvmlReturn_t held(nvmlDevice_t device, const char *call, struct fake_state *s, struct fake_gpu **gpu,
                         int *mig) {
    if (strcmp((*gpu)->hang, call) != 0) return NVML_SUCCESS;
    __atomic_fetch_add(&hung_calls, 1, __ATOMIC_RELAXED);
    struct timespec pause = {0, 1000000};
    do {
        nanosleep(&pause, NULL);
        read_state(s);
    } while (s->loaded && (unsigned)device->gpu < s->count && !strcmp(s->gpu[device->gpu].hang, call));
    __atomic_fetch_sub(&hung_calls, 1, __ATOMIC_RELAXED);
    return resolve(device, s, gpu, mig);
}

/* ---- initialisation ---- */
nvmlReturn_t nvmlInitWithFlags(unsigned int flags) {
    (void)flags;
    count_call(C_INIT);
    struct fake_state s;
    read_state(&s);
    if (!s.loaded) return NVML_ERROR_DRIVER_NOT_LOADED;
    if (s.init_error) return s.init_error;
    __atomic_fetch_add(&init_refcount, 1, __ATOMIC_RELAXED);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlInit_v2(void) { return nvmlInitWithFlags(0); }
nvmlReturn_t nvmlInit(void) { return nvmlInitWithFlags(0); }

nvmlReturn_t nvmlShutdown(void) {
    count_call(C_SHUTDOWN);
    if (__atomic_load_n(&init_refcount, __ATOMIC_RELAXED) <= 0) return NVML_ERROR_UNINITIALIZED;
    __atomic_fetch_sub(&init_refcount, 1, __ATOMIC_RELAXED);
    return NVML_SUCCESS;
}

const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case 0: return "Success";
    case 1: return "Uninitialized";
    case 2: return "Invalid Argument";
    case 3: return "Not Supported";
    case 4: return "Insufficient Permissions";
    case 6: return "Not Found";
    case 7: return "Insufficient Size";
    case 9: return "Driver Not Loaded";
    case 10: return "Timeout";
    case 12: return "NVML Shared Library Not Found";
    case 13: return "Function Not Found";
    case 15: return "GPU is lost";
    case 16: return "GPU requires restart";
    case 18: return "RM has detected an NVML/RM version mismatch.";
    case 28: return "GPU not found";
    default: return "Unknown Error";
    }
}

nvmlReturn_t nvmlSystemGetDriverVersion(char *version, unsigned int length) {
    count_call(C_DRIVER);
    if (__atomic_load_n(&init_refcount, __ATOMIC_RELAXED) <= 0) return NVML_ERROR_UNINITIALIZED;
    struct fake_state s;
    read_state(&s);
    if (version == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(s.driver) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    copy_str(version, length, s.driver);
    return NVML_SUCCESS;
}

/* ---- enumeration ---- */
nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    count_call(C_COUNT);
    if (__atomic_load_n(&init_refcount, __ATOMIC_RELAXED) <= 0) return NVML_ERROR_UNINITIALIZED;
    struct fake_state s;
    read_state(&s);
    if (!s.loaded) return NVML_ERROR_DRIVER_NOT_LOADED;
    if (s.count_error) return s.count_error;
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *count = s.count;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    count_call(C_HANDLE);
    if (__atomic_load_n(&init_refcount, __ATOMIC_RELAXED) <= 0) return NVML_ERROR_UNINITIALIZED;
    struct fake_state s;
    read_state(&s);
    if (!s.loaded) return NVML_ERROR_DRIVER_NOT_LOADED;
    if (device == NULL || index >= s.count) return NVML_ERROR_INVALID_ARGUMENT;
    if (s.gpu[index].error) return s.gpu[index].error;
    if (s.gpu[index].handle_error) return s.gpu[index].handle_error;
    *device = handle_of((int)index, -1);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetHandleByUUID(const char *uuid, nvmlDevice_t *device) {
    count_call(C_HANDLE);
    if (__atomic_load_n(&init_refcount, __ATOMIC_RELAXED) <= 0) return NVML_ERROR_UNINITIALIZED;
    struct fake_state s;
    read_state(&s);
    if (uuid == NULL || device == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < s.count; i++) {
        if (strcmp(s.gpu[i].uuid, uuid) == 0) {
            if (s.gpu[i].error) return s.gpu[i].error;
            *device = handle_of((int)i, -1);
            return NVML_SUCCESS;
        }
    }
    return NVML_ERROR_NOT_FOUND;
}

static void mig_uuid(const struct fake_gpu *g, int mig, char *out, size_t size) {
    /* Real MIG UUIDs are "MIG-<uuid>"; derive a stable, unique one from the parent's. */
    const char *tail = strncmp(g->uuid, "GPU-", 4) == 0 ? g->uuid + 4 : g->uuid;
    if (g->mig_generation > 0) snprintf(out, size, "MIG-%s-%d-g%d", tail, mig, g->mig_generation);
    else snprintf(out, size, "MIG-%s-%d", tail, mig);
}

static nvmlReturn_t copy_out(char *dst, unsigned int length, const char *src) {
    if (dst == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(src) + 1 > length) return NVML_ERROR_INSUFFICIENT_SIZE;
    copy_str(dst, length, src);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetUUID(nvmlDevice_t device, char *uuid, unsigned int length) {
    count_call(C_UUID);
    struct fake_state s; struct fake_gpu *g; int mig;
    nvmlReturn_t r = resolve(device, &s, &g, &mig);
    if (r) return r;
    if (mig < 0) return copy_out(uuid, length, g->uuid);
    char buf[STR_LEN + 16];
    mig_uuid(g, mig, buf, sizeof buf);
    return copy_out(uuid, length, buf);
}

nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    count_call(C_NAME);
    struct fake_state s; struct fake_gpu *g; int mig;
    nvmlReturn_t r = resolve(device, &s, &g, &mig);
    if (r) return r;
    if (mig < 0) return copy_out(name, length, g->name);
    char buf[STR_LEN + 32];
    snprintf(buf, sizeof buf, "%s MIG %dg", g->name, 7 / (g->mig > 0 ? g->mig : 1));
    return copy_out(name, length, buf);
}

nvmlReturn_t nvmlDeviceGetMinorNumber(nvmlDevice_t device, unsigned int *minor) {
    count_call(C_OTHER);
    struct fake_state s; struct fake_gpu *g; int mig;
    nvmlReturn_t r = resolve(device, &s, &g, &mig);
    if (r) return r;
    if (mig >= 0) return NVML_ERROR_NOT_SUPPORTED; /* a MIG device has no /dev/nvidiaN of its own */
    if (minor == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *minor = g->minor >= 0 ? (unsigned)g->minor : (unsigned)device->gpu;
    return NVML_SUCCESS;
}

/* ---- MIG ---- */
nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    count_call(C_MIG);
    struct fake_state s; struct fake_gpu *g; int mig;
    nvmlReturn_t r = resolve(device, &s, &g, &mig);
    if (r) return r;
    if (mig >= 0 || g->mig < 0) return NVML_ERROR_NOT_SUPPORTED;
    if (current == NULL || pending == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *current = *pending = g->mig > 0 ? 1 : 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMaxMigDeviceCount(nvmlDevice_t device, unsigned int *count) {
    count_call(C_MIG);
    struct fake_state s; struct fake_gpu *g; int mig;
    nvmlReturn_t r = resolve(device, &s, &g, &mig);
    if (r) return r;
    if (mig >= 0 || g->mig < 0) return NVML_ERROR_NOT_SUPPORTED;
    if (count == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *count = MAX_MIG;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMigDeviceHandleByIndex(nvmlDevice_t device, unsigned int index,
                                                  nvmlDevice_t *mig_device) {
    count_call(C_MIG);
    struct fake_state s; struct fake_gpu *g; int mig;
    nvmlReturn_t r = resolve(device, &s, &g, &mig);
    if (r) return r;
    if (mig >= 0 || g->mig <= 0) return NVML_ERROR_NOT_SUPPORTED;
    if (mig_device == NULL || index >= MAX_MIG) return NVML_ERROR_INVALID_ARGUMENT;
    if ((int)index >= created(g)) return NVML_ERROR_NOT_FOUND;
    if (g->mig_handle_error) return g->mig_handle_error;
    *mig_device = handle_of(device->gpu, (int)index);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceIsMigDeviceHandle(nvmlDevice_t device, unsigned int *is_mig) {
    count_call(C_MIG);
    struct fake_state s; struct fake_gpu *g; int mig;
    nvmlReturn_t r = resolve(device, &s, &g, &mig);
    if (r) return r;
    if (is_mig == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    *is_mig = mig >= 0;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetDeviceHandleFromMigDeviceHandle(nvmlDevice_t mig_device, nvmlDevice_t *device) {
    count_call(C_MIG);
    struct fake_state s; struct fake_gpu *g; int mig;
    nvmlReturn_t r = resolve(mig_device, &s, &g, &mig);
    if (r) return r;
    if (device == NULL || mig < 0) return NVML_ERROR_INVALID_ARGUMENT;
    *device = handle_of(mig_device->gpu, -1);
    return NVML_SUCCESS;
}

/* ---- readings ---- */
nvmlReturn_t nvmlDeviceGetUtilizationRates(nvmlDevice_t device, nvmlUtilization_t *utilization) {
    count_call(C_UTIL);
    struct fake_state s; struct fake_gpu *g; int mig;
    nvmlReturn_t r = resolve(device, &s, &g, &mig);
    if (r) return r;
    if ((r = held(device, "utilization", &s, &g, &mig))) return r;
    if (g->util_error) return g->util_error;
    if (mig >= 0 || g->mig > 0) return NVML_ERROR_NOT_SUPPORTED;
    if (utilization == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    utilization->gpu = g->util;
    utilization->memory = g->mem_util;
    return NVML_SUCCESS;
}

static void memory_of(const struct fake_gpu *g, int mig, unsigned long long *total, unsigned long long *used) {
    unsigned long long parts = mig >= 0 && g->mig > 0 ? (unsigned long long)g->mig : 1;
    *total = g->mem_total / parts;
    *used = g->mem_used / parts;
    if (*used > *total) *used = *total;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    count_call(C_MEMORY);
    struct fake_state s; struct fake_gpu *g; int mig;
    nvmlReturn_t r = resolve(device, &s, &g, &mig);
    if (r) return r;
    if ((r = held(device, "memory", &s, &g, &mig))) return r;
    if (g->memory_error) return g->memory_error;
    if (memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    memory_of(g, mig, &memory->total, &memory->used);
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceGetMemoryInfo_v2(nvmlDevice_t device, nvmlMemory_v2_t *memory) {
    count_call(C_MEMORY);
    struct fake_state s; struct fake_gpu *g; int mig;
    nvmlReturn_t r = resolve(device, &s, &g, &mig);
    if (r) return r;
    if ((r = held(device, "memory", &s, &g, &mig))) return r;
    if (g->memory_error) return g->memory_error;
    if (memory == NULL) return NVML_ERROR_INVALID_ARGUMENT;
    if (memory->version != 0x02000028) return 25; /* NVML_ERROR_ARGUMENT_VERSION_MISMATCH */
    memory_of(g, mig, &memory->total, &memory->used);
    memory->reserved = 0;
    memory->free = memory->total - memory->used;
    return NVML_SUCCESS;
}

static unsigned long long real_now_us(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (unsigned long long)ts.tv_sec * 1000000ULL + (unsigned long long)ts.tv_nsec / 1000ULL;
}

nvmlReturn_t nvmlDeviceGetSamples(nvmlDevice_t device, int type, unsigned long long last_seen,
                                  int *value_type, unsigned int *count, nvmlSample_t *samples) {
    count_call(C_SAMPLES);
    struct fake_state s; struct fake_gpu *g; int mig;
    nvmlReturn_t r = resolve(device, &s, &g, &mig);
    if (r) return r;
    if ((r = held(device, "samples", &s, &g, &mig))) return r;
    if (g->samples_error) return g->samples_error;
    if (mig >= 0 || g->mig > 0) return NVML_ERROR_NOT_SUPPORTED;
    if (type != NVML_GPU_UTILIZATION_SAMPLES && type != NVML_MEMORY_UTILIZATION_SAMPLES)
        return NVML_ERROR_NOT_SUPPORTED;
    if (value_type == NULL || count == NULL) return NVML_ERROR_INVALID_ARGUMENT;

    unsigned long long period = s.period_us, now = s.now_us ? s.now_us : real_now_us();
    unsigned long long newest = now - now % period;
    unsigned long long span = (unsigned long long)(s.buffer - 1) * period;
    unsigned long long oldest = newest > span ? newest - span : period;
    unsigned long long after = (last_seen / period + 1) * period; /* first grid point > last_seen */
    unsigned long long first = after > oldest ? after : oldest;
    unsigned long long available = first <= newest ? (newest - first) / period + 1 : 0;
    if (available == 0) return NVML_ERROR_NOT_FOUND;

    *value_type = NVML_VALUE_TYPE_UNSIGNED_INT;
    if (samples == NULL) {
        *count = (unsigned)available;
        return NVML_SUCCESS;
    }
    unsigned n = *count < available ? *count : (unsigned)available;
    unsigned value = type == NVML_GPU_UTILIZATION_SAMPLES ? g->util : g->mem_util;
    for (unsigned i = 0; i < n; i++) {
        samples[i].timeStamp = first + (unsigned long long)i * period;
        samples[i].sampleValue.uiVal = value;
    }
    *count = n;
    return NVML_SUCCESS;
}
