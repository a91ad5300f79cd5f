"""The OpenShift GPU pool: OUT/butane/openshift-<role>-pool.yaml, judged by the MCO's own CRD schema.

openshift.role defaults to a pool of its own (gpu-mig): migbake writes its MachineConfigPool beside the
MachineConfig, as openshift/machine-config-operator:docs/custom-pools.md creates a custom pool (worker's
MachineConfigs and the role's own, on the nodes labelled node-role.kubernetes.io/<role>). The pool passes
openshift/api's MachineConfigPool v1 schema (tests/fixtures/crds/ORIGIN.md) with no field the API server
would drop; the MachineConfig passes butane --strict (tests/outputs/test_butane.py, variants default and worker).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from crdschema import crd_schema, schema_errors, unknown_fields
from support import cli, generate

H200 = "version: 1\nname: h200-pool\ngpus:\n  - model: h200-141gb\n    mig:\n      layout: {1g.18gb: 7}\n"
ROLE = "machineconfiguration.openshift.io/role"


def _pool(out: Path, role: str) -> dict[str, object]:
    text = (out / f"butane/openshift-{role}-pool.yaml").read_text()
    pool: dict[str, object] = yaml.safe_load(text)
    return pool


@pytest.mark.parametrize("role", ["gpu-mig", "a100-inference"], ids=["default", "named"])
def test_the_pool_passes_the_crd_schema_and_selects_the_machine_config(tmp_path: Path, role: str) -> None:
    extra = "" if role == "gpu-mig" else f"openshift: {{role: {role}}}\n"
    out = generate(H200 + extra, tmp_path / "out")
    pool = _pool(out, role)
    schema = crd_schema("machineconfigpool-v1")
    assert schema_errors(pool, schema) == [] and unknown_fields(pool, schema) == []
    assert (pool["apiVersion"], pool["kind"]) == ("machineconfiguration.openshift.io/v1", "MachineConfigPool")
    mc = yaml.safe_load((out / f"butane/openshift-{role}.yaml").read_text())
    spec = pool["spec"]
    assert isinstance(spec, dict) and pool["metadata"] == {"name": role}
    [selector] = spec["machineConfigSelector"]["matchExpressions"]
    assert selector == {"key": ROLE, "operator": "In", "values": ["worker", role]}
    assert mc["metadata"]["labels"][ROLE] in selector["values"]  # the pool takes our MachineConfig
    assert spec["nodeSelector"] == {"matchLabels": {f"node-role.kubernetes.io/{role}": ""}}


@pytest.mark.parametrize("change, error", [
    (lambda p: p["spec"]["nodeSelector"]["matchLabels"].update({"x": 1}), "1 is not of type 'string'"),
    (lambda p: p["spec"]["machineConfigSelector"].update({"matchExpressions": "worker"}), "is not of type 'array'"),
    (lambda p: p["spec"].update({"nodeSelecter": {}}), "unknown: /spec/nodeSelecter"),
], ids=["label-value-not-a-string", "expressions-not-a-list", "misspelt-field"])
def test_the_crd_schema_refuses_a_broken_pool(tmp_path: Path, change, error: str) -> None:  # type: ignore[no-untyped-def]
    pool = _pool(generate(H200, tmp_path / "out"), "gpu-mig")
    change(pool)
    schema = crd_schema("machineconfigpool-v1")
    found = schema_errors(pool, schema) + [f"unknown: {f}" for f in unknown_fields(pool, schema)]
    assert any(error in e for e in found), found


@pytest.mark.parametrize("role", ["worker", "master"])
def test_a_shared_pool_gets_no_pool_file_and_a_warning(tmp_path: Path, role: str) -> None:
    profile = tmp_path / "p.yaml"
    profile.write_text(H200 + f"openshift: {{role: {role}}}\n")
    code, out, _ = cli("validate", str(profile))
    assert code == 0 and "[openshift-role-shared]" in out and f"openshift-{role}.yaml goes to every" in out, out
    tree = generate(profile.read_text(), tmp_path / "out")
    assert sorted(p.name for p in (tree / "butane").glob("openshift-*")) == [f"openshift-{role}.bu",
                                                                             f"openshift-{role}.yaml"]
    profile.write_text(H200)  # the default: no warning
    assert "openshift-role-shared" not in cli("validate", str(profile))[1]
