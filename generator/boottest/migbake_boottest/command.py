"""``migbake boot-test``: boot a profile's artifacts in a throwaway VM and check every claim of the boot order.

migbake finds this command through the entry point this distribution declares (group ``migbake.commands``).
"""

from __future__ import annotations

import json
from pathlib import Path

import click

from migbake.commands.common import PROFILE_PATH, valid_profile
from migbake.exits import EXIT_INVALID
from migbake.problems import UsageError
from migbake_boottest import session
from migbake_boottest.scenarios.kubelet import PACKAGES, KubeletPackage
from migbake_boottest.scenarios.layouts import SOURCES
from migbake_boottest.session import SCENARIO_CHOICES


@click.command("boot-test")
@click.argument("profile", type=PROFILE_PATH)
@click.option("--path", "paths", type=click.Choice(["packer", "cloud-init", "both"]), default="both",
              show_default=True, help="Deliver the artifacts with a real Packer build, a NoCloud seed, or both.")
@click.option("--scenario", type=click.Choice(SCENARIO_CHOICES), default="all", show_default=True,
              help="ok, a failing apply/assert, provided-later-missing (a profile whose image.provided_later "
                   "lists nvidia-mig-parted, baked into an image without it), no-gpu (by name only: a boot "
                   "with no NVIDIA GPU on the PCI bus starts kubelet and the restore says why, then a boot with "
                   "a GPU and no driver keeps kubelet down), layout-unknown and layout-missing (by name only, "
                   "named layouts: a name the image does not have, given with --layout-source/--layout, or no "
                   "name and no default: kubelet stays down), or a neighbour of the node "
                   "(driver-late, driver-too-late, gpu-client, manager-reenabled, cdi; ampere-pending[-stuck] "
                   "on Ampere profiles: with --mig-parted only). A driver: container profile, by name only, "
                   "Packer path, with --mig-parted: driver-container (two boots, different driver delays: the "
                   "gated plugin sees the layout, an ungated one the bare GPU; the second boot restarts the "
                   "driver twice), driver-container-fail (apply fails: the plugin stays held, the node is "
                   "labelled failed), driver-restart and driver-restart-userspace (the ready file goes with the "
                   "driver and comes back under a new generation), cpu-node (no /etc/migbake/managed: nothing "
                   "is held).")
@click.option("--boots", type=click.IntRange(1, 5), default=2, show_default=True,
              help="Boots per ok run (faults boot once).")
@click.option("--keep", is_flag=True, help="Keep the disk images of every run (default: only of failing runs).")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON.")
@click.option("--cache", type=click.Path(file_okay=False, path_type=Path),
              help="Where the Debian rootfs and kernel are cached (default: $MIGBAKE_CACHE or /var/cache/migbake).")
@click.option("--mig-parted", "mig_parted", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="NVIDIA's nvidia-mig-parted binary: it runs in the guest over simulated GPUs (without it, "
                   "a shell imitation does).")
@click.option("--kubeadm-package", type=click.Choice(PACKAGES), default="deb", show_default=True,
              help="Whose kubelet the guest gets. deb, rpm (with kubelet.layout kubeadm): kubeadm's packaged "
                   "drop-in and the admin's KUBELET_EXTRA_ARGS in /etc/default/kubelet or /etc/sysconfig/kubelet. "
                   "kubespray (any layout): kubespray's own kubelet.service starting /usr/local/bin/kubelet with "
                   "/etc/kubernetes/kubelet.env; kubelet.layout generic with kubelet_args_env naming a variable "
                   "that unit expands and its env file leaves unset (e.g. KUBELET_API_SERVER) fits it.")
@click.option("--layout-source", type=click.Choice(SOURCES),
              help="A profile with named layouts (restore.layout): where the booted node says its layout's name "
                   "(with --layout): file (/etc/migbake/layout), kubelet-labels (nvidia.com/mig.config in the "
                   "admin's KUBELET_EXTRA_ARGS of kubeadm's environment file; kubelet.layout kubeadm) or "
                   "credential (systemd.set_credential=migbake.layout:NAME on the kernel command line). "
                   "Without it the node says nothing and gets the default layout.")
@click.option("--layout", "layout_name", metavar="NAME",
              help="The layout name the node says (with --layout-source): one of the profile's, or with "
                   "--scenario layout-unknown one it does not have.")
