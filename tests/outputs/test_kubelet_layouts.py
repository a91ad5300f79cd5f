"""kubelet.layout under real systemd (``systemd --test``): what kubelet's command line becomes on a kubeadm node.

systemd parses our drop-in over a kubeadm package's own (written here from what kubernetes/release
``cmd/krel/templates/latest/kubeadm/10-kubeadm.conf`` and ``kubeadm.spec`` install: the deb build reads
/etc/default/kubelet, the rpm build /etc/sysconfig/kubelet) and an admin's KUBELET_EXTRA_ARGS there; its dump
gives the unit's Environment=, EnvironmentFile= and the ExecStart= that wins. kubelet's argv follows from
systemd.exec(5): Environment= in file order, then each EnvironmentFile= over it, then ``$VAR`` expanded
into words. Today's ``generic`` drop-in (Environment=KUBELET_EXTRA_ARGS=...) loses the labels there; the
``kubeadm`` layout keeps both. The VM boot test (scenario ``kubelet-layouts``) runs the same under systemd.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml
from realtools import SystemdTree, boot_jobs, unit_section
from support import generate

LABELS = "nvidia.com/gpu.deploy.mig-manager=false,nvidia.com/mig.config=current"
ADMIN = "--node-ip=10.0.3.17 --max-pods=250"
ENV_FILES = {"deb": "/etc/default/kubelet", "rpm": "/etc/sysconfig/kubelet"}


def kubeadm_dropin(env_file: str) -> str:
    """kubeadm's packaged kubelet drop-in, as the package installs it (its settings, not its comments)."""
    return ("[Service]\n"
            'Environment="KUBELET_KUBECONFIG_ARGS=--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf '
            '--kubeconfig=/etc/kubernetes/kubelet.conf"\n'
            'Environment="KUBELET_CONFIG_ARGS=--config=/var/lib/kubelet/config.yaml"\n'
            "EnvironmentFile=-/var/lib/kubelet/kubeadm-flags.env\n"
            f"EnvironmentFile=-{env_file}\n"
            "ExecStart=\n"
            "ExecStart=/usr/bin/kubelet $KUBELET_KUBECONFIG_ARGS $KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS "
            "$KUBELET_EXTRA_ARGS\n")


def profile(layout: str) -> str:
    extra = "  kubelet_args_env: KUBELET_EXTRA_ARGS\n" if layout == "generic" else ""
    return ("version: 1\nname: kubeadm-node\ngpus:\n  - model: h200-141gb\n    mig: {layout: {1g.18gb: 7}}\n"
            f"kubelet: {{layout: {layout}}}\nkubernetes:\n{extra}"
            "  node_labels: {nvidia.com/gpu.deploy.mig-manager: 'false', nvidia.com/mig.config: current}\n")


def _env_file(path: Path) -> dict[str, str]:
    """KEY=VALUE lines as systemd reads them (# comments, optional double quotes)."""
    out: dict[str, str] = {}
    for line in path.read_text().splitlines():
        key, sep, value = line.strip().partition("=")
        if sep and not key.startswith("#"):
            out[key] = value[1:-1] if len(value) > 1 and value[0] == value[-1] == '"' else value
    return out


def kubelet_argv(section: str, root: Path, manager: dict[str, str] | None = None) -> list[str]:
    """kubelet's argv from systemd's dump of the unit, with the environment files of ``root`` (over the manager's
    environment ``manager``: systemd.setenv=, DefaultEnvironment=)."""
    env: dict[str, str] = dict(manager or {})
    files: list[str] = []
    command = ""
    for line in section.splitlines():
        if line.startswith("Environment: "):  # one assignment a line, as written (spaces and all)
            key, _, value = line[len("Environment: "):].partition("=")
            env[key] = value
        elif line.startswith("EnvironmentFile: "):
            files.append(line[len("EnvironmentFile: "):])
        elif line.startswith("Command Line: "):
            command = line[len("Command Line: "):]  # the last ExecStart= (after ExecStart= resets)
    for f in files:
        path = root / f.lstrip("-").lstrip("/")
        if path.is_file():
            env.update(_env_file(path))
        elif not f.startswith("-"):
            raise AssertionError(f"{f} is missing and not optional: kubelet would not start")
    argv: list[str] = []
    for word in shlex.split(command):
        if word.startswith("\\$"):  # the dump's "\$VAR": $VAR unbraced, expanded and split at whitespace
            argv += env.get(word[2:], "").split()
        else:
            argv.append(word)
    return argv


