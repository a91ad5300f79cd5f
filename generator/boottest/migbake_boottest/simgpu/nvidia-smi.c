/*
 * simgpu: a simulated nvidia-smi for migbake's boot tests ONLY, over the same state as the fake
 * libnvidia-ml.so.1 (state.c). It does what the restore unit, mig-parted and the boot-test report use:
 *   nvidia-smi                 a short status table (exit 0 once the "driver" answers)
 *   nvidia-smi -L              one line per GPU
 *   nvidia-smi -r [-i IDS]     GPU reset: a pending MIG mode change takes effect (mig-parted runs
 *                              `nvidia-smi -r -i BUSID,...` when a change is pending); IDS are
 *                              indices or PCI bus ids, comma separated
 *   nvidia-smi --query-gpu=F,... --format=csv[,noheader] [-i IDS]   e.g. "0, Disabled, Enabled" for
 *                              index,mig.mode.current,mig.mode.pending (what restore.sh asks)
 *   nvidia-smi --simgpu-state  the raw state, one line per GPU (test-only option)
 * Every call is appended to the call log (simgpu.conf "call_log") unless MIG_STUB_REPORT is set.
 * Knobs (README.md): driver-delay makes every call fail with exit 9; in-use and reset-fails make a
 * reset fail; pending-forever keeps a reset from completing a pending MIG mode change.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "simgpu.h"

static struct sim_config cfg;

static void log_call(int argc, char **argv) {
    struct timespec now;
    FILE *f;
    if (cfg.call_log[0] == '\0' || getenv("MIG_STUB_REPORT") != NULL || (f = fopen(cfg.call_log, "a")) == NULL)
        return;
    clock_gettime(CLOCK_REALTIME, &now);
    fprintf(f, "%lld.%09ld nvidia-smi", (long long)now.tv_sec, now.tv_nsec);
    for (int i = 1; i < argc; i++)
        fprintf(f, " %s", argv[i]);
    fputc('\n', f);
    fclose(f);
}

static void uuid(unsigned gpu, char *out, unsigned size) {
    snprintf(out, size, "GPU-5136d0a4-51a7-4b0e-9c1f-%012x", 0x5139u + gpu);
}

static void describe_instances(const struct sim_gpu *gpu, char *out, unsigned size) {
    unsigned n = 0;
    out[0] = '\0';
    for (unsigned s = 0; s < SIM_MAX_GIS; s++)
        for (unsigned c = 0; c < SIM_MAX_CIS && gpu->gi[s].used; c++) {
            char name[48];
            if (!gpu->gi[s].ci[c].used)
                continue;
            sim_profile_name(&cfg, gpu->gi[s].profile, gpu->gi[s].ci[c].profile, name, sizeof name);
            n += (unsigned)snprintf(out + n, n < size ? size - n : 0, "%s%s@%u", n ? "," : "", name,
                                    gpu->gi[s].start);
        }
    if (n == 0)
        snprintf(out, size, "-");
}

/* `nvidia-smi mig -lgi`: the GPU instances in the columns of the real table (GPU, Name, Profile ID,
 * Instance ID, Placement Start:Size; the row form as in NVIDIA/DCGM#138), or the real "no MIG" line. */
static int list_gpu_instances(const struct sim_state *st) {
    int rows = 0;
    for (unsigned g = 0; g < cfg.gpus; g++)
        for (unsigned s = 0; s < SIM_MAX_GIS; s++) {
            const struct sim_gi *gi = &st->gpu[g].gi[s];
            if (!gi->used)
                continue;
            if (rows++ == 0)
                printf("+-------------------------------------------------------+\n"
                       "| GPU instances:                                        |\n"
                       "| GPU   Name             Profile  Instance   Placement  |\n"
                       "|                          ID       ID       Start:Size |\n"
                       "|=======================================================|\n");
            printf("|  %2u  MIG %-14s %4u %8u %10u:%-u     |\n", g, cfg.profile[gi->profile].label,
                   cfg.profile[gi->profile].id, s + 1, gi->start, gi->size);
        }
    if (rows == 0) {
        printf("No MIG-enabled devices found.\n");
        return 6;
    }
    printf("+-------------------------------------------------------+\n");
    return 0;
}

