/*
 * simgpu: a fake libnvidia-ml.so.1 for migbake's boot tests ONLY, so that NVIDIA's real, unmodified
 * nvidia-mig-parted (v0.15.0) runs apply / assert / export against simulated GPUs. Never install it
 * on a machine with a real GPU.
 *
 * It implements the NVML calls mig-parted makes on those paths and on generate-config's discovery
 * (read from mig-parted v0.15.0, go-nvml and go-nvlib sources): init/shutdown, version, device count
 * and handles, MIG mode, GPU instances, compute-instance profiles and instances, and nvmlErrorString;
 * nvml_info.c has the read-only device getters (name, PCI info, memory, GPU-instance profile info). Every call reloads the state from its files under a lock, so mig-parted, the
 * simulated nvidia-smi and later processes see one GPU. The node itself (model, profile table,
 * placements) comes from simgpu.conf, which migbake generates from its catalog. See README.md.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "nvml_internal.h"

struct nvmlGpuInstance_st { unsigned gpu, slot; };
struct nvmlComputeInstance_st { unsigned gpu, gi, slot; };

struct sim_config cfg;
int refcount;
struct nvmlDevice_st devices[SIM_MAX_GPUS];
static struct nvmlGpuInstance_st gis[SIM_MAX_GPUS][SIM_MAX_GIS];
static struct nvmlComputeInstance_st cis[SIM_MAX_GPUS][SIM_MAX_GIS][SIM_MAX_CIS];

/* Every state access: lock, load, (change, save), unlock. */
struct session { int fd; struct sim_state st; };
static void open_session(struct session *s) { s->fd = sim_lock(&cfg); sim_load_state(&cfg, &s->st); }
static nvmlReturn_t close_session(struct session *s, int save, nvmlReturn_t ret) {
    if (save && ret == NVML_SUCCESS && sim_save_state(&cfg, &s->st) != 0)
        ret = NVML_ERROR_UNKNOWN;
    sim_unlock(s->fd);
    return ret;
}

