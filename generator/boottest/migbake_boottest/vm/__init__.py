"""The boot test's machine: the cached Debian rootfs (``rootfs``) and kernel + initramfs (``kernel``), disk
images without mounting (``image``), QEMU (``qemu``) and a real ``packer build`` into a rootfs (``packer_chroot``).

Test-only machinery. May import this package's own errors/hostrun/cache and migbake's library.
"""