/* A GPU reset: the pending MIG mode becomes current, and every instance is gone. */
static int reset(const char *ids) {
    struct sim_state st;
    int fd = sim_lock(&cfg), failed = 0, chosen[SIM_MAX_GPUS] = {0};
    char copy[1024], *tok, *save = NULL, bus[32];
    sim_load_state(&cfg, &st);
    snprintf(copy, sizeof copy, "%s", ids ? ids : "");
    for (tok = strtok_r(copy, ",", &save); tok != NULL; tok = strtok_r(NULL, ",", &save)) {
        int gpu = strchr(tok, ':') ? sim_find_pci(&cfg, tok) : atoi(tok);
        if (gpu < 0 || (unsigned)gpu >= cfg.gpus) {
            printf("No devices were found matching \"%s\"\n", tok);
            sim_unlock(fd);
            return 6;
        }
        chosen[gpu] = 1;
    }
    for (unsigned g = 0; g < cfg.gpus; g++) {
        if (ids != NULL && !chosen[g])
            continue;
        sim_format_pci(&cfg, g, bus, sizeof bus);
        if (sim_gpu_in_use(&cfg, g)) {
            printf("The following GPUs could not be reset:\n  GPU %s: In use by another client\n", bus);
            failed = 1;
            continue;
        }
        if (sim_knob(&cfg, "reset-fails", NULL, 0)) {  /* as in a passthrough VM */
            printf("The following GPUs could not be reset:\n  GPU %s: Not Supported\n", bus);
            failed = 1;
            continue;
        }
        if (!sim_knob(&cfg, "pending-forever", NULL, 0))
            st.gpu[g].mode = st.gpu[g].pending;
        memset(st.gpu[g].gi, 0, sizeof st.gpu[g].gi);
        printf("GPU %s was successfully reset.\n", bus);
    }
    if (!failed && sim_save_state(&cfg, &st) != 0)
        failed = 1;
    sim_unlock(fd);
    if (!failed)
        printf("All done.\n");
    return failed ? 255 : 0;
}

static const char *mode_name(unsigned mode) {
    return mode ? "Enabled" : "Disabled";
}

/* --query-gpu=FIELD,... --format=csv[,noheader]: one line per GPU, fields joined by ", " (as the real
 * one). Fields: index, name, uuid, pci.bus_id, pci.device_id (0x233510DE on the real H200, with the
 * vendor), mig.mode.current, mig.mode.pending: what migbake's preflight and capture ask. */
static int query(const char *fields, const char *format, const struct sim_state *st, const int *chosen) {
    static const char *known[] = {"index", "name", "uuid", "pci.bus_id", "pci.device_id", "mig.mode.current",
                                   "mig.mode.pending"};
    char copy[512], *tok, *save = NULL, value[128];
    const char *names[16];
    unsigned n = 0;
    if (format == NULL || strncmp(format, "csv", 3) != 0) {
        printf("Please specify the output format with --format=csv\n");
        return 2;
    }
    snprintf(copy, sizeof copy, "%s", fields);
    for (tok = strtok_r(copy, ",", &save); tok != NULL && n < 16; tok = strtok_r(NULL, ",", &save)) {
        unsigned k = 0;
        while (k < sizeof known / sizeof known[0] && strcmp(tok, known[k]) != 0)
            k++;
        if (k == sizeof known / sizeof known[0]) {
            printf("Field \"%s\" is not a valid field to query.\n\n", tok);
            return 2;
        }
        names[n++] = known[k];
    }
    if (strstr(format, "noheader") == NULL)
        for (unsigned i = 0; i < n; i++)
            printf("%s%s", names[i], i + 1 < n ? ", " : "\n");
    for (unsigned g = 0; g < cfg.gpus; g++) {
        if (!chosen[g])
            continue;
        for (unsigned i = 0; i < n; i++) {
            if (!strcmp(names[i], "index")) snprintf(value, sizeof value, "%u", g);
            else if (!strcmp(names[i], "name")) snprintf(value, sizeof value, "%s", cfg.name);
            else if (!strcmp(names[i], "uuid")) uuid(g, value, sizeof value);
            else if (!strcmp(names[i], "pci.bus_id")) sim_format_pci(&cfg, g, value, sizeof value);
            else if (!strcmp(names[i], "pci.device_id"))
                snprintf(value, sizeof value, "0x%04X10DE", cfg.pci[g].device_id);
            else if (!strcmp(names[i], "mig.mode.current")) snprintf(value, sizeof value, "%s", mode_name(st->gpu[g].mode));
            else snprintf(value, sizeof value, "%s", mode_name(st->gpu[g].pending));
            printf("%s%s", value, i + 1 < n ? ", " : "\n");
        }
    }
    return 0;
}

