"""`migbake export --gpu-operator PROFILE -o DIR` for a node whose driver is a container: the Helm values.

The GPU Operator's values and the OpenShift ClusterPolicy patch are judged by the ClusterPolicy CRD's own schema
of the two fields they set (tests/fixtures/helm-charts/, from NVIDIA/gpu-operator@v26.7.0), made strict so that a
misspelt key fails (the API server would prune it silently); the charts' node affinities by kubernetes-validate
as a pod's affinity, and against the charts' defaults (each term kept, with migbake.io/mig-ready required). A
profile with a host driver still gets the mig-manager ConfigMap.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from support import REPO, cli
from test_dra_claims import judge

import migbake.commands.export as export_command

IMAGE = REPO / "images/h200-inference/node-profile.yaml"
CHARTS = REPO / "tests/fixtures/helm-charts"
FILES = ["dra-driver-values.yaml", "gpu-operator-values.yaml", "nvidia-device-plugin-values.yaml",
         "openshift-clusterpolicy-patch.yaml"]
READY = {"key": "migbake.io/mig-ready", "operator": "Exists"}


@pytest.fixture
def container_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    """The example profile as a driver container's: validate refuses driver: container until the node side
    supports it, so the export sees the validated profile with its driver changed."""
    valid = export_command.valid_profile

    def changed(path: Path, consequence: str) -> Any:
        return dataclasses.replace(valid(path, consequence), driver="container")

    monkeypatch.setattr(export_command, "valid_profile", changed)


def _export(tmp_path: Path) -> dict[str, Any]:
    code, out, err = cli("export", "--gpu-operator", str(IMAGE), "-o", str(tmp_path / "values"))
    assert code == 0, err
    assert "wrote 4 files" in out
    written = sorted(p.name for p in (tmp_path / "values").iterdir() if not p.name.startswith("."))
    assert written == FILES
    return {name: yaml.safe_load((tmp_path / "values" / name).read_text()) for name in FILES}


def strict(schema: Any) -> Any:
    """``schema`` with no key beyond those it names (an unknown field of a CRD is pruned, not refused)."""
    if isinstance(schema, dict):
        out = {k: strict(v) for k, v in schema.items()}
        if "properties" in schema:
            out["additionalProperties"] = False
        return out
    return schema


def test_gpu_operator_values_turn_its_mig_manager_off(container_driver: None, tmp_path: Path) -> None:
    files = _export(tmp_path)
    crd = json.loads((CHARTS / "gpu-operator-v26.7.0-clusterpolicy-mig.json").read_text())
    spec = strict({"type": "object", "properties": crd["properties"]})
    strategy = yaml.safe_load(IMAGE.read_text())["kubernetes"].get("mig_strategy", "mixed")
    want = {"mig": {"strategy": strategy}, "migManager": {"enabled": False}}
    # the chart passes mig.strategy and migManager.enabled to the ClusterPolicy's fields of the same names
    assert files["gpu-operator-values.yaml"] == want
    assert files["openshift-clusterpolicy-patch.yaml"] == {"spec": want}
    jsonschema.validate(files["openshift-clusterpolicy-patch.yaml"]["spec"], spec)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"migmanager": {"enabled": False}}, spec)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({"mig": {"strategy": "mixd"}}, spec)


@pytest.mark.parametrize(("name", "path", "default"), [
    ("nvidia-device-plugin-values.yaml", ("affinity",), "nvidia-device-plugin-v0.20.0-affinity.yaml"),
    ("dra-driver-values.yaml", ("kubeletPlugin", "affinity"),
     "dra-driver-nvidia-gpu-v0.4.1-kubeletplugin-affinity.yaml"),
], ids=["device-plugin", "dra-driver"])
def test_the_charts_also_require_the_ready_label(container_driver: None, tmp_path: Path, name: str,
                                                 path: tuple[str, ...], default: str) -> None:
    kv = judge("kubernetes_validate")
    value: Any = _export(tmp_path)[name]
    for key in path:
        value = value[key]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
           "spec": {"affinity": value, "containers": [{"name": "c", "image": "i"}]}}
    kv.validate(pod, "1.36.0", strict=True)
    upstream = yaml.safe_load((CHARTS / default).read_text())
    terms = upstream["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    ours = value["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    # the chart's terms are ORed: each keeps its own test and adds the ready label
    assert ours == [{"matchExpressions": [*t["matchExpressions"], READY]} for t in terms]


def test_export_needs_a_directory_for_a_driver_container(container_driver: None) -> None:
    code, _, err = cli("export", "--gpu-operator", str(IMAGE))
    assert code == 2 and "give it with -o DIR" in err


def test_a_host_driver_still_gets_the_configmap() -> None:
    code, out, err = cli("export", "--gpu-operator", str(IMAGE))
    assert code == 0, err
    assert yaml.safe_load(out)["kind"] == "ConfigMap"
