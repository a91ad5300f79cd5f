/*
 * simgpu: what the two halves of the fake libnvidia-ml.so.1 (nvml.c, nvml_info.c) share. Test-only.
 */
#ifndef SIMGPU_NVML_INTERNAL_H
#define SIMGPU_NVML_INTERNAL_H

#include "simgpu.h"

#define EXPORT __attribute__((visibility("default")))

struct nvmlDevice_st { unsigned gpu; };

extern struct sim_config cfg;                   /* the node, loaded by nvmlInit_v2 */
extern int refcount;                            /* nvmlInit_v2 calls not yet shut down */
extern struct nvmlDevice_st devices[SIM_MAX_GPUS];
nvmlReturn_t check_device(nvmlDevice_t device); /* UNINITIALIZED, INVALID_ARGUMENT or SUCCESS */

#endif