int main(int argc, char **argv) {
    struct sim_state st;
    char bus[32], id[64], instances[1024];
    const char *ids = NULL, *fields = NULL, *format = NULL;
    int do_reset = 0, list = 0, raw = 0, lgi = 0;
    if (sim_load_config(&cfg) != 0)
        return 9;
    log_call(argc, argv);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-r") || !strcmp(argv[i], "--gpu-reset")) do_reset = 1;
        else if (i == 1 && !strcmp(argv[i], "mig") && i + 1 < argc
                 && (!strcmp(argv[i + 1], "-lgi") || !strcmp(argv[i + 1], "--list-gpu-instances"))) lgi = 1, i++;
        else if (!strcmp(argv[i], "-L") || !strcmp(argv[i], "--list-gpus")) list = 1;
        else if (!strcmp(argv[i], "--simgpu-state")) raw = 1;
        else if ((!strcmp(argv[i], "-i") || !strcmp(argv[i], "--id")) && i + 1 < argc) ids = argv[++i];
        else if (!strncmp(argv[i], "--id=", 5)) ids = argv[i] + 5;
        else if (!strncmp(argv[i], "--query-gpu=", 12)) fields = argv[i] + 12;
        else if (!strncmp(argv[i], "--format=", 9)) format = argv[i] + 9;
        else {
            fprintf(stderr, "nvidia-smi (simgpu): unsupported argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (!sim_driver_loaded(&cfg)) {
        printf("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that "
               "the latest NVIDIA driver is installed and running.\n\n");
        return 9;
    }
    if (do_reset)
        return reset(ids);
    int fd = sim_lock(&cfg);
    sim_load_state(&cfg, &st);
    sim_unlock(fd);
    if (lgi)
        return list_gpu_instances(&st);
    if (fields != NULL) {
        int chosen[SIM_MAX_GPUS];
        for (unsigned g = 0; g < SIM_MAX_GPUS; g++)
            chosen[g] = ids == NULL;
        snprintf(instances, sizeof instances, "%s", ids ? ids : "");
        for (char *tok = strtok(instances, ","); tok != NULL; tok = strtok(NULL, ",")) {
            int gpu = strchr(tok, ':') ? sim_find_pci(&cfg, tok) : atoi(tok);
            if (gpu < 0 || (unsigned)gpu >= cfg.gpus) {
                printf("No devices were found matching \"%s\"\n", tok);
                return 6;
            }
            chosen[gpu] = 1;
        }
        return query(fields, format, &st, chosen);
    }
    if (!list && !raw)
        printf("+-- simgpu (simulated for migbake boot tests) -- NVML %s --+\n", cfg.nvml_version);
    for (unsigned g = 0; g < cfg.gpus; g++) {
        sim_format_pci(&cfg, g, bus, sizeof bus);
        uuid(g, id, sizeof id);
        describe_instances(&st.gpu[g], instances, sizeof instances);
        if (raw)
            printf("gpu %u bus %s mig %u pending %u instances %s\n", g, bus, st.gpu[g].mode, st.gpu[g].pending,
                   instances);
        else if (list)
            printf("GPU %u: %s (UUID: %s)\n", g, cfg.name, id);
        else
            printf("| %u  %-28s %s  MIG %s%s | %s\n", g, cfg.name, bus, st.gpu[g].mode ? "Enabled" : "Disabled",
                   st.gpu[g].mode != st.gpu[g].pending ? " (change pending)" : "", instances);
    }
    return 0;
}
