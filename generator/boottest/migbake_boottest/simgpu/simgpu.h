/*
 * simgpu: a simulated NVIDIA GPU for migbake's boot tests ONLY (never shipped to a node).
 *
 * Shared declarations of the fake libnvidia-ml.so.1 (nvml.c) and the simulated nvidia-smi
 * (nvidia-smi.c): the node description migbake generates from its catalog (simgpu.conf), the
 * MIG state kept in files, and the fault knobs. See README.md beside this file.
 *
 * The NVML types below are our own declarations of the few we use, written to match the layouts
 * of NVIDIA's public nvml.h (NVIDIA/go-nvml gen/nvml/nvml.h) that the Go bindings were built from.
 */
#ifndef SIMGPU_H
#define SIMGPU_H

/* --- NVML types and constants (layouts as in nvml.h) ----------------------------------------- */
typedef int nvmlReturn_t;
enum {
    NVML_SUCCESS = 0, NVML_ERROR_UNINITIALIZED = 1, NVML_ERROR_INVALID_ARGUMENT = 2,
    NVML_ERROR_NOT_SUPPORTED = 3, NVML_ERROR_NOT_FOUND = 6, NVML_ERROR_INSUFFICIENT_SIZE = 7,
    NVML_ERROR_DRIVER_NOT_LOADED = 9, NVML_ERROR_RESET_REQUIRED = 16, NVML_ERROR_IN_USE = 19,
    NVML_ERROR_INSUFFICIENT_RESOURCES = 23, NVML_ERROR_INVALID_STATE = 29, NVML_ERROR_UNKNOWN = 999,
};
#define NVML_GPU_INSTANCE_PROFILE_COUNT 18   /* go-nvml GPU_INSTANCE_PROFILE_COUNT */
#define NVML_COMPUTE_INSTANCE_PROFILE_COUNT 9
#define NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE 80
#define NVML_DEVICE_NAME_V2_BUFFER_SIZE 96

typedef struct nvmlDevice_st *nvmlDevice_t;
typedef struct nvmlGpuInstance_st *nvmlGpuInstance_t;
typedef struct nvmlComputeInstance_st *nvmlComputeInstance_t;

typedef struct {
    unsigned long long total, free, used;  /* bytes */
} nvmlMemory_t;

#define NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE 32
#define NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE 16
typedef struct {
    char busIdLegacy[NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE];  /* "%04X:%02X:%02X.0" */
    unsigned int domain, bus, device, pciDeviceId, pciSubSystemId;
    char busId[NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE];           /* "%08X:%02X:%02X.0" */
} nvmlPciInfo_t;

typedef struct {
    unsigned int id, isP2pSupported, sliceCount, instanceCount, multiprocessorCount, copyEngineCount,
        decoderCount, encoderCount, jpegCount, ofaCount;
    unsigned long long memorySizeMB;
} nvmlGpuInstanceProfileInfo_t;

typedef struct {
    unsigned int id, sliceCount, instanceCount, multiprocessorCount, sharedCopyEngineCount,
        sharedDecoderCount, sharedEncoderCount, sharedJpegCount, sharedOfaCount;
} nvmlComputeInstanceProfileInfo_t;

/* --- the simulated node ---------------------------------------------------------------------- */
#define SIM_MAX_GPUS 16
#define SIM_MAX_PLACEMENTS 8
#define SIM_MAX_GIS 8        /* GPU instances per GPU */
#define SIM_MAX_CIS 8        /* compute instances per GPU instance */
#define SIM_PATH 256

struct sim_profile {         /* one GPU-instance profile, indexed by its NVML profile constant */
    int present;
    char label[32];          /* the catalog's name, e.g. 1g.18gb (nvidia-smi shows it) */
    unsigned id, slices, instances, memory_mib, sm, ce, dec, enc, jpeg, ofa, media;
    unsigned nplacements, start[SIM_MAX_PLACEMENTS], size[SIM_MAX_PLACEMENTS];
    unsigned ci_instances[NVML_COMPUTE_INSTANCE_PROFILE_COUNT]; /* 0: CI profile not supported */
    unsigned ci_slices[NVML_COMPUTE_INSTANCE_PROFILE_COUNT];
};

struct sim_pci {
    unsigned domain, bus, dev, fn, device_id, subsystem_id;
};

struct sim_config {
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE], nvml_version[NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE];
    unsigned gpus, memory_mib, compute_slices, memory_slices, max_gpu_instances, reset_required;
    char mode_file[SIM_PATH], instances_file[SIM_PATH], knobs[SIM_PATH], call_log[SIM_PATH];
    struct sim_pci pci[SIM_MAX_GPUS];
    struct sim_profile profile[NVML_GPU_INSTANCE_PROFILE_COUNT];
};

struct sim_ci { int used; unsigned profile; };
struct sim_gi {
    int used;
    unsigned profile, start, size;
    long creator;            /* pid of the process that created it (the volatile-instances knob) */
    struct sim_ci ci[SIM_MAX_CIS];
};
struct sim_gpu { unsigned mode, pending; struct sim_gi gi[SIM_MAX_GIS]; };
struct sim_state { struct sim_gpu gpu[SIM_MAX_GPUS]; };

/* state.c */
int sim_load_config(struct sim_config *cfg);               /* 0 ok, -1 (message on stderr) */
int sim_lock(const struct sim_config *cfg);                /* fd to pass to sim_unlock */
void sim_unlock(int fd);
void sim_load_state(const struct sim_config *cfg, struct sim_state *st);
int sim_save_state(const struct sim_config *cfg, const struct sim_state *st);
int sim_knob(const struct sim_config *cfg, const char *name, char *value, unsigned size);
int sim_gpu_in_use(const struct sim_config *cfg, unsigned gpu);
int sim_driver_loaded(const struct sim_config *cfg);
int sim_reset_required(const struct sim_config *cfg);
int sim_find_pci(const struct sim_config *cfg, const char *bus_id);
void sim_format_pci(const struct sim_config *cfg, unsigned gpu, char *out, unsigned size);
void sim_profile_name(const struct sim_config *cfg, unsigned profile, unsigned ci_profile, char *out,
                      unsigned size);

#endif