def boot_test(profile: Path, paths: str, scenario: str, boots: int, keep: bool, as_json: bool,
              cache: Path | None, mig_parted: Path | None, kubeadm_package: KubeletPackage,
              layout_source: str | None, layout_name: str | None) -> int:
    """Boot PROFILE's artifacts in a throwaway VM (QEMU, systemd as PID 1) and check the boot order.

    Builds (and caches) a minimal Debian rootfs with systemd and cloud-init and a kernel, installs
    NVIDIA's nvidia-mig-parted (--mig-parted) over simulated GPUs (a fake NVML library and nvidia-smi
    built from the catalog; without --mig-parted a shell imitation of mig-parted) and a fake kubelet,
    delivers the generated files through the Packer provisioner or the cloud-init user-data, boots, and
    reads the results back from the disk.
    Claims, on every boot: nvidia-smi < apply < assert < kubelet; a failing apply or assert keeps kubelet
    down (unless on_failure: continue) and the console says why; the packaged manager never runs; the
    layout comes back after a reboot; a manual stop of the restore is refused; every consumer of the
    profile (kubelet, slurmd, ...) is treated like kubelet; the metrics file says 1 or 0. With --mig-parted
    also the node's neighbours: a late driver (driver-late; driver-too-late with a 5 s wait), a GPU client
    (gpu-client), a package upgrade that re-enables the packaged manager (manager-reenabled), a GPU reset
    that fails (ampere-pending: one reboot, then the layout; ampere-pending-stuck: no second reboot, fail
    closed) and CDI (cdi: the spec written last lists the MIG devices). The guest's kubelet is started as
    kubelet.layout says (kubeadm's packaged drop-in and the admin's file, or EKS AL2023's nodeadm with its
    drop-in directory, or kubespray's unit with --kubeadm-package kubespray): kubelet got the node labels
    and the admin's own flags. --scenario no-gpu (asked for by name): the restore decides from the PCI bus
    that there is no GPU, logs why and kubelet starts; then a GPU arrives without its driver and kubelet
    stays down. Named layouts (restore.layout): --layout-source and --layout boot the node saying that name
    there (claim layout-chosen: the restore chose it from that source; the GPUs end up as its layout);
    --scenario layout-unknown (a name the image does not have) and layout-missing (no name, and the
    profile's default left out), asked for by name, keep kubelet down. A driver: container profile
    (restore.hold: gpu-plugins), by name, on the Packer path: a simulated driver container (dummy nvidia
    modules built for the guest kernel, the NVML library and nvidia-smi only in its own mount namespace,
    its root at /run/nvidia/driver with /sys unbindable, its PID file and .driver-ctr-ready) starts after
    kubelet; a stub GPU plugin behind the gate's migbake-wait step sees the profile's layout, an ungated
    one the bare GPU (driver-container); a failing apply keeps the plugin held and labels the node failed
    (driver-container-fail); restarts of the driver remove and renew the ready file (driver-restart,
    driver-restart-userspace); a node without /etc/migbake/managed holds nothing (cpu-node); and
    mig-parted in the driver's root needs the host's /sys bound there. Needs root.

    Host tools, checked before any work (exit 2 names every missing one with its apt-get line): every run:
    qemu-system-x86_64, mkfs.ext4, debugfs, systemctl, cp, bash, find, debootstrap, apt-get, apt-cache,
    dpkg-deb, depmod, modprobe, cpio, gzip, /bin/busybox; the Packer path: packer, /usr/sbin/sshd,
    ssh-keygen, ssh, mount, umount; the cloud-init path: mkfs.vfat, mcopy; --mig-parted: gcc, ldconfig;
    the driver-container scenarios (their dummy modules, built from the guest kernel's headers): make.
    Exit 0 only if every claim holds.
    """
    if (layout_source is None) != (layout_name is None):
        raise UsageError("--layout-source and --layout go together (where the node says its layout, and which)")
    prof = valid_profile(profile)
    layout = (layout_source, layout_name) if layout_source is not None and layout_name is not None else None
    boot_plan = session.plan(prof, paths=paths, scenario=scenario, boots=boots, mig_parted=mig_parted,
                             kubeadm_package=kubeadm_package, layout=layout)
    session.check_host(boot_plan)
    if boot_plan.note:
        click.echo(f"migbake: {boot_plan.note}", err=True)
    log = (lambda line: click.echo(line, err=True)) if not as_json else (lambda line: None)
    actor, generation = boot_plan.actor, boot_plan.generation
    if not as_json:
        click.echo(f"actor: {actor}")
    results = session.run(boot_plan, cache=cache, keep=keep, log=log)
    ok = all(r.passed for r in results)
    if as_json:
        click.echo(json.dumps({"profile": prof.name, "actor": actor, "generation": generation, "passed": ok, "runs": [{
            "path": r.path, "scenario": r.scenario, "passed": r.passed, "work_dir": str(r.work_dir),
            "timings_s": {k: round(v, 1) for k, v in r.timings.items()},
            "boots": [{"boot": b.index, "passed": b.passed, "seconds": round(b.duration_s, 1),
                       "claims": [{"id": c.id, "passed": c.passed, "claim": c.description,
                                   "evidence": c.evidence} for c in b.claims]} for b in r.boots],
        } for r in results]}, indent=2))
    else:
        click.echo(f"{'PATH':<11}{'SCENARIO':<22}{'BOOT':<5}{'RESULT':<7}CLAIM")
        for r in results:
            for b in r.boots:
                for c in b.claims:
                    click.echo(f"{r.path:<11}{r.scenario:<22}{b.index:<5}{'pass' if c.passed else 'FAIL':<7}"
                               f"{c.id}: {c.description}" + ("" if c.passed else f"\n{'':<45}{c.evidence}"))
        times = ", ".join(f"{r.path}/{r.scenario} {sum(b.duration_s for b in r.boots):.0f} s" for r in results)
        click.echo(f"\n{'all claims hold' if ok else 'SOME CLAIMS FAILED'} ({times} of boots)")
    return 0 if ok else EXIT_INVALID
