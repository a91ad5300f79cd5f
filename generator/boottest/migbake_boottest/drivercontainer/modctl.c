/*
 * modctl: load or unload a kernel module by file, for migbake's boot tests ONLY. The guest image has no
 * kmod (no insmod/rmmod); the simulated driver container loads the dummy "nvidia" modules with it.
 *   modctl load FILE...    finit_module(2) each file
 *   modctl unload NAME...  delete_module(2) each name
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char **argv) {
    int i;
    if (argc < 3 || (strcmp(argv[1], "load") && strcmp(argv[1], "unload"))) {
        fprintf(stderr, "usage: modctl load FILE... | modctl unload NAME...\n");
        return 2;
    }
    for (i = 2; i < argc; i++) {
        long rc;
        if (!strcmp(argv[1], "load")) {
            int fd = open(argv[i], O_RDONLY | O_CLOEXEC);
            if (fd < 0) {
                perror(argv[i]);
                return 1;
            }
            rc = syscall(SYS_finit_module, fd, "", 0);
            close(fd);
        } else {
            rc = syscall(SYS_delete_module, argv[i], O_NONBLOCK);
        }
        if (rc != 0) {
            perror(argv[i]);
            return 1;
        }
    }
    return 0;
}