@pytest.fixture
def tree() -> Iterator[SystemdTree]:
    t = SystemdTree(stubs=("kubelet",))
    yield t
    t.cleanup()


def kubeadm_node(t: SystemdTree, tmp_path: Path, layout: str, package: str) -> tuple[list[str], str]:
    """kubelet's argv and systemd's dump on a kubeadm node of ``package`` with migbake's ``layout`` drop-in."""
    dropins = t.root / "usr/lib/systemd/system/kubelet.service.d"
    dropins.mkdir(parents=True)
    (dropins / "10-kubeadm.conf").write_text(kubeadm_dropin(ENV_FILES[package]))
    admin = t.root / ENV_FILES[package].lstrip("/")
    admin.parent.mkdir(parents=True, exist_ok=True)
    admin.write_text(f"KUBELET_EXTRA_ARGS={ADMIN}\n")
    flags = t.root / "var/lib/kubelet/kubeadm-flags.env"
    flags.parent.mkdir(parents=True)
    flags.write_text('KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock"\n')
    t.install_rootfs(generate(profile(layout), tmp_path / "out") / "rootfs")
    graph = t.boot_graph()
    assert graph.rc == 0 and "ordering cycle" not in graph.err, graph.text
    return kubelet_argv(unit_section(graph.out, "kubelet.service"), t.root), graph.out


def labels_and_admin_flags(argv: list[str]) -> bool:
    return f"--node-labels={LABELS}" in argv and all(f in argv for f in ADMIN.split())


@pytest.mark.parametrize("package", ["deb", "rpm"])
def test_kubeadm_layout_keeps_the_labels_and_the_admins_flags(tree: SystemdTree, tmp_path: Path,
                                                              package: str) -> None:
    argv, _ = kubeadm_node(tree, tmp_path, "kubeadm", package)
    assert labels_and_admin_flags(argv), argv
    assert argv[0] == "/usr/bin/kubelet"
    assert "--config=/var/lib/kubelet/config.yaml" in argv and "--kubeconfig=/etc/kubernetes/kubelet.conf" in argv
    assert "--container-runtime-endpoint=unix:///run/containerd/containerd.sock" in argv
    assert argv[-1] == f"--node-labels={LABELS}"  # last: its values win over the same keys elsewhere


@pytest.mark.parametrize("package", ["deb", "rpm"])
def test_todays_generic_drop_in_loses_the_labels_on_kubeadm(tree: SystemdTree, tmp_path: Path, package: str) -> None:
    """The check above fails on the generic drop-in: the admin's EnvironmentFile= replaces the variable."""
    argv, _ = kubeadm_node(tree, tmp_path, "generic", package)
    assert not labels_and_admin_flags(argv)
    assert not any(a.startswith("--node-labels") for a in argv) and "--node-ip=10.0.3.17" in argv, argv


def test_argv_model_reads_an_environment_file_over_environment(tree: SystemdTree) -> None:
    """The model's own rule, against systemd's dump of a unit with both (a self-test of kubelet_argv)."""
    section = ("Environment: A=from-env\nEnvironment: B=kept\n"
               "EnvironmentFile: -/etc/a.env\nEnvironmentFile: -/etc/none.env\n"
               'Command Line: /bin/x "\\$A" "\\$B" "\\$C"')
    (tree.root / "etc/a.env").write_text('# admin\nA="from file"\n')
    assert kubelet_argv(section, tree.root) == ["/bin/x", "from", "file", "kept"]


# the container toolkit's v1.20 units (deployments/systemd/ of NVIDIA/nvidia-container-toolkit), their
# ordering settings: neither has DefaultDependencies=no, so the path unit is Before=paths.target
TOOLKIT_UNITS = {
    "nvidia-cdi-refresh.service": "[Unit]\nDescription=CDI refresh (test fixture)\nStartLimitBurst=5\n"
                                  "StartLimitIntervalSec=10s\n[Service]\nType=oneshot\nExecStart=/usr/bin/true\n"
                                  "Restart=on-failure\nRestartSec=1s\n[Install]\nWantedBy=multi-user.target\n",
    "nvidia-cdi-refresh.path": "[Unit]\nDescription=CDI refresh trigger (test fixture)\n[Path]\n"
                               "PathChanged=/lib/modules/%v/modules.dep\n[Install]\nWantedBy=multi-user.target\n",
}