nvmlReturn_t check_device(nvmlDevice_t device) {
    if (refcount == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || device < devices || device >= devices + cfg.gpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    return NVML_SUCCESS;
}

/* The GPU instance behind a handle, if it still exists in the loaded state. */
static struct sim_gi *lookup_gi(struct session *s, nvmlGpuInstance_t handle) {
    if (refcount == 0 || handle == NULL || handle < &gis[0][0] || handle > &gis[SIM_MAX_GPUS - 1][SIM_MAX_GIS - 1]
        || handle->gpu >= cfg.gpus)
        return NULL;
    struct sim_gi *gi = &s->st.gpu[handle->gpu].gi[handle->slot];
    return gi->used ? gi : NULL;
}

static const struct sim_profile *profile_by_id(unsigned id, unsigned *index) {
    for (unsigned i = 0; i < NVML_GPU_INSTANCE_PROFILE_COUNT; i++)
        if (cfg.profile[i].present && cfg.profile[i].id == id) {
            *index = i;
            return &cfg.profile[i];
        }
    return NULL;
}

EXPORT const char *nvmlErrorString(nvmlReturn_t result) {
    switch (result) {
    case NVML_SUCCESS: return "Success";
    case NVML_ERROR_UNINITIALIZED: return "Uninitialized";
    case NVML_ERROR_INVALID_ARGUMENT: return "Invalid Argument";
    case NVML_ERROR_NOT_SUPPORTED: return "Not Supported";
    case NVML_ERROR_NOT_FOUND: return "Not Found";
    case NVML_ERROR_INSUFFICIENT_SIZE: return "Insufficient Size";
    case NVML_ERROR_DRIVER_NOT_LOADED: return "Driver Not Loaded";
    case NVML_ERROR_RESET_REQUIRED: return "GPU requires restart";
    case NVML_ERROR_IN_USE: return "In use by another client";
    case NVML_ERROR_INSUFFICIENT_RESOURCES: return "Insufficient resources";
    case NVML_ERROR_INVALID_STATE: return "Invalid state";
    default: return "Unknown Error";
    }
}

EXPORT nvmlReturn_t nvmlInit_v2(void) {
    if (refcount == 0) {
        if (sim_load_config(&cfg) != 0)
            return NVML_ERROR_DRIVER_NOT_LOADED;
        for (unsigned g = 0; g < SIM_MAX_GPUS; g++) {
            devices[g].gpu = g;
            for (unsigned s = 0; s < SIM_MAX_GIS; s++) {
                gis[g][s] = (struct nvmlGpuInstance_st){g, s};
                for (unsigned c = 0; c < SIM_MAX_CIS; c++)
                    cis[g][s][c] = (struct nvmlComputeInstance_st){g, s, c};
            }
        }
    }
    if (!sim_driver_loaded(&cfg))  /* the driver-delay knob */
        return NVML_ERROR_DRIVER_NOT_LOADED;
    refcount++;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlInit(void) { return nvmlInit_v2(); }

EXPORT nvmlReturn_t nvmlShutdown(void) {
    if (refcount == 0)
        return NVML_ERROR_UNINITIALIZED;
    refcount--;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlSystemGetNVMLVersion(char *version, unsigned int length) {
    if (version == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(cfg.nvml_version) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(version, cfg.nvml_version);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetCount_v2(unsigned int *count) {
    if (refcount == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (count == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    *count = cfg.gpus;
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetCount(unsigned int *count) { return nvmlDeviceGetCount_v2(count); }

EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device) {
    if (refcount == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (device == NULL || index >= cfg.gpus)
        return NVML_ERROR_INVALID_ARGUMENT;
    *device = &devices[index];
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByIndex(unsigned int index, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByIndex_v2(index, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId_v2(const char *pciBusId, nvmlDevice_t *device) {
    if (refcount == 0)
        return NVML_ERROR_UNINITIALIZED;
    if (pciBusId == NULL || device == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    int gpu = sim_find_pci(&cfg, pciBusId);
    if (gpu < 0)
        return NVML_ERROR_NOT_FOUND;
    *device = &devices[gpu];
    return NVML_SUCCESS;
}
EXPORT nvmlReturn_t nvmlDeviceGetHandleByPciBusId(const char *pciBusId, nvmlDevice_t *device) {
    return nvmlDeviceGetHandleByPciBusId_v2(pciBusId, device);
}

EXPORT nvmlReturn_t nvmlDeviceGetMigMode(nvmlDevice_t device, unsigned int *current, unsigned int *pending) {
    struct session s;
    nvmlReturn_t ret = check_device(device);
    if (ret != NVML_SUCCESS || current == NULL || pending == NULL)
        return ret != NVML_SUCCESS ? ret : NVML_ERROR_INVALID_ARGUMENT;
    open_session(&s);
    *current = s.st.gpu[device->gpu].mode;
    *pending = s.st.gpu[device->gpu].pending;
    return close_session(&s, 0, NVML_SUCCESS);
}

/* A held GPU refuses the change (IN_USE); otherwise the change is immediate, or pending until a
 * GPU reset (nvidia-smi -r) or a reboot where the GPU needs one (Ampere; the pending-until-reset knob). */
EXPORT nvmlReturn_t nvmlDeviceSetMigMode(nvmlDevice_t device, unsigned int mode, nvmlReturn_t *activationStatus) {
    struct session s;
    nvmlReturn_t ret = check_device(device);
    if (ret != NVML_SUCCESS || mode > 1 || activationStatus == NULL)
        return ret != NVML_SUCCESS ? ret : NVML_ERROR_INVALID_ARGUMENT;
    open_session(&s);
    struct sim_gpu *gpu = &s.st.gpu[device->gpu];
    *activationStatus = NVML_SUCCESS;
    if (sim_gpu_in_use(&cfg, device->gpu))
        ret = *activationStatus = NVML_ERROR_IN_USE;
    for (unsigned i = 0; i < SIM_MAX_GIS && ret == NVML_SUCCESS && mode != gpu->mode; i++)
        if (gpu->gi[i].used)  /* instances must be destroyed before MIG mode changes */
            ret = *activationStatus = NVML_ERROR_IN_USE;
    if (ret == NVML_SUCCESS) {
        gpu->pending = mode;
        if (sim_reset_required(&cfg) && gpu->mode != mode)
            *activationStatus = NVML_ERROR_RESET_REQUIRED;
        else
            gpu->mode = mode;
    }
    return close_session(&s, 1, ret);
}

/* How many placements of every profile, still free beside `used`, the placement `mask` would rule out. */
static unsigned blocked_by(unsigned used, unsigned mask) {
    unsigned n = 0;
    for (unsigned q = 0; q < NVML_GPU_INSTANCE_PROFILE_COUNT; q++) {
        const struct sim_profile *o = &cfg.profile[q];
        for (unsigned j = 0; o->present && j < o->nplacements; j++) {
            unsigned other = ((1u << o->size[j]) - 1u) << o->start[j];
            n += (used & other) == 0 && (mask & other) != 0;
        }
    }
    return n;
}

/* Whether a new instance of profile `index` fits; the index of its placement goes to *start. The placement
 * is migbake's model of the driver's choice (gpu/driverplacement.py; NVML documents none): the free one
 * that rules out the fewest placements still free, the lowest start among equals (checked against the
 * public evidence in tests/fixtures/placements/, e.g. NVIDIA/DCGM#138: A100 80GB 3g, 2g, 1g, 1g created
 * without placement -> 4:4, 0:2, 2:1, 3:1). */
static nvmlReturn_t find_room(const struct sim_gpu *gpu, unsigned index, unsigned *start) {
    const struct sim_profile *p = &cfg.profile[index];
    unsigned used_memory = 0, compute = 0, count = 0, total = 0, media = 0;
    for (unsigned i = 0; i < SIM_MAX_GIS; i++) {
        const struct sim_gi *gi = &gpu->gi[i];
        if (!gi->used)
            continue;
        total++;
        count += gi->profile == index;
        compute += cfg.profile[gi->profile].slices;
        media += cfg.profile[gi->profile].media;
        for (unsigned m = gi->start; m < gi->start + gi->size && m < 32; m++)
            used_memory |= 1u << m;
    }
    if (total >= cfg.max_gpu_instances || count >= p->instances || compute + p->slices > cfg.compute_slices
        || (p->media && media > 0))
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    unsigned best = 0, best_blocked = 0;
    for (unsigned k = 0; k < p->nplacements; k++) {
        unsigned mask = ((1u << p->size[k]) - 1u) << p->start[k], blocked;
        if ((used_memory & mask) != 0)
            continue;
        blocked = blocked_by(used_memory, mask);
        if (best == 0 || blocked < best_blocked || (blocked == best_blocked && p->start[k] < p->start[best - 1]))
            best = k + 1, best_blocked = blocked;
    }
    if (best == 0)
        return NVML_ERROR_INSUFFICIENT_RESOURCES;
    *start = best - 1;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceCreateGpuInstance(nvmlDevice_t device, unsigned int profileId,
                                                nvmlGpuInstance_t *gpuInstance) {
    struct session s;
    unsigned index, k = 0, slot;
    nvmlReturn_t ret = check_device(device);
    if (ret != NVML_SUCCESS || gpuInstance == NULL)
        return ret != NVML_SUCCESS ? ret : NVML_ERROR_INVALID_ARGUMENT;
    const struct sim_profile *p = profile_by_id(profileId, &index);
    if (p == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    open_session(&s);
    struct sim_gpu *gpu = &s.st.gpu[device->gpu];
    if (gpu->mode != 1)
        ret = NVML_ERROR_INVALID_STATE;
    else if (sim_gpu_in_use(&cfg, device->gpu))
        ret = NVML_ERROR_IN_USE;
    else
        ret = find_room(gpu, index, &k);
    for (slot = 0; ret == NVML_SUCCESS && slot < SIM_MAX_GIS && gpu->gi[slot].used; slot++) {}
    if (ret == NVML_SUCCESS && slot == SIM_MAX_GIS)
        ret = NVML_ERROR_INSUFFICIENT_RESOURCES;
    if (ret == NVML_SUCCESS) {
        struct sim_gi *gi = &gpu->gi[slot];
        memset(gi, 0, sizeof *gi);
        gi->used = 1, gi->profile = index, gi->start = p->start[k], gi->size = p->size[k];
        gi->creator = (long)getpid();
        *gpuInstance = &gis[device->gpu][slot];
    }
    return close_session(&s, 1, ret);
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstances(nvmlDevice_t device, unsigned int profileId,
                                              nvmlGpuInstance_t *gpuInstances, unsigned int *count) {
    struct session s;
    unsigned index, n = 0;
    nvmlReturn_t ret = check_device(device);
    if (ret != NVML_SUCCESS || count == NULL)
        return ret != NVML_SUCCESS ? ret : NVML_ERROR_INVALID_ARGUMENT;
    if (profile_by_id(profileId, &index) == NULL)
        return NVML_ERROR_INVALID_ARGUMENT;
    open_session(&s);
    for (unsigned slot = 0; slot < SIM_MAX_GIS; slot++) {
        if (!s.st.gpu[device->gpu].gi[slot].used || s.st.gpu[device->gpu].gi[slot].profile != index)
            continue;
        if (n >= *count || gpuInstances == NULL) {
            ret = NVML_ERROR_INSUFFICIENT_SIZE;
            break;
        }
        gpuInstances[n++] = &gis[device->gpu][slot];
    }
    *count = n;
    return close_session(&s, 0, ret);
}

EXPORT nvmlReturn_t nvmlGpuInstanceDestroy(nvmlGpuInstance_t gpuInstance) {
    struct session s;
    nvmlReturn_t ret = NVML_SUCCESS;
    open_session(&s);
    struct sim_gi *gi = lookup_gi(&s, gpuInstance);
    if (gi == NULL)
        ret = refcount == 0 ? NVML_ERROR_UNINITIALIZED : NVML_ERROR_INVALID_ARGUMENT;
    else if (sim_gpu_in_use(&cfg, gpuInstance->gpu))
        ret = NVML_ERROR_IN_USE;
    for (unsigned c = 0; ret == NVML_SUCCESS && c < SIM_MAX_CIS; c++)
        if (gi->ci[c].used)  /* compute instances first */
            ret = NVML_ERROR_IN_USE;
    if (ret == NVML_SUCCESS)
        memset(gi, 0, sizeof *gi);
    return close_session(&s, 1, ret);
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstanceProfileInfo(nvmlGpuInstance_t gpuInstance, unsigned int profile,
                                                                 unsigned int engProfile,
                                                                 nvmlComputeInstanceProfileInfo_t *info) {
    struct session s;
    nvmlReturn_t ret = NVML_SUCCESS;
    open_session(&s);
    struct sim_gi *gi = lookup_gi(&s, gpuInstance);
    if (gi == NULL || info == NULL || profile >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT || engProfile != 0)
        ret = refcount == 0 ? NVML_ERROR_UNINITIALIZED : NVML_ERROR_INVALID_ARGUMENT;
    else if (cfg.profile[gi->profile].ci_instances[profile] == 0)
        ret = NVML_ERROR_NOT_SUPPORTED;
    else {
        const struct sim_profile *p = &cfg.profile[gi->profile];
        unsigned c = p->ci_slices[profile];
        memset(info, 0, sizeof *info);
        info->id = profile, info->sliceCount = c, info->instanceCount = p->ci_instances[profile];
        info->multiprocessorCount = p->sm * c / p->slices;
        info->sharedCopyEngineCount = p->ce, info->sharedDecoderCount = p->dec;
        info->sharedEncoderCount = p->enc, info->sharedJpegCount = p->jpeg, info->sharedOfaCount = p->ofa;
    }
    return close_session(&s, 0, ret);
}

EXPORT nvmlReturn_t nvmlGpuInstanceCreateComputeInstance(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                         nvmlComputeInstance_t *computeInstance) {
    struct session s;
    nvmlReturn_t ret = NVML_SUCCESS;
    unsigned used = 0, same = 0, slot = SIM_MAX_CIS;
    open_session(&s);
    struct sim_gi *gi = lookup_gi(&s, gpuInstance);
    if (gi == NULL || computeInstance == NULL || profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
        ret = refcount == 0 ? NVML_ERROR_UNINITIALIZED : NVML_ERROR_INVALID_ARGUMENT;
    else if (cfg.profile[gi->profile].ci_instances[profileId] == 0)
        ret = NVML_ERROR_NOT_SUPPORTED;
    else if (sim_gpu_in_use(&cfg, gpuInstance->gpu))
        ret = NVML_ERROR_IN_USE;
    if (ret == NVML_SUCCESS) {
        const struct sim_profile *p = &cfg.profile[gi->profile];
        for (unsigned c = SIM_MAX_CIS; c-- > 0;) {
            if (!gi->ci[c].used) {
                slot = c;
                continue;
            }
            used += p->ci_slices[gi->ci[c].profile];
            same += gi->ci[c].profile == profileId;
        }
        /* a full GPU instance refuses: mig-parted then moves on to a new GPU instance */
        if (slot == SIM_MAX_CIS || used + p->ci_slices[profileId] > p->slices || same >= p->ci_instances[profileId])
            ret = NVML_ERROR_INSUFFICIENT_RESOURCES;
    }
    if (ret == NVML_SUCCESS) {
        gi->ci[slot].used = 1, gi->ci[slot].profile = profileId;
        *computeInstance = &cis[gpuInstance->gpu][gpuInstance->slot][slot];
    }
    return close_session(&s, 1, ret);
}

EXPORT nvmlReturn_t nvmlGpuInstanceGetComputeInstances(nvmlGpuInstance_t gpuInstance, unsigned int profileId,
                                                       nvmlComputeInstance_t *computeInstances, unsigned int *count) {
    struct session s;
    nvmlReturn_t ret = NVML_SUCCESS;
    unsigned n = 0;
    open_session(&s);
    struct sim_gi *gi = lookup_gi(&s, gpuInstance);
    if (gi == NULL || count == NULL || profileId >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
        ret = refcount == 0 ? NVML_ERROR_UNINITIALIZED : NVML_ERROR_INVALID_ARGUMENT;
    for (unsigned c = 0; ret == NVML_SUCCESS && c < SIM_MAX_CIS; c++) {
        if (!gi->ci[c].used || gi->ci[c].profile != profileId)
            continue;
        if (n >= *count || computeInstances == NULL)
            ret = NVML_ERROR_INSUFFICIENT_SIZE;
        else
            computeInstances[n++] = &cis[gpuInstance->gpu][gpuInstance->slot][c];
    }
    if (count != NULL)
        *count = n;
    return close_session(&s, 0, ret);
}

EXPORT nvmlReturn_t nvmlComputeInstanceDestroy(nvmlComputeInstance_t computeInstance) {
    struct session s;
    nvmlReturn_t ret = NVML_ERROR_INVALID_ARGUMENT;
    open_session(&s);
    if (refcount == 0)
        ret = NVML_ERROR_UNINITIALIZED;
    else if (computeInstance != NULL && computeInstance >= &cis[0][0][0]
             && computeInstance <= &cis[SIM_MAX_GPUS - 1][SIM_MAX_GIS - 1][SIM_MAX_CIS - 1]) {
        struct sim_gi *gi = lookup_gi(&s, &gis[computeInstance->gpu][computeInstance->gi]);
        if (gi != NULL && gi->ci[computeInstance->slot].used) {
            ret = sim_gpu_in_use(&cfg, computeInstance->gpu) ? NVML_ERROR_IN_USE : NVML_SUCCESS;
            if (ret == NVML_SUCCESS)
                gi->ci[computeInstance->slot].used = 0;
        }
    }
    return close_session(&s, 1, ret);
}
