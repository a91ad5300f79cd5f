"""The docs stay true to the tree: a short README, links that resolve, the module map of CONTRIBUTING.md,
what docs/reference/generate.py writes up to date (every profile key, every rule id, and from the declared
targets the schema's outputs enum, docs/output-tree.md's table and README's list of outputs), each target's
doc page, and docs/output-tree.md's tree the one `generate` writes, its folders the declared targets'."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
from support import IMAGES, REPO, cli

from migbake.render.tree import TARGETS, Target, always

PACKAGE = REPO / "generator" / "migbake"
PAGES = [REPO / "README.md", REPO / "CONTRIBUTING.md", REPO / "CHANGELOG.md", *sorted((REPO / "docs").rglob("*.md"))]


def test_readme_is_a_front_door() -> None:
    text = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(text.splitlines()) <= 300
    for heading in ("## Two commands", "## Usage", "## A first profile", "## Documentation"):
        assert heading in text, heading


def _links(page: Path) -> list[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    return [m for m in re.findall(r"\]\(([^)\s]+)\)", text) if not re.match(r"[a-z]+:", m)]


def _anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
    heads = re.findall(r"^#+ (.+)$", text, re.M)
    return {re.sub(r"[^\w\- ]", "", h.lower()).replace(" ", "-") for h in heads}


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    broken = []
    for link in _links(page):
        path, _, anchor = link.partition("#")
        target = (page.parent / path).resolve() if path else page
        if not target.exists() or (anchor and target.suffix == ".md" and anchor not in _anchors(target)):
            broken.append(link)
    assert broken == []


def test_contributing_module_map_lists_exactly_the_modules_in_the_tree() -> None:
    text = (REPO / "CONTRIBUTING.md").read_text(encoding="utf-8")
    listed = set(re.findall(r"^\| `([\w/]+\.py)` \|", text, re.M))
    present = {p.relative_to(PACKAGE).as_posix() for p in PACKAGE.rglob("*.py")}
    assert sorted(present - listed) == [], "modules missing from CONTRIBUTING.md's module map"
    assert sorted(listed - present) == [], "CONTRIBUTING.md's module map lists modules that are gone"


def test_generated_references_are_up_to_date() -> None:
    run = subprocess.run([sys.executable, str(REPO / "docs" / "reference" / "generate.py"), "--check"],
                         capture_output=True, text=True)
    assert run.returncode == 0, run.stderr


def test_the_reference_check_notices_a_stale_page(tmp_path: Path) -> None:
    page = REPO / "docs" / "reference" / "rules.md"
    saved = page.read_bytes()
    try:
        page.write_text(saved.decode() + "stale\n")
        run = subprocess.run([sys.executable, str(REPO / "docs" / "reference" / "generate.py"), "--check"],
                             capture_output=True, text=True)
        assert run.returncode == 1 and "rules.md is stale" in run.stderr
    finally:
        page.write_bytes(saved)


def _generator() -> ModuleType:
    """docs/reference/generate.py, imported (it is a script, not a module of the package)."""
    spec = importlib.util.spec_from_file_location("reference_generate", REPO / "docs" / "reference" / "generate.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


NEW = Target("example-new", ("example-new",), TARGETS[0].render, doc="a target declared and not documented",
             page="docs/output-tree.md", tests="tests/test_docs.py")


def test_what_the_targets_declare_is_generated_where_it_is_said() -> None:
    # the schema's outputs enum, the table of docs/output-tree.md and README's list come from TARGETS:
    # a declaration they do not say yet makes them stale, and a hand edit is undone
    gen = _generator()
    schema = (REPO / "schemas" / "node-profile.schema.json").read_text(encoding="utf-8")
    tree = (REPO / "docs" / "output-tree.md").read_text(encoding="utf-8")
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert (gen.schema_outputs(schema), gen.targets_table(tree), gen.readme_outputs(readme)) == (schema, tree, readme)
    more = (*TARGETS, NEW)
    new_schema = json.loads(gen.schema_outputs(schema, more))["properties"]["outputs"]["items"]
    assert new_schema["enum"][-1] == "example-new" and new_schema["description"].endswith(" or example-new.")
    assert "\n| `example-new` | `example-new/` | - | every profile | a target declared and not documented | " \
        "[output-tree.md](output-tree.md) | [test_docs.py](../tests/test_docs.py) |\n" in gen.targets_table(tree, more)
    assert readme_outputs(gen.readme_outputs(readme, more))[0] == readme_outputs(readme)[0] | {"example-new"}
    edited = readme.replace(" cluster-api)", ")", 1)
    assert edited != readme and gen.readme_outputs(edited) == readme
    with pytest.raises(SystemExit, match="markers"):
        gen.targets_table(tree.replace(gen.TABLE_END, ""))


def page_problems(targets: tuple[Target, ...], readme: str) -> list[str]:
    """The targets whose doc page (``page``) does not exist or README's documentation does not link."""
    found = []
    for t in targets:
        if not (REPO / t.page).is_file():
            found.append(f"{t.name}: {t.page} does not exist")
        elif f"]({t.page})" not in readme:
            found.append(f"{t.name}: README.md does not link {t.page}")
    return found


