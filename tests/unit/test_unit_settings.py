"""Units and environment that would change what the node does.

A consumer or kubelet that the restore is itself ordered after is an ordering cycle
(``restore-ordering-cycle``; the list comes from the generated unit, and real systemd shows the cycle
when the rule is bypassed); a restore unit named like a unit the node has is ``restore-unit-shadows``;
a kubelet_args_env the loader, a shell or systemd reads is ``kubelet-args-env-unsafe``.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest
import yaml
from realtools import SystemdTree
from support import IMAGES

from migbake.profile.nodefacts import GPU_CLIENTS, NODE_UNITS, RESTORE_AFTER
from migbake.profile.nodeprofile import build_profile
from migbake.render.tree import render
from migbake.rules.units import UNSAFE_ENV, UNSAFE_ENV_PREFIXES
from migbake.rules.validate import check_bytes

SEED = yaml.safe_load((IMAGES[0] / "node-profile.yaml").read_text())
SEED.pop("kubernetes", None)  # no node labels and the generic kubelet layout: each test adds what it checks
SEED.get("kubelet", {}).pop("layout", None)
COUNTS: Counter[str] = Counter()
ORDERING = re.compile(r"^(After|Requires|Wants|BindsTo|Requisite|Upholds)=(.*)$", re.M)


def _errors(**changes: object) -> list[tuple[str, str]]:
    data = json.loads(json.dumps(SEED))
    data.update(changes)
    return [(p.pointer, p.rule) for p in check_bytes(json.dumps(data).encode(), "p.yaml").problems
            if p.severity == "error"]


def test_restore_after_is_exactly_what_every_generated_restore_unit_orders_after() -> None:
    for image in IMAGES:
        data = yaml.safe_load((image / "node-profile.yaml").read_text())
        if data.get("driver") == "container":  # a watcher, ordered after nothing: kubelet starts its driver
            continue
        unit = data.get("restore", {}).get("unit", "nvidia-mig-restore.service")
        text = (image / "generated/rootfs/etc/systemd/system" / unit).read_text()
        after = {u for _, units in ORDERING.findall(text) for u in units.split()}
        assert after == set(RESTORE_AFTER), (image.name, after)


@pytest.mark.parametrize("unit", RESTORE_AFTER)
def test_a_consumer_or_kubelet_the_restore_starts_after_is_an_ordering_cycle(unit: str) -> None:
    COUNTS["class4-cycle"] += 3
    assert _errors(consumers=[{"unit": unit}]) == [("/consumers/0/unit", "restore-ordering-cycle")]
    assert _errors(consumers=[{"unit": unit, "fail_closed": False}]) == [
        ("/consumers/0/unit", "restore-ordering-cycle")]
    assert _errors(kubelet={"unit": unit}) == [("/kubelet/unit", "restore-ordering-cycle")]


def test_kubelet_absent_is_no_cycle_and_gpu_clients_are_fine_consumers() -> None:
    assert _errors(kubelet={"present": False, "unit": RESTORE_AFTER[0]}) == []
    for unit in GPU_CLIENTS:  # the restore is Before= them; a drop-in After= the restore agrees
        assert _errors(consumers=[{"unit": unit}]) == []


@pytest.mark.realtool
def test_systemd_itself_finds_the_cycle_the_rule_refuses() -> None:
    """With the rules bypassed (the typed profile built directly), systemd breaks the cycle at boot."""
    data = json.loads(json.dumps(SEED))
    data["consumers"] = [{"unit": "nvidia-persistenced.service"}]
    profile = build_profile(data, "")
    tree = SystemdTree(extra_units=("nvidia-persistenced.service",))
    try:
        for a in render(profile):
            if a.path.startswith("rootfs/"):
                target = tree.root / a.path[len("rootfs/"):]
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(a.data)
        assert tree.systemctl("enable", profile.restore.unit).rc == 0
        graph = tree.boot_graph()
        assert "ordering cycle" in graph.text.lower(), graph.text[-2000:]
    finally:
        tree.cleanup()


SHADOWED = [*sorted(u.replace("@.", "@tty1.") for u in NODE_UNITS), "systemd-journald.service",
            "systemd-udevd.service", "dbus-broker.service", "cloud-init-hotplugd.service",
            "nvidia-persistenced@x.service"]


def test_a_restore_unit_named_like_a_unit_of_the_node_is_refused() -> None:
    for unit in SHADOWED:
        COUNTS["class4-shadow"] += 1
        rules = {rule for ptr, rule in _errors(restore={"unit": unit}) if ptr == "/restore/unit"}
        # kubelet and the packaged manager are the profile's own units: unit-name-clash says so
        want = "unit-name-clash" if unit in ("kubelet.service", "nvidia-mig-manager.service") else \
            "restore-unit-shadows"
        assert rules == {want}, (unit, rules)


@pytest.mark.parametrize("unit", ["nvidia-mig-restore.service", "mig-restore.service", "nvidia-mig@gpu.service",
                                  "systemd_like.service"])
def test_a_restore_unit_of_its_own_is_allowed(unit: str) -> None:
    assert _errors(restore={"unit": unit}) == []


UNSAFE = sorted(UNSAFE_ENV) + [p + "X" for p in UNSAFE_ENV_PREFIXES] + [
    "LD_PRELOAD", "LD_LIBRARY_PATH", "LD_AUDIT", "ld_preload", "Path", "http_proxy", "https_proxy", "no_proxy",
    "BASH_FUNC_x", "LC_ALL", "SYSTEMD_LOG_LEVEL", "LISTEN_FDS"]


def test_kubelet_args_env_naming_a_loader_shell_or_systemd_variable_is_refused() -> None:
    for name in UNSAFE:
        COUNTS["class4-env"] += 1
        k8s = {"kubelet_args_env": name, "node_labels": {"example.com/gpu": "mig"}}
        assert _errors(kubernetes=k8s) == [("/kubernetes/kubelet_args_env", "kubelet-args-env-unsafe")], name


@pytest.mark.parametrize("name", ["KUBELET_EXTRA_ARGS", "KUBELET_KUBEADM_ARGS", "KUBELET_ARGS", "DAEMON_ARGS",
                                  "KUBELET_OPTS", "EXTRA_ARGS", "PATHS_ARGS", "HOMEGROWN_ARGS"])
def test_kubelet_args_env_of_kubelets_own_is_allowed(name: str) -> None:
    assert _errors(kubernetes={"kubelet_args_env": name, "node_labels": {"example.com/gpu": "mig"}}) == []


def test_report_counts(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    """How many hostile inputs this module tried."""
    with capsys.disabled():
        print("\nclass 4 (units, environment):", dict(COUNTS))
