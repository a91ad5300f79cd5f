"""Named layouts chosen at boot (restore.layout) in the guest: where the node says the name, and the claim.

A boot-test option beside the scenario (it adds no boot): ``LayoutChoice(source, name)`` puts ``name`` where
the restore's ``source`` reads it (templates/scripts/_layout-source.sh.j2), as a node pool's provisioning does:

- ``file``: the first line of ``/etc/migbake/layout`` (a provisioner, a PXE template or a user's own
  user-data part writes it);
- ``kubelet-labels``: the admin's kubelet flags in kubeadm's environment file (``KUBELET_EXTRA_ARGS`` of
  /etc/default/kubelet or /etc/sysconfig/kubelet, ``scenarios.kubelet``) gain
  ``--node-labels=nvidia.com/mig.config=NAME``, as a node pool's bootstrap writes them;
- ``credential``: the kernel command line ``systemd.set_credential=migbake.layout:NAME`` (systemd.exec(5),
  "System and Service Credentials"; systemd.io/CREDENTIALS), which the restore unit's ``LoadCredential=``
  hands to the restore.

``seeded``: the output under test writes the name itself (``file``: a per-layout seed, ``generate --layout NAME`` or
``OUT/cloud-init/layouts/NAME/user-data``), so the guest gets nothing by hand and the claim shows the seed works.

The simulated GPUs are judged against that name's layout. The claim ``layout-chosen``: the restore's journal
says it chose ``name`` from ``source``, before it applied anything. The scenarios ``layout-unknown`` (a name
the image does not have) and ``layout-missing`` (no name, no default) fail closed before any NVIDIA tool.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from migbake.kubernetes.labels import MIG_CONFIG_LABEL as CONFIG_LABEL
from migbake.kubernetes.labels import label_value_problem
from migbake.render.plan import LAYOUT_FILE
from migbake_boottest.errors import BootTestError
from migbake_boottest.guestreport import GuestReport
from migbake_boottest.scenarios.claims import RESTORE, Claim
from migbake_boottest.scenarios.kubelet import ENV_FILE, KubeletFixture, node_labels_given
from migbake_boottest.scenarios.scenario import LAYOUT_UNKNOWN
from migbake_boottest.scenarios.scenario import _write as write_guest

LayoutSource = Literal["file", "kubelet-labels", "credential"]
SOURCES: tuple[LayoutSource, ...] = ("file", "kubelet-labels", "credential")
CREDENTIAL = "migbake.layout"  # the credential source's name (the restore unit's LoadCredential=)


@dataclass(frozen=True)
class LayoutChoice:
    """The layout name a boot's node says, and where it says it."""

    source: LayoutSource
    name: str
    seeded: bool = False  # the output under test writes it (a per-layout seed): nothing is put in the guest

    def __post_init__(self) -> None:
        if self.source not in SOURCES:
            raise BootTestError(f"layout source {self.source!r}: expected one of {', '.join(SOURCES)}")
        if self.seeded and self.source != "file":
            raise BootTestError(f"layout source {self.source}: only the file source has per-layout seeds")
        why = label_value_problem(self.name) if self.name else "empty"
        if why:
            raise BootTestError(f"layout name {self.name!r}: not a label value ({why})")

    @property
    def kernel_args(self) -> str:
        """What the kernel command line gains (the credential source), with its leading blank."""
        return f" systemd.set_credential={CREDENTIAL}:{self.name}" if self.source == "credential" else ""


def prepare_image(rootfs: Path, choice: LayoutChoice, fixture: KubeletFixture) -> None:
    """Put ``choice.name`` where ``choice.source`` reads it, in the guest's root (after the kubelet fixture); nothing
    for a seeded choice (the output under test writes it)."""
    if choice.seeded:
        return
    if choice.source == "file":
        write_guest(rootfs, LAYOUT_FILE, choice.name + "\n", 0o644)
    elif choice.source == "kubelet-labels":
        if fixture not in ENV_FILE:
            raise BootTestError(f"layout source kubelet-labels boots with kubeadm's kubelet (its environment "
                                f"file), not the {fixture} fixture")
        env = rootfs / ENV_FILE[fixture].lstrip("/")
        text = env.read_text()
        key, sep, value = text.rstrip("\n").partition("=")
        if key != "KUBELET_EXTRA_ARGS" or not sep:
            raise BootTestError(f"{ENV_FILE[fixture]} of the {fixture} fixture: expected KUBELET_EXTRA_ARGS=...")
        write_guest(rootfs, ENV_FILE[fixture],
                    f"KUBELET_EXTRA_ARGS=--node-labels={CONFIG_LABEL}={choice.name} {value}\n", 0o644)


def layout_claim(report: GuestReport | None, choice: LayoutChoice | None, scenario: str = "ok") -> list[Claim]:
    """``layout-chosen``: the restore's journal names the layout and the source this boot gave it.

    Under ``layout-unknown`` the name is not the image's: the journal must say that source gave it (and the
    restore then fails closed, the scenario's own claims).
    """
    if choice is None:
        return []
    text = f"the restore chose layout {choice.name} from {choice.source} (restore.layout)"
    wanted = f"layout {choice.name}, from {choice.source} "
    if scenario == LAYOUT_UNKNOWN:
        text = f"the restore read layout {choice.name} from {choice.source} and refused it (not the image's)"
        wanted = f"source {choice.source} gives layout {choice.name}, which this image does not have"
    if report is None:
        return [Claim("layout-chosen", text, False, "no report")]
    journal = report.section(f"journal {RESTORE}")
    said = [line for line in journal if wanted in line]
    evidence = said[0] if said else ("journal: " + " | ".join(x for x in journal if "layout" in x) or "no layout line")
    return [Claim("layout-chosen", text, bool(said), evidence)]


def label_claim(argv_text: str | None, choice: LayoutChoice | None) -> list[Claim]:
    """``layout-label``: kubelet started with ``nvidia.com/mig.config=NAME`` in a ``--node-labels`` argument.

    From kubelet's own labels as the node had them, or, for another source, from the restore's label file that
    migbake's kubelet drop-in reads (a boot whose kubelet started; ``scenarios.kubelet`` records its argv).
    """
    if choice is None:
        return []
    text = f"kubelet got the label {CONFIG_LABEL}={choice.name} (the layout's name, from {choice.source})"
    if argv_text is None:
        return [Claim("layout-label", text, False, "kubelet recorded no argv")]
    argv = argv_text.splitlines()
    labels = [a for a in argv if a.startswith("--node-labels=")]
    found = f"{CONFIG_LABEL}={choice.name}" in node_labels_given(argv)
    return [Claim("layout-label", text, found, f"--node-labels arguments: {labels or 'none'}")]
