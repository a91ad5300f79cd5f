/*
 * simgpu state: reads the node description (simgpu.conf), keeps the MIG state in files, answers the
 * fault knobs. Test-only (migbake boot tests); see README.md.
 *
 * State files: MIG mode ("boot ID" then "mode GPU CURRENT PENDING" lines) and instances ("boot ID",
 * "gi GPU SLOT PROFILE START SIZE CREATOR", "ci GPU GISLOT SLOT PROFILE"). A different boot id means
 * the machine rebooted: a pending mode change took effect and every instance is gone.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "simgpu.h"

#define DEFAULT_CONFIG "/etc/simgpu/simgpu.conf"

static void read_line(const char *path, char *out, unsigned size) {
    FILE *f = fopen(path, "r");
    out[0] = '\0';
    if (f == NULL)
        return;
    if (fgets(out, (int)size, f) == NULL)
        out[0] = '\0';
    fclose(f);
    out[strcspn(out, "\r\n")] = '\0';
}

static void boot_id(char *out, unsigned size) {
    read_line("/proc/sys/kernel/random/boot_id", out, size);
}

static void copy(char *dst, const char *src, unsigned size) {
    snprintf(dst, size, "%s", src);
}

static int parse_config_line(struct sim_config *cfg, char *line) {
    char key[32], rest[512] = "";
    unsigned i, a[12];
    if (sscanf(line, "%31s %511[^\n]", key, rest) < 1 || key[0] == '#')
        return 0;
    if (!strcmp(key, "name")) copy(cfg->name, rest, sizeof cfg->name);
    else if (!strcmp(key, "nvml_version")) copy(cfg->nvml_version, rest, sizeof cfg->nvml_version);
    else if (!strcmp(key, "mode_file")) copy(cfg->mode_file, rest, SIM_PATH);
    else if (!strcmp(key, "instances_file")) copy(cfg->instances_file, rest, SIM_PATH);
    else if (!strcmp(key, "knobs")) copy(cfg->knobs, rest, SIM_PATH);
    else if (!strcmp(key, "call_log")) copy(cfg->call_log, rest, SIM_PATH);
    else if (!strcmp(key, "gpus")) cfg->gpus = (unsigned)atoi(rest);
    else if (!strcmp(key, "memory_mib")) cfg->memory_mib = (unsigned)atoi(rest);
    else if (!strcmp(key, "compute_slices")) cfg->compute_slices = (unsigned)atoi(rest);
    else if (!strcmp(key, "memory_slices")) cfg->memory_slices = (unsigned)atoi(rest);
    else if (!strcmp(key, "max_gpu_instances")) cfg->max_gpu_instances = (unsigned)atoi(rest);
    else if (!strcmp(key, "reset_required")) cfg->reset_required = (unsigned)atoi(rest);
    else if (!strcmp(key, "pci")) {
        struct sim_pci p;
        if (sscanf(rest, "%u %x:%x:%x.%x %x %x", &i, &p.domain, &p.bus, &p.dev, &p.fn, &p.device_id,
                   &p.subsystem_id) != 7 || i >= SIM_MAX_GPUS)
            return -1;
        cfg->pci[i] = p;
    } else if (!strcmp(key, "profile")) {
        if (sscanf(rest, "%u %u %u %u %u %u %u %u %u %u %u %u", &i, &a[0], &a[1], &a[2], &a[3], &a[4],
                   &a[5], &a[6], &a[7], &a[8], &a[9], &a[10]) != 12 || i >= NVML_GPU_INSTANCE_PROFILE_COUNT)
            return -1;
        struct sim_profile *p = &cfg->profile[i];
        p->present = 1;
        p->id = a[0], p->slices = a[1], p->instances = a[2], p->memory_mib = a[3], p->sm = a[4];
        p->ce = a[5], p->dec = a[6], p->enc = a[7], p->jpeg = a[8], p->ofa = a[9], p->media = a[10];
    } else if (!strcmp(key, "placements")) {
        char *tok, *save = NULL;
        if (sscanf(rest, "%u", &i) != 1 || i >= NVML_GPU_INSTANCE_PROFILE_COUNT)
            return -1;
        struct sim_profile *p = &cfg->profile[i];
        strtok_r(rest, " ", &save);
        while ((tok = strtok_r(NULL, " ", &save)) != NULL && p->nplacements < SIM_MAX_PLACEMENTS) {
            if (sscanf(tok, "%u:%u", &p->start[p->nplacements], &p->size[p->nplacements]) != 2)
                return -1;
            p->nplacements++;
        }
    } else if (!strcmp(key, "label")) {
        char label[32];
        if (sscanf(rest, "%u %31s", &i, label) != 2 || i >= NVML_GPU_INSTANCE_PROFILE_COUNT)
            return -1;
        copy(cfg->profile[i].label, label, sizeof cfg->profile[i].label);
    } else if (!strcmp(key, "ci")) {
        if (sscanf(rest, "%u %u %u %u", &i, &a[0], &a[1], &a[2]) != 4 || i >= NVML_GPU_INSTANCE_PROFILE_COUNT
            || a[0] >= NVML_COMPUTE_INSTANCE_PROFILE_COUNT)
            return -1;
        cfg->profile[i].ci_slices[a[0]] = a[1];
        cfg->profile[i].ci_instances[a[0]] = a[2];
    } else
        return -1;
    return 0;
}

int sim_load_config(struct sim_config *cfg) {
    const char *path = getenv("SIMGPU_CONFIG");
    char line[1024];
    unsigned number = 0;
    FILE *f;
    memset(cfg, 0, sizeof *cfg);
    copy(cfg->nvml_version, "13.580.159.04", sizeof cfg->nvml_version);
    if (path == NULL || path[0] == '\0')
        path = DEFAULT_CONFIG;
    if ((f = fopen(path, "r")) == NULL) {
        fprintf(stderr, "simgpu: cannot read %s: %s\n", path, strerror(errno));
        return -1;
    }
    while (fgets(line, sizeof line, f) != NULL) {
        number++;
        line[strcspn(line, "\r\n")] = '\0';
        if (parse_config_line(cfg, line) != 0) {
            fprintf(stderr, "simgpu: %s:%u: cannot parse '%s'\n", path, number, line);
            fclose(f);
            return -1;
        }
    }
    fclose(f);
    if (cfg->gpus > SIM_MAX_GPUS || cfg->mode_file[0] == '\0' || cfg->instances_file[0] == '\0') {
        fprintf(stderr, "simgpu: %s: needs gpus (at most %d), mode_file and instances_file\n", path,
                SIM_MAX_GPUS);
        return -1;
    }
    return 0;
}

static void make_parent(const char *path) {
    char dir[SIM_PATH + 16];
    copy(dir, path, sizeof dir);
    for (char *p = dir + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            mkdir(dir, 0755);
            *p = '/';
        }
    }
}

int sim_lock(const struct sim_config *cfg) {
    char path[SIM_PATH + 8];
    int fd;
    snprintf(path, sizeof path, "%s.lock", cfg->instances_file);
    make_parent(path);
    fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0)
        flock(fd, LOCK_EX);
    return fd;
}

void sim_unlock(int fd) {
    if (fd >= 0)
        close(fd);  /* closing drops the flock */
}