@pytest.mark.parametrize(("setting", "ordered"), [("auto", True), ("never", False)])
def test_restore_runs_before_the_cdi_refresh(tree: SystemdTree, tmp_path: Path, setting: str, ordered: bool) -> None:
    for name, text in TOOLKIT_UNITS.items():
        (tree.root / "usr/lib/systemd/system" / name).write_text(text)
    assert tree.systemctl("enable", *TOOLKIT_UNITS).rc == 0
    text = profile("kubeadm") + f"restore: {{cdi_refresh: {setting}}}\n"
    tree.install_rootfs(generate(text, tmp_path / "out") / "rootfs")
    tree.systemctl("enable", "nvidia-mig-restore.service")
    graph = tree.boot_graph()
    # Before= the path unit too would be a cycle (path < paths.target < basic.target < restore): systemd then
    # deletes a start job, and the VM showed it was the restore's
    assert graph.rc == 0 and "ordering cycle" not in graph.err, graph.err
    assert {"nvidia-mig-restore.service", *TOOLKIT_UNITS} <= set(boot_jobs(graph.out))
    section = unit_section(graph.out, "nvidia-mig-restore.service")
    assert ("Before: nvidia-cdi-refresh.service (origin-file)" in section) is ordered, section
    assert "Before: nvidia-cdi-refresh.path" not in section


def test_the_cycle_check_sees_a_restore_ordered_before_the_path_unit(tree: SystemdTree, tmp_path: Path) -> None:
    """What the test above would see had the restore unit Before=nvidia-cdi-refresh.path (a self-test)."""
    for name, text in TOOLKIT_UNITS.items():
        (tree.root / "usr/lib/systemd/system" / name).write_text(text)
    tree.systemctl("enable", *TOOLKIT_UNITS)
    out = generate(profile("kubeadm"), tmp_path / "out")
    unit = out / "rootfs/etc/systemd/system/nvidia-mig-restore.service"
    unit.write_text(unit.read_text().replace("Before=nvidia-cdi-refresh.service",
                                             "Before=nvidia-cdi-refresh.service nvidia-cdi-refresh.path"))
    tree.install_rootfs(out / "rootfs")
    tree.systemctl("enable", "nvidia-mig-restore.service")
    assert "ordering cycle" in tree.boot_graph().err


def test_eks_al2023_node_config_drop_in(tmp_path: Path) -> None:
    out = generate(profile("eks-al2023"), tmp_path / "out")
    doc = yaml.safe_load((out / "rootfs/etc/eks/nodeadm.d/50-migbake-node-labels.yaml").read_text())
    assert doc == {"apiVersion": "node.eks.aws/v1alpha1", "kind": "NodeConfig",
                   "spec": {"kubelet": {"flags": [f"--node-labels={LABELS}"]}}}
    dropin = (out / "rootfs/etc/systemd/system/kubelet.service.d/20-mig-restore.conf").read_text()
    assert "Environment=" not in dropin and "ExecStart" not in dropin


# --- named layouts: the restore's label file (/run/migbake/kubelet-labels.env) reaches kubelet's argv --------
NAMED = ("version: 1\nname: named-node\ngpus:\n  - model: h200-141gb\n    mig:\n      layouts:\n"
         "        infer: {1g.18gb: 7}\n        train: {7g.141gb: 1}\n"
         "restore:\n  layout: {from: [file, kubelet-labels], default: infer}\nkubelet: {layout: %s}\n%s")
LABEL_ENV = "run/migbake/kubelet-labels.env"
# EKS AL2023's kubelet.service, its settings (awslabs/amazon-eks-ami:templates/al2023/runtime/rootfs/etc/systemd/
# system/kubelet.service@v20260724) and nodeadm's environment file as it writes it (nodeadm/internal/kubelet/
# environment.go: no newline after the last line)
EKS_KUBELET = ("[Unit]\nDescription=Kubernetes Kubelet (test fixture)\n[Service]\n"
               "EnvironmentFile=/etc/eks/kubelet/environment\nExecStart=/usr/bin/kubelet $NODEADM_KUBELET_ARGS\n"
               "[Install]\nWantedBy=multi-user.target\n")
NODEADM_ARGS = "--config=/etc/kubernetes/kubelet/config.json --node-labels=karpenter.sh/nodepool=p"


