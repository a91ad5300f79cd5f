"""Render a validated node profile into the output tree, in memory: the declared targets, and the path checks.

One plan (``plan.make_plan``) is derived from the profile; each target turns it into its files. A target is
one declaration in ``TARGETS`` (``Target``): its name, the output folders it writes, its function, the
targets whose files it reads (cloud-init, Packer, Ansible and Kickstart carry the rootfs files, Ansible the
scripts, Kickstart the Packer scripts), when it applies, one line saying what it is, its doc page and its own
test module. ``check_order`` holds the declarations at import: a target runs after every target it reads, and
a folder belongs to one target (and to those that read it). At render time a target sees only the files of
the targets it reads, and may write only into its own folders.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, replace

from migbake.problems import RenderError
from migbake.profile.nodeprofile import NodeProfile
from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.plan import NO_FORMS, RenderPlan, UserDataForms, make_plan
from migbake.render.targets.ansible import ansible
from migbake.render.targets.bottlerocket import bottlerocket
from migbake.render.targets.butane import butane
from migbake.render.targets.cloudinit import cloud_init
from migbake.render.targets.clusterapi import cluster_api
from migbake.render.targets.context import shared_variables
from migbake.render.targets.karpenter import karpenter
from migbake.render.targets.kickstart import kickstart
from migbake.render.targets.kubernetes import kubernetes, kubernetes_gate
from migbake.render.targets.packer import packer
from migbake.render.targets.rootfs import rootfs
from migbake.render.targets.scripts import scripts
from migbake.render.targets.slurm import slurm
from migbake.render.targets.userdata import user_data_forms

__all__ = ["OUTPUT_NAMES", "TARGETS", "Artifact", "Target", "always", "check_order", "in_order", "only_outputs",
           "render", "render_plan"]

_FOLDER = re.compile(r"[a-z][a-z0-9-]*")
_PAGE = re.compile(r"docs/[a-z0-9-]+\.md")
_TESTS = re.compile(r"tests/outputs/test_[a-z0-9_]+\.py")


def always(plan: RenderPlan) -> bool:
    """A target every profile gets."""
    return True


@dataclass(frozen=True)
class Target:
    """One output target: what it writes, from what, and when."""

    name: str
    folders: tuple[str, ...]  # the folders of OUT it writes (``outputs:`` and ``--outputs`` name them)
    render: Callable[[RenderPlan, Rendered, Templates], list[Artifact]]  # (plan, what it reads, templates)
    reads: tuple[str, ...] = ()  # the targets whose files it carries: it runs after them and sees only theirs
    applies: Callable[[RenderPlan], bool] = always  # whether the profile gets it at all
    doc: str = ""  # one line: what it is for
    page: str = ""  # the doc page that says more (``docs/NAME.md``; docs/output-tree.md's table links it)
    tests: str = ""  # its own test module (``tests/outputs/test_NAME.py``, which names the target)


# every output target; each runs after the targets it reads (check_order holds this)
TARGETS: tuple[Target, ...] = (
    Target("rootfs", ("rootfs",), rootfs,
           doc="the node's own files: the mig-parted config, restore.sh, the restore unit and its drop-ins",
           page="docs/output-tree.md", tests="tests/outputs/test_realtools.py"),
    Target("cloud-init", ("cloud-init",), cloud_init, reads=("rootfs",),
           doc="the first boot's #cloud-config: the rootfs files, bootcmd's hold and runcmd's restore",
           page="docs/cloud-init.md", tests="tests/outputs/test_realtools.py"),
    Target("user-data", ("cloud-init",), user_data_forms, reads=("cloud-init",),
           applies=lambda plan: plan.user_data != NO_FORMS,
           doc="the user-data's delivery forms generate's options ask for: gzipped, multi-part MIME",
           page="docs/baking.md", tests="tests/outputs/test_ec2_user_data.py"),
    Target("packer", ("packer",), packer, reads=("rootfs",),
           doc="the Packer templates, one plugin folder per builder, and the provisioner scripts",
           page="docs/packer.md", tests="tests/outputs/test_packer.py"),
    Target("scripts", ("scripts",), scripts,
           doc="what a person runs on a node: preflight, verify, uninstall, capture",
           page="docs/verify.md", tests="tests/outputs/test_generated_scripts.py"),
    Target("slurm", ("slurm",), slurm, applies=lambda plan: plan.slurm is not None,
           doc="gres.conf and the node's Gres= line, with a slurm: section or slurmd among the consumers",
           page="docs/slurm.md", tests="tests/outputs/test_slurm.py"),
    Target("kubernetes", ("kubernetes",), kubernetes, applies=lambda plan: bool(plan.dra.claim_templates),
           doc="ResourceClaimTemplates for kubernetes.allocation dra",
           page="docs/dra.md", tests="tests/outputs/test_dra_claims.py"),
    Target("kubernetes-gate", ("kubernetes",), kubernetes_gate, reads=("kubernetes",),
           applies=lambda plan: plan.gate_enabled,
           doc="admission policies (MutatingAdmissionPolicy, Kyverno) that hold the GPU plugins' pods until the "
               "layout is restored, for a driver container (kubernetes/gate/)",
           page="docs/driver-containers.md", tests="tests/outputs/test_plugin_gate.py"),
    Target("ansible", ("ansible",), ansible, reads=("rootfs", "scripts"),
           doc="a role and its playbooks for day 2 on running nodes",
           page="docs/ansible.md", tests="tests/outputs/test_ansible_kickstart.py"),
    Target("kickstart", ("kickstart",), kickstart, reads=("rootfs", "packer"),
           doc="a %post for Anaconda that runs the Packer provisioner scripts",
           page="docs/kickstart.md", tests="tests/outputs/test_ansible_kickstart.py"),
    Target("butane", ("butane",), butane, reads=("rootfs",),
           doc="Butane configs and their Ignition for Fedora CoreOS, Flatcar and OpenShift",
           page="docs/immutable-os.md", tests="tests/outputs/test_butane.py"),
    Target("bottlerocket", ("bottlerocket",), bottlerocket, applies=lambda plan: bool(plan.platforms.bottlerocket),
           doc="Bottlerocket settings, when it can say the layout (one profile per GPU model)",
           page="docs/immutable-os.md", tests="tests/outputs/test_bottlerocket.py"),
    Target("karpenter", ("karpenter",), karpenter, reads=("rootfs",),
           applies=lambda plan: plan.platforms.eks == "eks-al2023",
           doc="an EC2NodeClass whose userData carries the restore and the labels, and a NodePool per layout name "
               "(kubelet.layout eks-al2023)",
           page="docs/karpenter.md", tests="tests/outputs/test_karpenter.py"),
    Target("cluster-api", ("cluster-api",), cluster_api, reads=("rootfs",),
           applies=lambda plan: plan.profile.kubelet.present and plan.profile.kubelet.layout == "kubeadm",
           doc="KubeadmConfigTemplates carrying the rootfs files (kubelet.layout kubeadm)",
           page="docs/cluster-api.md", tests="tests/outputs/test_cluster_api.py"),
)


def check_order(targets: tuple[Target, ...]) -> None:
    """RenderError unless ``targets`` can run in their order: names once, a doc line, page and test module each,
    each read target declared before its reader, and each folder written by one target (and by targets that
    read it)."""
    seen: dict[str, Target] = {}
    for t in targets:
        if t.name in seen:
            raise RenderError(f"target {t.name!r} is declared twice")
        if not t.doc or "\n" in t.doc:
            raise RenderError(f"target {t.name!r}: its doc must be one line saying what it is for")
        if not _PAGE.fullmatch(t.page) or not _TESTS.fullmatch(t.tests):
            raise RenderError(f"target {t.name!r}: page {t.page!r}, tests {t.tests!r}: its doc page "
                              "(docs/NAME.md) and its own test module (tests/outputs/test_NAME.py)")
        if not t.folders or not all(_FOLDER.fullmatch(f) for f in t.folders):
            raise RenderError(f"target {t.name!r}: folders {t.folders!r}: one or more names of OUT's top "
                              "folders (lower-case letters, digits and -)")
        for name in t.reads:
            if name not in seen:
                later = any(o.name == name for o in targets)
                raise RenderError(f"target {t.name!r} reads the files of {name!r}, which " + (
                    "comes after it in TARGETS: declare it after the targets it reads" if later else
                    "is no declared target"))
        for folder in t.folders:
            owners = [o.name for o in seen.values() if folder in o.folders and o.name not in t.reads]
            if owners:
                raise RenderError(f"targets {owners[0]!r} and {t.name!r} both write {folder}/: a target may "
                                  "add to another's folder only when it reads that target")
        seen[t.name] = t


check_order(TARGETS)

# the output folders, in the order of the targets that write them (``outputs:`` and ``generate --outputs``)
OUTPUT_NAMES = tuple(dict.fromkeys(f for t in TARGETS for f in t.folders))


def in_order(outputs: tuple[str, ...]) -> tuple[str, ...]:
    """The output names of ``outputs`` in TARGETS' order, each once (how the marker records them)."""
    return tuple(n for n in OUTPUT_NAMES if n in outputs)


