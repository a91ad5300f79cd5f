"""``OUT/cluster-api/``: a KubeadmConfigTemplate in v1beta2 (and v1beta1 beside it) judged by the
CRD's own schemas (kubernetes-sigs/cluster-api v1.14.0, tests/fixtures/crds/); its files are OUT/rootfs byte
for byte with the same modes and owner, and its preKubeadmCommands are the first boot's install commands.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml
from crdschema import judge
from support import IMAGES, REPO, cli, generate

from migbake.problems import RenderError
from migbake.render.targets.clusterapi import file_entry

KUBEADM = [i for i in IMAGES if "layout: kubeadm" in (i / "node-profile.yaml").read_text()]
FILES = {"v1beta2": "cluster-api/kubeadm-config-template.yaml",
         "v1beta1": "cluster-api/v1beta1/kubeadm-config-template.yaml"}
# an image with named layouts (h100-h200-inference) has one template per name: the first name's stands for them
# here; the named-layout tests below hold every name's
NAMED_IMAGES = {"h100-h200-inference": "inference"}


def _template(out: Path, version: str) -> dict[str, Any]:
    name = NAMED_IMAGES.get(out.parent.name)
    path = out / (FILES[version].replace(".yaml", f"-{name}.yaml") if name else FILES[version])
    doc: dict[str, Any] = yaml.safe_load(path.read_text())
    return doc


def _decoded(entry: dict[str, Any]) -> bytes:
    raw = base64.b64decode(entry["content"], validate=True)
    return gzip.decompress(raw) if entry["encoding"] == "gzip+base64" else raw


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
@pytest.mark.parametrize("image", KUBEADM, ids=lambda p: p.name)
def test_the_template_passes_its_crd_schema(image: Path, version: str) -> None:
    doc = _template(image / "generated", version)
    assert doc["apiVersion"] == f"bootstrap.cluster.x-k8s.io/{version}" and doc["kind"] == "KubeadmConfigTemplate"
    assert judge(doc, f"kubeadmconfigtemplate-{version}") == []
    args = doc["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
    labels = "nvidia.com/gpu.deploy.mig-manager=false"
    if image.name in NAMED_IMAGES:
        labels += f",nvidia.com/mig.config={NAMED_IMAGES[image.name]}"
    if version == "v1beta1":
        assert args == {"node-labels": labels}
    else:  # a list of name/value; CEL "kubeletExtraArgs name must be unique" (checked by hand)
        assert args == [{"name": "node-labels", "value": labels}]
        assert len({a["name"] for a in args}) == len(args)


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
@pytest.mark.parametrize("image", KUBEADM, ids=lambda p: p.name)
def test_the_files_are_the_rootfs_byte_for_byte(image: Path, version: str) -> None:
    files = _template(image / "generated", version)["spec"]["template"]["spec"]["files"]
    rootfs = image / "generated/rootfs"
    on_disk = {"/" + str(p.relative_to(rootfs)): (p.read_bytes(), f"{p.stat().st_mode & 0o777:04o}")
               for p in sorted(rootfs.rglob("*")) if p.is_file()}
    if image.name in NAMED_IMAGES:  # ... and the pool's name for the restore's file source
        on_disk["/etc/migbake/layout"] = (f"{NAMED_IMAGES[image.name]}\n".encode(), "0644")
    assert {f["path"]: (_decoded(f), f["permissions"]) for f in files} == on_disk
    assert {f["owner"] for f in files} == {"root:root"}
    assert {f["encoding"] for f in files} <= {"base64", "gzip+base64"}


def test_the_commands_are_the_first_boots(tmp_path: Path) -> None:
    image = KUBEADM[0]
    commands = _template(image / "generated", "v1beta2")["spec"]["template"]["spec"]["preKubeadmCommands"]
    runcmd = yaml.safe_load((image / "generated/cloud-init/user-data").read_text())["runcmd"]
    assert [shlex.split(c) for c in commands] == runcmd  # the same argv, as shell lines for runcmd
    assert commands[:3] == ["systemctl daemon-reload",
                            "sh -c 'systemctl mask --now nvidia-mig-manager.service 2>/dev/null || true'",
                            "systemctl enable nvidia-mig-restore.service"]
    assert "the node lacks what profile" in commands[3] and "systemctl start nvidia-mig-restore.service" in commands[3]


@pytest.mark.parametrize(("mutate", "error"), [
    (lambda s: s["files"][0].update(permissions=420), "is not of type 'string'"),
    (lambda s: s["files"][0].update(encoding="base32"), "is not one of"),
    (lambda s: s["files"][0].update(content="x" * 10241), "is too long"),
    (lambda s: s.update(preKubeadmCommand=["x"]), "not a field of the schema"),
])
def test_the_crd_schema_refuses_a_broken_template(mutate: Any, error: str) -> None:
    doc = _template(KUBEADM[0] / "generated", "v1beta2")
    mutate(doc["spec"]["template"]["spec"])
    errors = judge(doc, "kubeadmconfigtemplate-v1beta2")
    assert any(error in e for e in errors), errors


def test_a_large_file_is_gzipped_to_fit_and_still_exact() -> None:
    data = "".join(f"line {i}: restore step\n" for i in range(800)).encode()  # 16 KB: base64 over 10240
    entry = file_entry("etc/big", data, 0o755)
    assert entry["encoding"] == "gzip+base64" and len(entry["content"]) <= 10240 and entry["permissions"] == "0755"
    assert _decoded(entry) == data
    with pytest.raises(RenderError, match="too large for a KubeadmConfigTemplate file even gzipped"):
        noise = b"".join(hashlib.sha256(str(i).encode()).digest() for i in range(512))  # 16 KB gzip cannot shrink
        file_entry("etc/random", noise, 0o644)


def _bash_reading(script: bytes, tmp_path: Path) -> str:
    """How bash reads ``script``: its commands as bash prints a function holding them (no comment survives)."""
    body = tmp_path / "body.sh"
    body.write_bytes(b"f() {\n" + script.split(b"\n", 1)[1] + b"\n}\n")
    ran = subprocess.run(["bash", "-c", f"source {shlex.quote(str(body))} && declare -f f"], capture_output=True,
                         check=True, timeout=60)
    return ran.stdout.decode()


def test_a_restore_too_large_even_gzipped_goes_without_its_comments(tmp_path: Path) -> None:
    """An A100 kubeadm node with two named layouts from the file and slurmd beside kubelet: its restore.sh does not
    fit gzipped with its comments, so the template carries it without them: bash reads the same commands."""
    text = (REPO / "images/a100-80gb-mixed/node-profile.yaml").read_text()
    text = text.replace("      layout:\n", "      layouts:\n        mixed:\n")
    text = text.replace("        3g.40gb: 1\n        2g.20gb: 1\n        1g.10gb: 2\n",
                        "          3g.40gb: 1\n          2g.20gb: 1\n          1g.10gb: 2\n"
                        "        small:\n          1g.10gb: 7\n")
    text = text.replace("      layouts:\n        mixed:\n        1g.10gb: 7\n",
                        "      layouts:\n        mixed:\n          1g.10gb: 7\n        small:\n          1g.10gb: 7\n")
    text += "restore:\n  layout: {from: [file], default: mixed}\nconsumers:\n  - unit: slurmd.service\n"
    out = generate(text, tmp_path / "out", production=True)
    restore = (out / "rootfs/etc/nvidia-mig/restore.sh").read_bytes()
    assert len(base64.b64encode(gzip.compress(restore, 9))) > 10240  # the case: too large with its comments
    doc = yaml.safe_load((out / "cluster-api/kubeadm-config-template-mixed.yaml").read_text())
    entry = next(f for f in doc["spec"]["template"]["spec"]["files"] if f["path"] == "/etc/nvidia-mig/restore.sh")
    carried = _decoded(entry)
    assert len(carried) < len(restore) and b"\n#" not in carried.split(b"\n", 1)[1]
    assert _bash_reading(carried, tmp_path) == _bash_reading(restore, tmp_path)
    assert judge(doc, "kubeadmconfigtemplate-v1beta2") == []


@pytest.mark.parametrize("layout", ["eks-al2023", "generic"])
def test_only_kubeadm_gets_a_kubeadm_config_template(tmp_path: Path, layout: str) -> None:
    text = (KUBEADM[0] / "node-profile.yaml").read_text().replace("layout: kubeadm", f"layout: {layout}")
    if layout == "generic":
        text += "  kubelet_args_env: MIGBAKE_LABELS\n"
    assert not (generate(text, tmp_path / "o") / "cluster-api").exists()


# Named layouts: one template per name, labelled nvidia.com/mig.config=NAME
NAMED = REPO / "tests/cases/valid/named-layouts-kubeadm/node-profile.yaml"  # infer and Train_full, file first
OBJECT_NAME = re.compile(r"[a-z0-9]([-a-z0-9.]{0,61}[a-z0-9])?")  # an object name (DNS subdomain, kept to 63)


def _named(out: Path, version: str, layout: str) -> dict[str, Any]:
    path = FILES[version].replace(".yaml", f"-{layout}.yaml")
    doc: dict[str, Any] = yaml.safe_load((out / path).read_text())
    return doc


@pytest.mark.parametrize("version", ["v1beta2", "v1beta1"])
def test_named_layouts_get_one_template_per_name(tmp_path: Path, version: str) -> None:
    out = generate(NAMED.read_text(), tmp_path / "o")
    assert sorted(p.relative_to(out).as_posix() for p in (out / "cluster-api").rglob("*.yaml")) == sorted(
        FILES[v].replace(".yaml", f"-{n}.yaml") for v in FILES for n in ("infer", "Train_full"))
    rootfs = {"/" + p.relative_to(out / "rootfs").as_posix(): p.read_bytes()
              for p in (out / "rootfs").rglob("*") if p.is_file()}
    names = []
    for layout in ("infer", "Train_full"):
        doc = _named(out, version, layout)
        assert judge(doc, f"kubeadmconfigtemplate-{version}") == []
        spec = doc["spec"]["template"]["spec"]
        args = spec["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"]
        labels = f"nvidia.com/gpu.deploy.mig-manager=false,nvidia.com/mig.config={layout}"
        assert args == ({"node-labels": labels} if version == "v1beta1" else [{"name": "node-labels", "value": labels}])
        # the rootfs byte for byte, and the name where the restore's file source reads it (before runcmd)
        layout_file = {"/etc/migbake/layout": f"{layout}\n".encode()}
        assert {f["path"]: _decoded(f) for f in spec["files"]} == {**rootfs, **layout_file}
        assert OBJECT_NAME.fullmatch(doc["metadata"]["name"]) and doc["metadata"]["name"].startswith(
            "migbake-layouts-kubeadm-")
        names.append(doc["metadata"]["name"])
    assert names[0] == "migbake-layouts-kubeadm-infer" and len(set(names)) == 2  # Train_full: lower-cased, hashed


def test_a_template_s_layout_file_makes_the_restore_apply_its_layout(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    from test_layout_restore import _applied, _node, _put

    text = NAMED.read_text().replace("Train_full", "train")
    entry = next(f for f in _named(generate(text, tmp_path / "o"), "v1beta2", "train")["spec"]["template"]["spec"]
                 ["files"] if f["path"] == "/etc/migbake/layout")
    node = _node(tmp_path / "n", monkeypatch, "file, kubelet-labels")
    _put(node, "/etc/migbake/layout", _decoded(entry).decode())
    _applied(node.run(), node, "train", "file")


def test_without_the_file_source_no_layout_file_and_a_warning(tmp_path: Path) -> None:
    text = NAMED.read_text().replace("from: [file, kubelet-labels]", "from: [kubelet-labels]")
    out = generate(text, tmp_path / "o")
    spec = _named(out, "v1beta2", "infer")["spec"]["template"]["spec"]
    assert "/etc/migbake/layout" not in {f["path"] for f in spec["files"]}
    assert spec["joinConfiguration"]["nodeRegistration"]["kubeletExtraArgs"][0]["value"].endswith(
        ",nvidia.com/mig.config=infer")
    code, out_, err = cli("validate", str(_write(tmp_path / "p.yaml", text)))
    assert code == 0 and "[cluster-api-layout-source]" in out_ + err, (out_, err)
    code, out_, err = cli("validate", str(NAMED))
    assert code == 0 and "cluster-api-layout-source" not in out_ + err, (out_, err)


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_show_names_each_template_and_how_the_node_learns_its_name(tmp_path: Path) -> None:
    code, out, err = cli("show", str(NAMED))
    assert code == 0, err
    assert ("Cluster API: one KubeadmConfigTemplate per name in OUT/cluster-api/kubeadm-config-template-NAME.yaml, "
            "which writes the name to /etc/migbake/layout (file).") in out
    assert "Cluster API KubeadmConfigTemplate: migbake-layouts-kubeadm-infer" in out
    assert ("Node label: when file gives the name, the restore gives kubelet nvidia.com/mig.config=NAME in "
            "MIGBAKE_KUBELET_ARGS of /run/migbake/kubelet-labels.env, which the kubelet drop-in reads.") in out
    text = NAMED.read_text().replace("from: [file, kubelet-labels]", "from: [kubelet-labels]")
    code, out, err = cli("show", str(_write(tmp_path / "p.yaml", text)))
    assert code == 0 and "labelled only: restore.layout.from lacks file" in out and "Node label: " not in out, out