def _named_argv(t: SystemdTree, tmp_path: Path, layout: str, extra: str, label: str | None) -> list[str]:
    """kubelet's argv under the drop-in of a named-layouts profile, with the restore's ``label`` file (or none)."""
    out = generate(NAMED % (layout, extra), tmp_path / "out")
    t.install_rootfs(out / "rootfs")
    if label is not None:
        (t.root / LABEL_ENV).parent.mkdir(parents=True, exist_ok=True)
        (t.root / LABEL_ENV).write_text(label)
    ran = t.verify("kubelet.service")  # the drop-in as systemd-analyze reads it (rc 0, nothing on stderr)
    assert ran.rc == 0 and ran.err == "", ran.text
    graph = t.boot_graph()
    assert graph.rc == 0 and "ordering cycle" not in graph.err, graph.text
    return kubelet_argv(unit_section(graph.out, "kubelet.service"), t.root)


@pytest.mark.parametrize("package", ["deb", "rpm"])
def test_kubeadm_gets_the_name_s_label_last_and_keeps_the_rest(tree: SystemdTree, tmp_path: Path,
                                                               package: str) -> None:
    dropins = tree.root / "usr/lib/systemd/system/kubelet.service.d"
    dropins.mkdir(parents=True)
    (dropins / "10-kubeadm.conf").write_text(kubeadm_dropin(ENV_FILES[package]))
    (tree.root / ENV_FILES[package].lstrip("/")).parent.mkdir(parents=True, exist_ok=True)
    (tree.root / ENV_FILES[package].lstrip("/")).write_text(f"KUBELET_EXTRA_ARGS={ADMIN}\n")
    extra = "kubernetes: {node_labels: {team: a}}\n"
    argv = _named_argv(tree, tmp_path / "a", "kubeadm", extra,
                       "MIGBAKE_KUBELET_ARGS=--node-labels=team=a,nvidia.com/mig.config=train\n")
    assert argv[-1] == "--node-labels=team=a,nvidia.com/mig.config=train"  # last: it wins
    assert all(f in argv for f in ADMIN.split()) and "--config=/var/lib/kubelet/config.yaml" in argv, argv
    (tree.root / LABEL_ENV).unlink()  # no file (the name came from kubelet's labels): the drop-in's labels only
    graph = tree.boot_graph()
    argv = kubelet_argv(unit_section(graph.out, "kubelet.service"), tree.root)
    assert argv[-1] == "--node-labels=team=a" and not any("mig.config" in a for a in argv), argv


def test_kubeadm_without_node_labels_still_passes_the_name(tree: SystemdTree, tmp_path: Path) -> None:
    dropins = tree.root / "usr/lib/systemd/system/kubelet.service.d"
    dropins.mkdir(parents=True)
    (dropins / "10-kubeadm.conf").write_text(kubeadm_dropin(ENV_FILES["deb"]))
    argv = _named_argv(tree, tmp_path, "kubeadm", "",
                       "MIGBAKE_KUBELET_ARGS=--node-labels=nvidia.com/mig.config=train\n")
    assert argv[-1] == "--node-labels=nvidia.com/mig.config=train", argv


def test_eks_al2023_keeps_nodeadm_s_arguments_and_adds_the_name(tree: SystemdTree, tmp_path: Path) -> None:
    (tree.root / "usr/lib/systemd/system/kubelet.service").write_text(EKS_KUBELET)
    (tree.root / "etc/eks/kubelet").mkdir(parents=True)
    (tree.root / "etc/eks/kubelet/environment").write_text(f"NODEADM_KUBELET_ARGS={NODEADM_ARGS}")
    argv = _named_argv(tree, tmp_path, "eks-al2023", "kubernetes: {node_labels: {team: a}}\n",
                       "MIGBAKE_KUBELET_ARGS=--node-labels=nvidia.com/mig.config=train\n")
    assert argv == ["/usr/bin/kubelet", *NODEADM_ARGS.split(), "--node-labels=nvidia.com/mig.config=train"]