static int alive(long pid) {
    return pid == (long)getpid() || kill((pid_t)pid, 0) == 0 || errno != ESRCH;
}

void sim_load_state(const struct sim_config *cfg, struct sim_state *st) {
    char line[256], boot[64], now[64] = "";
    unsigned g, s, c, a[4];
    long creator;
    int same_boot = 0, volatile_instances = sim_knob(cfg, "volatile-instances", NULL, 0);
    FILE *f;
    memset(st, 0, sizeof *st);
    boot_id(now, sizeof now);
    if ((f = fopen(cfg->mode_file, "r")) != NULL) {
        while (fgets(line, sizeof line, f) != NULL) {
            if (sscanf(line, "boot %63s", boot) == 1)
                same_boot = !strcmp(boot, now);
            else if (sscanf(line, "mode %u %u %u", &g, &a[0], &a[1]) == 3 && g < SIM_MAX_GPUS)
                st->gpu[g].mode = a[0], st->gpu[g].pending = a[1];
        }
        fclose(f);
        /* a reboot resets every GPU (unless the pending-forever knob keeps a change pending) */
        for (g = 0; g < SIM_MAX_GPUS && !same_boot && !sim_knob(cfg, "pending-forever", NULL, 0); g++)
            st->gpu[g].mode = st->gpu[g].pending;
    }
    same_boot = 0;
    if ((f = fopen(cfg->instances_file, "r")) != NULL) {
        while (fgets(line, sizeof line, f) != NULL) {
            if (sscanf(line, "boot %63s", boot) == 1)
                same_boot = !strcmp(boot, now);
            else if (!same_boot)
                continue;
            else if (sscanf(line, "gi %u %u %u %u %u %ld", &g, &s, &a[0], &a[1], &a[2], &creator) == 6
                     && g < SIM_MAX_GPUS && s < SIM_MAX_GIS) {
                struct sim_gi *gi = &st->gpu[g].gi[s];
                gi->used = 1, gi->profile = a[0], gi->start = a[1], gi->size = a[2], gi->creator = creator;
            } else if (sscanf(line, "ci %u %u %u %u", &g, &s, &c, &a[0]) == 4 && g < SIM_MAX_GPUS
                       && s < SIM_MAX_GIS && c < SIM_MAX_CIS)
                st->gpu[g].gi[s].ci[c].used = 1, st->gpu[g].gi[s].ci[c].profile = a[0];
        }
        fclose(f);
    }
    for (g = 0; g < SIM_MAX_GPUS; g++)
        for (s = 0; s < SIM_MAX_GIS; s++) {
            struct sim_gi *gi = &st->gpu[g].gi[s];
            if (gi->used && (st->gpu[g].mode == 0 || (volatile_instances && !alive(gi->creator))))
                memset(gi, 0, sizeof *gi);
        }
}