def test_every_target_has_a_doc_page_the_readme_links() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert page_problems(TARGETS, readme) == []
    pages = (dataclasses.replace(NEW, page="docs/nowhere.md"), dataclasses.replace(NEW, page="docs/dra.md"))
    assert page_problems(pages, readme.replace("](docs/dra.md)", "](docs/dra.md#x)")) == [
        "example-new: docs/nowhere.md does not exist", "example-new: README.md does not link docs/dra.md"]


# a consumer's unit name, a Packer plugin, a GPU model's key, an OpenShift pool
_PLACEHOLDERS = {"NAME": r"[^/]+", "PLUGIN": r"[^/]+", "MODEL": r"[^/]+", "ROLE": r"[^/]+"}


def documented_tree(text: str) -> list[tuple[str, bool]]:
    """The paths of docs/output-tree.md's tree (relative to OUT), each with whether it is a folder.

    One path a line: its indentation (2 a level) says in which folder; a line indented 40 or more
    continues the description above.
    """
    block = text.split("```text\nOUT/\n", 1)[1].split("```", 1)[0]
    folders: list[str] = []
    found = []
    for line in block.splitlines():
        indent = len(line) - len(line.lstrip(" "))
        if not line.strip() or indent >= 40:
            continue
        assert indent % 2 == 0, line
        folders = folders[: indent // 2 - 1]
        token = line.split()[0]
        path = "".join(folders) + token
        found.append((path.rstrip("/"), token.endswith("/")))
        if token.endswith("/"):
            folders.append(token)
    return found


def _pattern(path: str) -> re.Pattern[str]:
    text = re.escape(path)
    for name, allowed in _PLACEHOLDERS.items():
        text = text.replace(name, allowed)
    return re.compile(text)


def tree_drift(text: str, generated: set[str]) -> tuple[list[str], list[str]]:
    """The generated paths docs/output-tree.md's ``text`` does not document, and the documented ones none has."""
    documented = documented_tree(text)
    files = [_pattern(path) for path, folder in documented if not folder]
    leaves = [path for path, folder in documented  # a folder listed without its files stands for them all
              if folder and not any(other.startswith(path + "/") for other, _ in documented)]
    undocumented = sorted(g for g in generated
                          if not any(f.fullmatch(g) for f in files) and not any(g.startswith(f + "/") for f in leaves))
    absent = sorted(path for path, folder in documented
                    if not any(_pattern(path).fullmatch(g) or (folder and g.startswith(path + "/")) for g in generated))
    return undocumented, absent


def _generated(tmp_path: Path) -> set[str]:
    """Every path of the example images' committed trees, of one generated with the user-data options, of one
    with tools.nvidia_mig_parted_url, and of the valid cases (the outputs only some profiles get: DRA claims,
    per-model Slurm files, ...)."""
    part = tmp_path / "part.sh"
    part.write_text("#!/bin/sh\necho hi\n")
    code, _, err = cli("generate", str(IMAGES[0] / "node-profile.yaml"), "-o", str(tmp_path / "out"),
                       "--user-data-gzip", "--user-data-mime", str(part))
    assert code == 0, err
    trees = [*(image / "generated" for image in IMAGES), tmp_path / "out"]
    # tools.nvidia_mig_parted_url: Packer's install-mig-parted.sh
    fetch = tmp_path / "fetch.yaml"
    h200 = next(i for i in IMAGES if i.name == "h200-inference")
    fetch.write_text((h200 / "node-profile.yaml").read_text(encoding="utf-8").replace(
        "  nvidia_mig_parted: /usr/bin/nvidia-mig-parted\n", "  nvidia_mig_parted: /usr/bin/nvidia-mig-parted\n"
        "  nvidia_mig_parted_url: https://downloads.example.com/nvidia-mig-parted\n"
        f"  nvidia_mig_parted_sha256: {'a' * 64}\n", 1), encoding="utf-8")
    code, _, err = cli("generate", str(fetch), "-o", str(tmp_path / "fetch"))
    assert code == 0 and "nvidia_mig_parted_url" in fetch.read_text(encoding="utf-8"), err
    trees.append(tmp_path / "fetch")
    for case in sorted((REPO / "tests" / "cases" / "valid").glob("*/node-profile.yaml")):
        out = tmp_path / "cases" / case.parent.name
        code, _, err = cli("generate", str(case), "-o", str(out))
        assert code == 0, (case, err)
        trees.append(out)
    return {p.relative_to(tree).as_posix() for tree in trees for p in tree.rglob("*") if p.is_file()}


def test_the_documented_output_tree_is_the_generated_one(tmp_path: Path) -> None:
    undocumented, absent = tree_drift((REPO / "docs" / "output-tree.md").read_text(encoding="utf-8"),
                                      _generated(tmp_path))
    assert undocumented == [], "generated, but not in docs/output-tree.md"
    assert absent == [], "in docs/output-tree.md, but no example image has it"


def test_the_output_tree_check_notices_drift(tmp_path: Path) -> None:
    text = (REPO / "docs" / "output-tree.md").read_text(encoding="utf-8")
    generated = _generated(tmp_path)
    # what the page said before issue 36: one plugins file, no slurm/ and no nodeadm drop-in
    old = text.replace("    plugins/PLUGIN/required-plugins.pkr.hcl\n", "    plugins/required-plugins.pkr.hcl\n")
    old = re.sub(r"  slurm/ .*\n(    .*\n)+", "", old)
    old = re.sub(r"    etc/eks/nodeadm.d/.*\n( {44}.*\n)+", "", old)
    undocumented, absent = tree_drift(old, generated)
    assert absent == ["packer/plugins/required-plugins.pkr.hcl"], absent
    assert "slurm/gres.conf" in undocumented and "rootfs/etc/eks/nodeadm.d/50-migbake-node-labels.yaml" in undocumented
    assert "packer/plugins/amazon/required-plugins.pkr.hcl" in undocumented


def readme_outputs(text: str) -> tuple[set[str], set[str]]:
    """The output folders README's usage says ``generate`` writes: those every profile gets, and those it
    writes as the profile asks (``write the output tree (A, B, and as the profile asks C, D)``)."""
    block = text.split("## Usage", 1)[1].split("```text\n", 1)[1].split("```", 1)[0].splitlines()
    start = next(i for i, line in enumerate(block) if line.startswith("migbake generate PROFILE -o OUT "))
    right = " ".join(line[38:] for line in block[start:start + 6])
    listed = right.split("write the output tree (", 1)[1].split(")", 1)[0]
    every, _, asked = listed.partition("and as the profile asks")
    return set(re.findall(r"[a-z][a-z-]*", every)), set(re.findall(r"[a-z][a-z-]*", asked))


def outputs_drift(readme: str, tree: str, targets: tuple[Target, ...]) -> list[str]:
    """Where README's list of outputs or docs/output-tree.md's top folders disagree with the declared targets."""
    every = {f for t in targets if t.applies is always for f in t.folders}
    asked = {f for t in targets for f in t.folders} - every
    said_every, said_asked = readme_outputs(readme)
    top = {path.split("/")[0] for path, _ in documented_tree(tree)} - {".migbake-output"}
    drift = [f"README.md: {f}/ is declared (render/tree.py) and not in generate's list" for f in
             sorted((every | asked) - said_every - said_asked)]
    drift += [f"README.md: {f} is in generate's list and no declared target writes it" for f in
              sorted((said_every | said_asked) - every - asked)]
    drift += [f"README.md: {f}/ is written for every profile: list it before 'and as the profile asks'" for f in
              sorted(every & said_asked)]
    drift += [f"README.md: {f}/ is written only as the profile asks: list it after 'and as the profile asks'"
              for f in sorted(asked & said_every)]
    drift += [f"docs/output-tree.md: {f}/ is declared and not documented" for f in sorted((every | asked) - top)]
    drift += [f"docs/output-tree.md: {f} is documented and no declared target writes it" for f in
              sorted(top - every - asked)]
    return drift


def test_readme_and_the_output_tree_name_the_declared_targets() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    tree = (REPO / "docs" / "output-tree.md").read_text(encoding="utf-8")
    assert outputs_drift(readme, tree, TARGETS) == []


def test_the_declared_outputs_check_notices_drift() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    tree = (REPO / "docs" / "output-tree.md").read_text(encoding="utf-8")
    assert outputs_drift(readme, tree, (*TARGETS, NEW)) == [
        "README.md: example-new/ is declared (render/tree.py) and not in generate's list",
        "docs/output-tree.md: example-new/ is declared and not documented"]
    gone = tuple(t for t in TARGETS if t.name != "bottlerocket")
    assert outputs_drift(readme, tree, gone) == [
        "README.md: bottlerocket is in generate's list and no declared target writes it",
        "docs/output-tree.md: bottlerocket is documented and no declared target writes it"]
    # README's list as it would be if butane applied only as the profile asks
    asked = tuple(dataclasses.replace(t, applies=lambda plan: True) if t.name == "butane" else t for t in TARGETS)
    moved = _generator().readme_outputs(readme, asked)
    assert readme_outputs(moved)[1] == readme_outputs(readme)[1] | {"butane"}
    assert outputs_drift(moved, tree, TARGETS) == [
        "README.md: butane/ is written for every profile: list it before 'and as the profile asks'"]


def test_the_pages_on_cdi_say_the_order_the_unit_has() -> None:
    # docs/real-nodes.md once gave the refresh's old After=multi-user.target as the reason for --no-block,
    # while the unit is Before= the refresh (issue 36): both pages say what the generated unit says
    unit = (IMAGES[0] / "generated/rootfs/etc/systemd/system/nvidia-mig-restore.service").read_text()
    assert "\nBefore=nvidia-cdi-refresh.service\n" in unit
    script = (IMAGES[0] / "generated/rootfs/etc/nvidia-mig/restore.sh").read_text()
    assert "systemctl restart --no-block nvidia-cdi-refresh.service" in script
    for page in ("real-nodes.md", "kubernetes.md"):
        text = " ".join((REPO / "docs" / page).read_text(encoding="utf-8").split())
        assert "`Before=nvidia-cdi-refresh.service`" in text, page
        assert "it is `After=multi-user.target`" not in text, page


def test_boot_test_page_says_when_kvm_is_used() -> None:
    # it promised "15-20 s under TCG" while a TCG boot here takes 75-240 s (issue 36): it now says when
    # QEMU gets KVM, in kvm_usable's own terms, and what TCG costs
    import inspect

    from migbake.boottest.vm import qemu

    text = " ".join((REPO / "docs" / "boot-test.md").read_text(encoding="utf-8").split())
    source = inspect.getsource(qemu.kvm_usable)
    for condition in ("/dev/kvm", "kvm_pvm", "vmx", "svm"):
        assert condition in source and condition in text, condition
    assert "-accel kvm" in text and "-accel tcg" in text and "15-20 s under TCG" not in text


def test_every_option_the_readme_usage_names_is_one_of_its_command() -> None:
    # the README's usage block is kept by hand: an option renamed or dropped in a command must not live on there
    block = (REPO / "README.md").read_text(encoding="utf-8").split("## Usage", 1)[1].split("```text\n", 1)[1]
    block = block.split("```", 1)[0]
    named: dict[str, set[str]] = {}
    command = ""
    for line in block.splitlines():
        words = line.split()
        if words[:1] == ["migbake"] and len(words) > 1:
            command = "" if words[1].startswith("-") else words[1]
        usage = line[:38]  # the left column; the right column is prose that may name other commands' options
        named.setdefault(command, set()).update(re.findall(r"(--[a-z][a-z-]*)", usage))
    assert len(named) >= 10, named
    for command, options in sorted(named.items()):
        code, out, err = cli(*([command] if command else []), "--help")
        assert code == 0, (command, err)
        missing = sorted(o for o in options if o not in out and o not in ("--help",))
        assert missing == [], f"migbake {command}: {missing}"


def test_boot_test_page_names_the_tcg_kernel_arguments() -> None:
    from migbake.boottest.vm import qemu

    text = " ".join((REPO / "docs" / "boot-test.md").read_text(encoding="utf-8").split())
    assert f"`{qemu.TCG_KERNEL_ARGS.strip()}`" in text