def only_outputs(artifacts: list[Artifact], outputs: tuple[str, ...]) -> list[Artifact]:
    """The files of ``artifacts`` in the folders ``outputs`` names (empty: all of them).

    Every target is rendered first, so what one folder carries of another (Karpenter's userData the
    cloud-init user-data, Cluster API the rootfs files) is the same whether or not that folder is written.
    """
    if not outputs:
        return artifacts
    keep = set(outputs)
    return [a for a in artifacts if a.path.split("/", 1)[0] in keep]


def render(profile: NodeProfile, user_data: UserDataForms = NO_FORMS) -> list[Artifact]:
    """Every file of the output tree for ``profile`` (with the user-data forms asked for), sorted by path."""
    return render_plan(replace(make_plan(profile), user_data=user_data))


def render_plan(plan: RenderPlan, targets: tuple[Target, ...] = TARGETS) -> list[Artifact]:
    """Every file of the output tree a plan describes, sorted by path (the targets read only the plan, and
    the files of the targets they declare they read)."""
    return sorted(render_written(plan, targets), key=lambda a: a.path)


def render_written(plan: RenderPlan, targets: tuple[Target, ...] = TARGETS) -> list[Artifact]:
    """``render_plan``'s files in the order the targets wrote them (the rootfs files in the order the bake
    and the Ansible role install them)."""
    templates = Templates(shared_variables(plan))
    wrote: dict[str, list[Artifact]] = {}
    for t in targets:
        if not t.applies(plan):
            continue
        files = t.render(plan, Rendered([a for name in t.reads for a in wrote.get(name, ())]), templates)
        stray = [a.path for a in files if a.path.split("/", 1)[0] not in t.folders]
        if stray:
            raise RenderError(f"target {t.name!r} wrote {stray[0]!r}, outside its folders ({', '.join(t.folders)})")
        wrote[t.name] = files
    out = [a for files in wrote.values() for a in files]
    check_paths(out)
    return out


def check_paths(artifacts: list[Artifact]) -> None:
    """Two files at one path, or a file where a folder must be (restore.config_path can point there)."""
    files = {a.path for a in artifacts}
    if len(files) < len(artifacts):
        dup = sorted(p for p in files if sum(a.path == p for a in artifacts) > 1)[0]
        raise RenderError(f"two generated files would both be {dup!r}: restore.config_path must not be "
                          "the path of another generated file")
    folders: set[str] = set()
    for path in files:  # each file's folders, up to one already seen
        head = path.rpartition("/")[0]
        while head and head not in folders:
            folders.add(head)
            head = head.rpartition("/")[0]
    if folders.isdisjoint(files):
        return
    for a in artifacts:  # which file is a folder of which path, the first in the order written
        i = a.path.find("/")
        while i >= 0:  # each folder of the path, the shortest first
            if a.path[:i] in files:
                raise RenderError(f"{a.path[:i]!r} would be both a generated file and the folder of "
                                  f"{a.path!r}: restore.config_path must not be one of migbake's paths")
            i = a.path.find("/", i + 1)
