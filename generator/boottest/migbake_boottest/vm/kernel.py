"""The cached Debian kernel and the small busybox initramfs the boot tests start the VM with."""

from __future__ import annotations

import hashlib
import shutil
import struct
import time
from dataclasses import dataclass
from pathlib import Path

from migbake_boottest import cache
from migbake_boottest.errors import BootTestError
from migbake_boottest.hostrun import Log, no_log, require_tools, run

META_PACKAGE = "linux-image-amd64"
# Their dependencies are resolved with modprobe: 19 modules for Debian 12's 6.1 kernel. virtio_net: the
# NIC of the boots that an SSH client reaches (qemu.start's ssh_port); initramfs-init gives it its address.
MODULES = ("crc32c_generic", "virtio_pci", "virtio_blk", "virtio_net", "ext4", "isofs", "vfat",
           "nls_cp437", "nls_ascii", "nls_utf8")
BUSYBOX = Path("/bin/busybox")
INIT_SCRIPT = Path(__file__).parents[1] / "guest" / "initramfs-init"


@dataclass(frozen=True)
class KernelAssets:
    """A kernel image and its initramfs, ready for ``qemu -kernel/-initrd``."""

    vmlinuz: Path
    initrd: Path
    package: str


def kernel_package(log: Log = no_log) -> str:
    """The versioned linux-image package ``linux-image-amd64`` points at (needs ``apt-get update``)."""
    out = run(["apt-cache", "depends", META_PACKAGE], log=log, check=False).stdout
    for line in out.splitlines():
        kind, _, name = line.strip().partition(" ")
        if kind == "Depends:" and name.startswith("linux-image-") and name[12:13].isdigit():
            return name
    raise BootTestError(f"apt-cache knows no {META_PACKAGE}: run 'apt-get update' first")


def ensure_kernel(*, cache_root: Path | None = None, force_rebuild: bool = False,
                  log: Log = no_log) -> KernelAssets:
    """Return the cached kernel + initramfs, downloading and building them first (~5 s) if needed."""
    require_tools("apt-cache", "apt-get", "dpkg-deb", "depmod", "modprobe", "cpio")
    package = kernel_package(log)
    recipe = hashlib.sha256(INIT_SCRIPT.read_bytes() + " ".join(MODULES).encode()).hexdigest()[:12]
    final = cache.cache_dir(cache_root) / "kernel" / f"{package}-{recipe}"

    def build(tmp: Path) -> None:
        start = time.monotonic()
        tmp.mkdir(parents=True)
        _build(package, tmp, log)
        log(f"kernel and initramfs built in {time.monotonic() - start:.1f} s")

    path = cache.build_once(final, build, force=force_rebuild)
    return KernelAssets(path / "vmlinuz", path / "initrd.img", package)


def _build(package: str, dest: Path, log: Log) -> None:
    work = dest / "work"
    work.mkdir()
    run(["apt-get", "download", "-o", "APT::Sandbox::User=root", package], log=log, cwd=work, timeout_s=600)
    debs = list(work.glob("*.deb"))
    if len(debs) != 1:
        raise BootTestError(f"apt-get download {package} gave {len(debs)} .deb files")
    tree = work / "x"
    run(["dpkg-deb", "-x", debs[0], tree], log=log)
    versions = [p.name for p in (tree / "lib/modules").iterdir()]
    if len(versions) != 1:
        raise BootTestError(f"{package} holds {len(versions)} module trees: {versions}")
    version = versions[0]
    shutil.copyfile(tree / "boot" / f"vmlinuz-{version}", dest / "vmlinuz")
    run(["depmod", "-b", tree, version], log=log)
    staging = work / "initramfs"
    _stage_initramfs(staging, _module_files(tree, version, log))
    run(["bash", "-o", "pipefail", "-c", "find . -print0 | cpio --null -o -H newc --quiet | gzip -1 >\"$0\"",
         dest / "initrd.img"], log=log, cwd=staging)
    shutil.rmtree(work)


def _module_files(tree: Path, version: str, log: Log) -> list[Path]:
    """The .ko files of MODULES and their dependencies, in load order, without duplicates."""
    ordered: dict[Path, None] = {}
    for module in MODULES:
        out = run(["modprobe", "-d", tree, "-S", version, "--show-depends", module], log=log).stdout
        for line in out.splitlines():
            words = line.split()
            if words[:1] == ["insmod"]:
                ordered.setdefault(Path(words[1]), None)
    return list(ordered)


def _stage_initramfs(staging: Path, modules: list[Path]) -> None:
    if _is_dynamic_elf(BUSYBOX):
        raise BootTestError(f"{BUSYBOX} is dynamically linked: install busybox-static")
    for folder in ("bin", "dev", "proc", "sys", "newroot", "lib/modules"):
        (staging / folder).mkdir(parents=True)
    shutil.copy2(BUSYBOX, staging / "bin" / "busybox")
    for module in modules:
        shutil.copyfile(module, staging / "lib/modules" / module.name)
    (staging / "lib/modules/load-order").write_text("".join(f"{m.name}\n" for m in modules))
    shutil.copyfile(INIT_SCRIPT, staging / "init")
    (staging / "init").chmod(0o755)


def _is_dynamic_elf(path: Path) -> bool:
    """True if the 64-bit ELF file at ``path`` has a PT_INTERP program header (needs ld.so)."""
    data = path.read_bytes()
    if data[:5] != b"\x7fELF\x02":
        raise BootTestError(f"{path} is not a 64-bit ELF file")
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    return any(struct.unpack_from("<I", data, phoff + i * phentsize)[0] == 3 for i in range(phnum))