static int write_atomically(const char *path, const char *text) {
    char tmp[SIM_PATH + 16];
    FILE *f;
    make_parent(path);
    snprintf(tmp, sizeof tmp, "%s.%ld", path, (long)getpid());
    if ((f = fopen(tmp, "w")) == NULL)
        return -1;
    fputs(text, f);
    if (fclose(f) != 0)
        return -1;
    return rename(tmp, path);
}

int sim_save_state(const struct sim_config *cfg, const struct sim_state *st) {
    static char modes[4096], instances[16384];
    char now[64] = "";
    unsigned g, s, c;
    int m = 0, n = 0;
    boot_id(now, sizeof now);
    m += snprintf(modes + m, sizeof modes - (size_t)m, "boot %s\n", now);
    n += snprintf(instances + n, sizeof instances - (size_t)n, "boot %s\n", now);
    for (g = 0; g < cfg->gpus; g++) {
        const struct sim_gpu *gpu = &st->gpu[g];
        m += snprintf(modes + m, sizeof modes - (size_t)m, "mode %u %u %u\n", g, gpu->mode, gpu->pending);
        for (s = 0; s < SIM_MAX_GIS; s++) {
            const struct sim_gi *gi = &gpu->gi[s];
            if (!gi->used)
                continue;
            n += snprintf(instances + n, sizeof instances - (size_t)n, "gi %u %u %u %u %u %ld\n", g, s,
                          gi->profile, gi->start, gi->size, gi->creator);
            for (c = 0; c < SIM_MAX_CIS; c++)
                if (gi->ci[c].used)
                    n += snprintf(instances + n, sizeof instances - (size_t)n, "ci %u %u %u %u\n", g, s, c,
                                  gi->ci[c].profile);
        }
    }
    return write_atomically(cfg->mode_file, modes) | write_atomically(cfg->instances_file, instances);
}

int sim_knob(const struct sim_config *cfg, const char *name, char *value, unsigned size) {
    char path[SIM_PATH + 64], buf[256];
    if (cfg->knobs[0] == '\0')
        return 0;
    snprintf(path, sizeof path, "%s/%s", cfg->knobs, name);
    if (access(path, F_OK) != 0)
        return 0;
    read_line(path, buf, sizeof buf);
    if (value != NULL)
        copy(value, buf, size);
    return 1;
}

int sim_gpu_in_use(const struct sim_config *cfg, unsigned gpu) {
    char value[256], *tok, *save = NULL;
    int any = 0;
    if (!sim_knob(cfg, "in-use", value, sizeof value))
        return 0;
    for (tok = strtok_r(value, " ,\t", &save); tok != NULL; tok = strtok_r(NULL, " ,\t", &save)) {
        any = 1;
        if ((unsigned)atoi(tok) == gpu)
            return 1;
    }
    return !any;  /* an empty knob holds every GPU */
}

int sim_driver_loaded(const struct sim_config *cfg) {
    char value[64], uptime[64];
    if (!sim_knob(cfg, "driver-delay", value, sizeof value))
        return 1;
    if (!strcmp(value, "never") || value[0] == '\0')
        return 0;
    read_line("/proc/uptime", uptime, sizeof uptime);
    return atof(uptime) >= atof(value);
}

int sim_reset_required(const struct sim_config *cfg) {
    return cfg->reset_required || sim_knob(cfg, "pending-until-reset", NULL, 0);
}

int sim_find_pci(const struct sim_config *cfg, const char *bus_id) {
    unsigned domain, bus, dev, fn, g;
    if (sscanf(bus_id, "%x:%x:%x.%x", &domain, &bus, &dev, &fn) != 4)
        return -1;
    for (g = 0; g < cfg->gpus; g++) {
        const struct sim_pci *p = &cfg->pci[g];
        if (p->domain == domain && p->bus == bus && p->dev == dev && p->fn == fn)
            return (int)g;
    }
    return -1;
}

void sim_format_pci(const struct sim_config *cfg, unsigned gpu, char *out, unsigned size) {
    const struct sim_pci *p = &cfg->pci[gpu];
    snprintf(out, size, "%08X:%02X:%02X.%X", p->domain, p->bus, p->dev, p->fn);
}

/* The catalog's name of a GPU-instance profile, with "Cc." in front for a smaller compute instance. */
void sim_profile_name(const struct sim_config *cfg, unsigned profile, unsigned ci_profile, char *out,
                      unsigned size) {
    const struct sim_profile *p = &cfg->profile[profile];
    unsigned c = p->ci_slices[ci_profile];
    if (c != 0 && c != p->slices)
        snprintf(out, size, "%uc.%s", c, p->label);
    else
        snprintf(out, size, "%s", p->label);
}
