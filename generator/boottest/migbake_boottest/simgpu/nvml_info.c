/*
 * simgpu: the read-only device getters of the fake libnvidia-ml.so.1 (test-only; see README.md).
 *
 * What mig-parted v0.15.0's generate-config asks of every GPU (pkg/mig/discovery, go-nvlib
 * VisitDevices/IsMigCapable/VisitMigProfiles): name, PCI info (go-nvml binds nvmlDeviceGetPciInfo to
 * nvmlDeviceGetPciInfo_v3 when the library has it, as the real one does), memory, MIG mode (nvml.c)
 * and the GPU-instance profile info of every profile index. The answers were compared with a real
 * H200 on driver 580.159.04 (tests/fixtures/h200/nvml-probe.txt): the profile info answers with MIG
 * mode off, NOT_SUPPORTED for an index the GPU does not offer.
 */
#include <stdio.h>
#include <string.h>

#include "nvml_internal.h"

EXPORT nvmlReturn_t nvmlDeviceGetName(nvmlDevice_t device, char *name, unsigned int length) {
    nvmlReturn_t ret = check_device(device);
    if (ret != NVML_SUCCESS || name == NULL)
        return ret != NVML_SUCCESS ? ret : NVML_ERROR_INVALID_ARGUMENT;
    if (strlen(cfg.name) + 1 > length)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    strcpy(name, cfg.name);
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetMemoryInfo(nvmlDevice_t device, nvmlMemory_t *memory) {
    nvmlReturn_t ret = check_device(device);
    if (ret != NVML_SUCCESS || memory == NULL)
        return ret != NVML_SUCCESS ? ret : NVML_ERROR_INVALID_ARGUMENT;
    memory->total = (unsigned long long)cfg.memory_mib << 20;
    memory->used = 0;
    memory->free = memory->total;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetGpuInstanceProfileInfo(nvmlDevice_t device, unsigned int profile,
                                                        nvmlGpuInstanceProfileInfo_t *info) {
    nvmlReturn_t ret = check_device(device);
    if (ret != NVML_SUCCESS || info == NULL)
        return ret != NVML_SUCCESS ? ret : NVML_ERROR_INVALID_ARGUMENT;
    if (profile >= NVML_GPU_INSTANCE_PROFILE_COUNT - 1 && !(profile < NVML_GPU_INSTANCE_PROFILE_COUNT
                                                           && cfg.profile[profile].present))
        return NVML_ERROR_INVALID_ARGUMENT;  /* as driver 580 answers for indices it does not know */
    const struct sim_profile *p = &cfg.profile[profile];
    if (!p->present)
        return NVML_ERROR_NOT_SUPPORTED;
    memset(info, 0, sizeof *info);
    info->id = p->id, info->sliceCount = p->slices, info->instanceCount = p->instances;
    info->multiprocessorCount = p->sm, info->copyEngineCount = p->ce, info->decoderCount = p->dec;
    info->encoderCount = p->enc, info->jpegCount = p->jpeg, info->ofaCount = p->ofa;
    info->memorySizeMB = p->memory_mib;
    return NVML_SUCCESS;
}

EXPORT nvmlReturn_t nvmlDeviceGetPciInfo_v3(nvmlDevice_t device, nvmlPciInfo_t *pci) {
    nvmlReturn_t ret = check_device(device);
    if (ret != NVML_SUCCESS || pci == NULL)
        return ret != NVML_SUCCESS ? ret : NVML_ERROR_INVALID_ARGUMENT;
    const struct sim_pci *p = &cfg.pci[device->gpu];
    memset(pci, 0, sizeof *pci);
    pci->domain = p->domain, pci->bus = p->bus, pci->device = p->dev;
    /* the combined ids, device in the high half: the real H200 answers 0x233510DE and 0x18BF10DE */
    pci->pciDeviceId = (p->device_id << 16) | 0x10DEu;
    pci->pciSubSystemId = p->subsystem_id;
    snprintf(pci->busIdLegacy, sizeof pci->busIdLegacy, "%04X:%02X:%02X.%X", p->domain & 0xFFFFu, p->bus, p->dev,
             p->fn);
    snprintf(pci->busId, sizeof pci->busId, "%08X:%02X:%02X.%X", p->domain, p->bus, p->dev, p->fn);
    return NVML_SUCCESS;
}