def test_a_label_file_the_drop_in_does_not_read_changes_nothing(tree: SystemdTree, tmp_path: Path) -> None:
    """The check above is not vacuous: without the drop-in's EnvironmentFile= the same file is not seen."""
    (tree.root / "usr/lib/systemd/system/kubelet.service").write_text(EKS_KUBELET)
    (tree.root / "etc/eks/kubelet").mkdir(parents=True)
    (tree.root / "etc/eks/kubelet/environment").write_text(f"NODEADM_KUBELET_ARGS={NODEADM_ARGS}")
    out = generate(NAMED % ("eks-al2023", ""), tmp_path / "out")
    dropin = out / "rootfs/etc/systemd/system/kubelet.service.d/20-mig-restore.conf"
    dropin.write_text(dropin.read_text().replace("EnvironmentFile=-/run/migbake/kubelet-labels.env\n", ""))
    tree.install_rootfs(out / "rootfs")
    (tree.root / LABEL_ENV).parent.mkdir(parents=True)
    (tree.root / LABEL_ENV).write_text("MIGBAKE_KUBELET_ARGS=--node-labels=nvidia.com/mig.config=train\n")
    argv = kubelet_argv(unit_section(tree.boot_graph().out, "kubelet.service"), tree.root)
    assert argv == ["/usr/bin/kubelet", *NODEADM_ARGS.split()], argv


# kubespray's kubelet.service, its settings (kubernetes-sigs/kubespray:roles/kubernetes/node/templates/
# kubelet.service.j2@v2.31.0): kubelet.env sets KUBELET_ARGS and leaves KUBELET_API_SERVER unset
KUBESPRAY_KUBELET = ("[Unit]\nDescription=Kubernetes Kubelet Server (test fixture)\n[Service]\n"
                     "EnvironmentFile=-/etc/kubernetes/kubelet.env\n"
                     "ExecStart=/usr/local/bin/kubelet $KUBE_LOGTOSTDERR $KUBELET_API_SERVER $KUBELET_ARGS\n"
                     "[Install]\nWantedBy=multi-user.target\n")


def test_generic_kubespray_gets_the_name_in_its_variable_and_keeps_kubespray_s(tree: SystemdTree,
                                                                               tmp_path: Path) -> None:
    (tree.root / "usr/lib/systemd/system/kubelet.service").write_text(KUBESPRAY_KUBELET)
    (tree.root / "usr/local/bin").mkdir(parents=True, exist_ok=True)
    (tree.root / "usr/local/bin/kubelet").write_text("#!/bin/sh\nexit 0\n")
    (tree.root / "usr/local/bin/kubelet").chmod(0o755)
    (tree.root / "etc/kubernetes").mkdir(parents=True)
    env_file = tree.root / "etc/kubernetes/kubelet.env"
    env_file.write_text('KUBELET_ARGS="--config=/etc/kubernetes/kubelet-config.yaml"\n')
    extra = "kubernetes: {kubelet_args_env: KUBELET_API_SERVER, node_labels: {team: a}}\n"
    argv = _named_argv(tree, tmp_path, "generic", extra,
                       "KUBELET_API_SERVER=--node-labels=team=a,nvidia.com/mig.config=train\n")
    assert argv == ["/usr/local/bin/kubelet", "--node-labels=team=a,nvidia.com/mig.config=train",
                    "--config=/etc/kubernetes/kubelet-config.yaml"], argv


SETENV_PROFILE = ("version: 1\nname: kubeadm-node\ngpus:\n  - model: h200-141gb\n    mig:\n      layouts:\n"
         "        infer: {1g.18gb: 7}\n        train: {7g.141gb: 1}\n"
                  "restore:\n  layout: {from: [kubelet-labels, file], default: infer}\nkubelet: {layout: %s}\n")


@pytest.mark.parametrize("layout", ["kubeadm", "eks-al2023"])
def test_the_manager_s_environment_never_gives_kubelet_our_variable(tree: SystemdTree, tmp_path: Path,
                                                                    layout: str) -> None:
    """A manager environment (systemd.setenv= on the kernel command line, DefaultEnvironment=) that sets our
    variable: the drop-in defines it (empty until the restore's file sets it), and a unit's Environment= wins over
    the manager's (systemd.exec(5)), so kubelet never gets a label the restore did not apply."""
    dropins = tree.root / "usr/lib/systemd/system/kubelet.service.d"
    dropins.mkdir(parents=True)
    (dropins / "10-kubeadm.conf").write_text(kubeadm_dropin(ENV_FILES["deb"]))
    tree.install_rootfs(generate(SETENV_PROFILE % layout, tmp_path / "out") / "rootfs")
    graph = tree.boot_graph()
    assert graph.rc == 0, graph.text
    section = unit_section(graph.out, "kubelet.service")
    argv = kubelet_argv(section, tree.root, {"MIGBAKE_KUBELET_ARGS": "--node-labels=nvidia.com/mig.config=train"})
    assert argv[0] == "/usr/bin/kubelet" and not any("mig.config" in a for a in argv), argv
