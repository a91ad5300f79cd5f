"""`migbake bake` follows Packer's conventions: PKR_VAR_NAME counts as given, --dry-run fails as the real run
would (it runs the real `packer validate` with the same arguments), `packer init` installs only the chosen
sources' plugins, and amazon-ebs takes the variables a production AMI pipeline sets.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from realtools import hcl_parse, packer, packer_console, packer_validate, require, run
from support import IMAGES, cli, generate

from migbake.bake.packer import SOURCE_NAMES, SOURCES, plan_bake
from migbake.render.targets.packer import PACKER_PLUGINS

PROFILE = IMAGES[-1] / "node-profile.yaml"


def _bake(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    require("packer")
    return cli("bake", str(PROFILE), "-o", str(tmp_path / "o"), "--dry-run", *args, env=env)


def test_pkr_var_counts_as_given(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code, _, err = _bake(tmp_path, "--only", "null.ssh")
    assert code == 2 and "--var ssh_host=..." in err and "PKR_VAR_ssh_host" in err, err
    monkeypatch.setenv("PKR_VAR_ssh_host", "192.0.2.10")  # Packer reads it, so does migbake
    code, out, err = _bake(tmp_path, "--only", "null.ssh")
    assert code == 0, err
    assert out.rstrip().endswith("packer validate passed"), out
    assert not (tmp_path / "o").exists()
    monkeypatch.setenv("PKR_VAR_ssh_host", "")  # empty is not given, for Packer's null.ssh either
    assert _bake(tmp_path, "--only", "null.ssh")[0] == 2


def test_dry_run_refuses_an_unknown_variable(tmp_path: Path) -> None:
    code, out, err = _bake(tmp_path, "--only", "null.ssh", "--var", "ssh_host=192.0.2.10", "--var", "ssh_hots=1")
    assert code == 2, out + err
    assert "'ssh_hots' is not a variable of the templates (did you mean ssh_host?)" in err, err
    assert out == "" and not (tmp_path / "o").exists()


def test_a_misspelt_required_variable_gets_its_did_you_mean(tmp_path: Path) -> None:
    # docs/baking.md's own example: ssh_hots given, ssh_host missing; the misspelling is what to fix
    code, out, err = cli("bake", str(PROFILE), "-o", str(tmp_path / "o"), "--dry-run", "--only", "null.ssh",
                         "--var", "ssh_hots=10.0.0.5")
    assert code == 2, out + err
    assert "'ssh_hots' is not a variable of the templates (did you mean ssh_host?)" in err, err
    assert "needs --var" not in err and out == "" and not (tmp_path / "o").exists()


@pytest.mark.parametrize("only", [(), ("--only", "amazon-ebs")], ids=["no-only", "short-name"])
def test_the_sources_are_listed_one_a_line(tmp_path: Path, only: tuple[str, ...]) -> None:
    code, out, err = cli("bake", str(PROFILE), "-o", str(tmp_path / "o"), "--dry-run", *only)
    assert code == 2 and out == "", out + err
    assert "\\n" not in err, err  # a line break, not its escape
    listed = [line.split()[0] for line in err.splitlines() if line.startswith("  ")]
    assert listed == list(SOURCE_NAMES), err
    if only:
        assert "'amazon-ebs' is not a source (did you mean amazon-ebs.golden?)" in err, err


def test_an_echoed_source_name_cannot_add_a_line(tmp_path: Path) -> None:
    code, _, err = cli("bake", str(PROFILE), "-o", str(tmp_path / "o"), "--only", "x\nmigbake: baked")
    assert code == 2 and "'x\\nmigbake: baked' is not a source" in err, err
    assert not any(line.startswith("migbake: baked") for line in err.splitlines()), err


def test_dry_run_refuses_a_missing_var_file(tmp_path: Path) -> None:
    code, out, err = _bake(tmp_path, "--only", "null.ssh", "--var", "ssh_host=192.0.2.10",
                           "--var-file", str(tmp_path / "absent.pkrvars.hcl"))
    assert code == 2 and "absent.pkrvars.hcl" in err and "does not exist" in err, err
    assert out == "" and not (tmp_path / "o").exists()


def test_dry_run_fails_where_packer_validate_fails(tmp_path: Path) -> None:
    # a declared variable of the wrong type: only Packer itself can tell, and the dry run asks it
    code, out, err = _bake(tmp_path, "--only", "null.ssh", "--var", "ssh_host=192.0.2.10",
                           "--var", "ssh_port=twenty-two")
    assert code == 1, out + err
    assert "packer validate failed with exit code 1" in err and "ssh_port" in out, out + err
    assert not (tmp_path / "o").exists()
    # a variables file Packer cannot parse
    bad = tmp_path / "bad.pkrvars.hcl"
    bad.write_text("ssh_host = \n")
    code, out, err = _bake(tmp_path, "--only", "null.ssh", "--var-file", str(bad))
    assert code == 1 and "packer validate failed" in err, out + err


@pytest.mark.parametrize(("only", "plugins"), [
    (("amazon-ebs.golden",), ["amazon"]),
    (("null.ssh",), []),
    (("qemu.image", "amazon-ebs.golden", "null.ssh"), ["amazon", "qemu"]),  # in the order of SOURCES
    (("googlecompute.golden", "azure-arm.golden"), ["googlecompute", "azure"]),
], ids=["aws-only", "null-needs-none", "qemu-and-aws", "gcp-and-azure"])
def test_packer_init_installs_only_the_chosen_sources_plugins(only: tuple[str, ...], plugins: list[str]) -> None:
    steps = plan_bake(Path("/o/packer"), binary="packer", version=(1, 11, 2), only=only)
    assert [s.argv for s in steps if s.name == "init"] == [("packer", "init", f"/o/packer/plugins/{p}")
                                                          for p in plugins]
    assert not any(s.name == "init" for s in plan_bake(Path("/o/packer"), binary="packer", version=(1, 6, 6),
                                                       only=only))  # Packer 1.6: builders built in


def test_each_plugin_folder_requires_exactly_its_plugin() -> None:
    pk = IMAGES[0] / "generated/packer"
    assert sorted(p.name for p in (pk / "plugins").iterdir()) == sorted(PACKER_PLUGINS)
    assert sorted(s.plugin for s in SOURCES if s.plugin) == sorted(PACKER_PLUGINS)
    for plugin in PACKER_PLUGINS:
        folder = pk / "plugins" / plugin
        assert packer(["fmt", "-check", str(folder)]).rc == 0
        parsed = hcl_parse(folder / "required-plugins.pkr.hcl")
        required = parsed["packer"][0]["required_plugins"][0]  # type: ignore[index]
        assert [k for k in required if not k.startswith("__")] == [plugin], required
        assert required[plugin]["source"].strip('"') == f"github.com/hashicorp/{plugin}"


def test_amazon_ebs_encrypts_and_shares(tmp_path: Path) -> None:
    pk = IMAGES[0] / "generated/packer"
    defaults = json.loads(packer_console(pk, "jsonencode([var.encrypt_boot, var.kms_key_id, var.ami_regions, "
                                             "var.ami_users, var.region_kms_key_ids])"))
    assert defaults == [True, "", [], [], {}]  # encrypted by default, copied and shared nowhere
    sources = (pk / "sources.pkr.hcl").read_text()
    for arg in ("encrypt_boot", "kms_key_id", "region_kms_key_ids", "ami_regions", "ami_users"):
        assert f"  {arg} " in sources and f"var.{arg}" in sources, arg
    # what a production pipeline sets passes Packer's own validation of the builder
    varfile = tmp_path / "prod.pkrvars.hcl"
    varfile.write_text('kms_key_id = "alias/golden-ami"\nami_regions = ["eu-west-1", "us-west-2"]\n'
                       'region_kms_key_ids = { "eu-west-1" = "alias/golden-ami", "us-west-2" = "alias/golden-ami" }\n'
                       'ami_users = ["111122223333"]\n')
    ran = packer(["validate", "-only=amazon-ebs.golden", f"-var-file={varfile}", str(pk)])
    assert ran.rc == 0, ran.text
    # and Packer refuses a KMS key while encryption is off: the template passes encrypt_boot through
    ran = packer(["validate", "-only=amazon-ebs.golden", "-var=encrypt_boot=false", "-var=kms_key_id=alias/k", str(pk)])
    assert ran.rc == 0, ran.text  # kms_key_id is dropped (null) when encrypt_boot is false


def test_qemu_needs_a_base_image(tmp_path: Path) -> None:
    code, _, err = _bake(tmp_path, "--only", "qemu.image")
    assert code == 2 and "--var qemu_base_image=..." in err and "qemu_base_image_checksum" in err, err
    ran = packer_validate(IMAGES[0] / "generated/packer", "qemu.image")
    assert ran.rc == 0, ran.text


def test_outputs_packer_writes_the_rootfs_it_uploads(tmp_path: Path) -> None:
    out = tmp_path / "out"
    code, _, err = cli("generate", str(IMAGES[0] / "node-profile.yaml"), "-o", str(out), "--outputs", "packer")
    assert code == 0, err
    assert "wrote rootfs too" in err
    assert sorted(p.name for p in out.iterdir()) == [".migbake-output", "packer", "rootfs"]
    assert any((out / "rootfs").rglob("restore.sh"))
    ran = packer_validate(out / "packer", "qemu.image")
    assert ran.rc == 0, ran.text
    assert cli("generate", str(IMAGES[0] / "node-profile.yaml"), "-o", str(out), "--check")[0] == 0


PROVISIONERS = ("install-mig-parted.sh", "install-mig-restore.sh", "disable-mig-manager.sh")


@pytest.mark.parametrize("script", PROVISIONERS)
def test_a_provisioner_refuses_a_root_that_is_not_an_absolute_folder(script: str, tmp_path: Path) -> None:
    """--root is the only way to an offline root: a relative path or a missing folder is a usage error (exit 2)
    before anything runs. Any step past the options fails loudly here instead of touching this host: the tools
    are the test's own, and systemctl, install and the downloaders are stand-ins that exit 99."""
    tools = tmp_path / "tools"
    out = generate(f"""\
version: 1
name: rooted
gpus:
  - model: h200-141gb
    mig:
      layout: {{1g.18gb: 7}}
tools:
  nvidia_smi: {tools}/nvidia-smi
  nvidia_mig_parted: {tools}/nvidia-mig-parted
  nvidia_mig_parted_url: http://127.0.0.1:9/nvidia-mig-parted
  nvidia_mig_parted_sha256: {"a" * 64}
""", tmp_path / "out", node_root=True)  # the tools lie in the test's folder
    stand_ins = tmp_path / "bin"
    stand_ins.mkdir()
    for name in ("systemctl", "install", "curl", "wget"):
        (stand_ins / name).write_text("#!/bin/sh\nexit 99\n")
        (stand_ins / name).chmod(0o755)
    env = {"PATH": f"{stand_ins}:/usr/bin:/bin"}
    (tmp_path / "relative/path").mkdir(parents=True)  # it exists, seen from the working folder: still refused
    (tmp_path / "a-file").write_text("")
    name = script.removesuffix(".sh")
    argv = ["bash", str(out / "packer/scripts" / script)]
    for root, why in (("relative/path", "is not an absolute path"),
                      (str(tmp_path / "missing"), "is not an existing directory"),
                      (str(tmp_path / "a-file"), "is not an existing directory")):
        for given in (["--root", root], [f"--root={root}"]):
            ran = run([*argv, *given, str(out / "rootfs")], cwd=tmp_path, env=env)
            assert (ran.rc, ran.out, ran.err) == (2, "", f"{name}: error: --root {root} {why}\n"), ran.text
    usage = f"usage: {script} [--root DIR] [STAGING_DIR]"
    for bad, why in ((["--rot", "/"], "unknown option: --rot"), (["--root"], "--root needs a directory"),
                     (["a", "b"], "unexpected argument: b")):
        ran = run([*argv, *bad], cwd=tmp_path, env=env)
        assert (ran.rc, ran.out, ran.err) == (2, "", f"{usage} ({why})\n"), ran.text
    ran = run([*argv, "--help"], cwd=tmp_path, env=env)
    assert (ran.rc, ran.out) == (0, usage + "\n"), ran.text
    assert not (tmp_path / "missing").exists()
