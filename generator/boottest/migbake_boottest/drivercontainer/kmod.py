"""The dummy ``nvidia`` kernel modules the simulated driver container loads, built for the guest's own kernel.

The guest boots Debian's packaged kernel (``vm.kernel``); a module it loads must carry that kernel's
vermagic, so it is built here against the same version's ``linux-headers-*`` packages (downloaded with
apt, unpacked without installing, cached beside the kernel). Debian's kernel does not force module
signatures, so the unsigned module loads (and taints the kernel, as NVIDIA's out-of-tree driver does).
Two modules, ``nvidia`` and ``nvidia_uvm``: what NVIDIA's driver container loads first
(NVIDIA/gpu-driver-container@06a208ca:ubuntu24.04/nvidia-driver ``_load_driver``: modprobe nvidia,
nvidia-uvm, nvidia-modeset), enough for ``/sys/module/nvidia/initstate`` and ``/proc/modules`` to be real.
The guest has no kmod, so ``modctl`` (C, finit_module/delete_module) loads and unloads them.
"""

from __future__ import annotations

import hashlib
import shutil
from dataclasses import dataclass
from pathlib import Path

from migbake_boottest import cache
from migbake_boottest.errors import BootTestError
from migbake_boottest.hostrun import Log, no_log, require_tools, run

MODULES = ("nvidia", "nvidia_uvm")
_SOURCE = """// Test fixture for migbake's boot tests ONLY: a module named {name} that does nothing.
#include <linux/module.h>
MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("migbake boot test: a dummy {name} module (no GPU driver)");
static int __init dummy_init(void) {{ return 0; }}
static void __exit dummy_exit(void) {{ }}
module_init(dummy_init);
module_exit(dummy_exit);
"""
MODCTL = Path(__file__).with_name("modctl.c")


@dataclass(frozen=True)
class DriverModules:
    """The built modules (``nvidia.ko``, ``nvidia_uvm.ko``) and the loader."""

    modules: tuple[Path, ...]
    modctl: Path


def kernel_release(package: str) -> str:
    """``6.1.0-57-amd64`` of the kernel package ``linux-image-6.1.0-57-amd64``."""
    release = package.removeprefix("linux-image-")
    if release == package or not release[:1].isdigit():
        raise BootTestError(f"not a versioned Debian kernel package: {package!r}")
    return release


def build_modules(kernel_package: str, folder: Path, *, log: Log = no_log) -> DriverModules:
    """Build (or find in ``folder``, the kernel's cache) the dummy modules for ``kernel_package``'s kernel,
    and ``modctl``."""
    require_tools("apt-get", "dpkg-deb", "make", "gcc")
    release = kernel_release(kernel_package)
    recipe = hashlib.sha256(_SOURCE.encode() + MODCTL.read_bytes() + " ".join(MODULES).encode()).hexdigest()[:12]
    final = folder / f"dummy-nvidia-{release}-{recipe}"

    def build(tmp: Path) -> None:
        tmp.mkdir(parents=True)
        _build(release, tmp, log)

    path = cache.build_once(final, build)
    return DriverModules(tuple(path / f"{m}.ko" for m in MODULES), path / "modctl")


def _build(release: str, dest: Path, log: Log) -> None:
    work = dest / "work"
    work.mkdir()
    flavour = release.rsplit("-", 1)[0]  # 6.1.0-57: the common headers' name
    packages = [f"linux-headers-{release}", f"linux-headers-{flavour}-common"]
    run(["apt-get", "download", "-o", "APT::Sandbox::User=root", *packages], log=log, cwd=work, timeout_s=600)
    kbuild = [p.name for p in work.glob("*.deb")]
    tree = work / "tree"
    for deb in sorted(work.glob("*.deb")):
        run(["dpkg-deb", "-x", deb, tree], log=log)
    # the headers also need linux-kbuild-MAJOR.MINOR (the scripts their symlinks point at)
    scripts = tree / "usr/src" / f"linux-headers-{release}" / "scripts"
    if not scripts.exists():
        major_minor = ".".join(release.split(".")[:2])
        run(["apt-get", "download", "-o", "APT::Sandbox::User=root", f"linux-kbuild-{major_minor}"], log=log, cwd=work)
        for deb in sorted(work.glob("linux-kbuild-*.deb")):
            run(["dpkg-deb", "-x", deb, tree], log=log)
    headers = tree / "usr/src" / f"linux-headers-{release}"
    if not (headers / "Makefile").is_file():
        raise BootTestError(f"{', '.join(kbuild)} hold no {headers.name}/Makefile")
    # the flavour's Makefile includes the common one by its installed (absolute) path: point it into the tree
    makefile = headers / "Makefile"
    makefile.write_text(makefile.read_text().replace("/usr/src/", f"{tree}/usr/src/"))
    source = work / "src"
    source.mkdir()
    for name in MODULES:
        (source / f"{name}.c").write_text(_SOURCE.format(name=name))
    (source / "Makefile").write_text("obj-m := " + " ".join(f"{m}.o" for m in MODULES) + "\n")
    run(["make", "-C", headers, f"M={source}", "modules"], log=log, timeout_s=600)
    for name in MODULES:
        shutil.copyfile(source / f"{name}.ko", dest / f"{name}.ko")
    run(["gcc", "-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror", "-o", dest / "modctl", MODCTL],
        log=log)
    shutil.rmtree(work)
