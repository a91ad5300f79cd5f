"""NVIDIA's own configs import exactly, or are refused with a reason; import never makes a profile that
migbake itself rejects. Every imported config goes back out through generate, is judged by NVIDIA's
parser, and means the same to mig-parted as the original (same GPUs, indices, MIG mode, MIG devices).

The configs are tests/fixtures/nvidia-configs (Apache-2.0, NVIDIA: copies of ../shared/reference/
nvidia-configs, so a checkout without shared/ runs these tests), plus generated variations.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from realtools import assert_mig_parted_accepts
from support import REPO, shared_file

from migbake.gpu.catalog import GpuModel, load_catalog
from migbake.gpu.devicefilter import read_filter_id
from migbake.migparted.config import mig_parted_config_text
from migbake.node.importer import ImportRefused, import_config
from migbake.rules.validate import check_bytes

pytestmark = pytest.mark.filterwarnings("ignore:mypy_extensions.TypedDict is deprecated:DeprecationWarning")

NVIDIA_CONFIGS = REPO / "tests" / "fixtures" / "nvidia-configs"
CATALOG = load_catalog()


def config_text(path: Path) -> str:
    """The mig-parted config of an NVIDIA file: the file, or the config.yaml of a manifest's ConfigMap."""
    docs = list(yaml.safe_load_all(path.read_text(encoding="utf-8")))
    for doc in docs:
        if isinstance(doc, dict) and doc.get("kind") == "ConfigMap" and "config.yaml" in doc.get("data", {}):
            text: str = doc["data"]["config.yaml"]
            return text
    assert len(docs) == 1 and "mig-configs" in docs[0], path
    return path.read_text(encoding="utf-8")


def _all_configs() -> list[tuple[str, str]]:
    return [(p.name, str(name)) for p in sorted(NVIDIA_CONFIGS.glob("*.yaml"))
            for name in yaml.safe_load(config_text(p))["mig-configs"]]


ALL = _all_configs()


def model_for(entries: list[dict[str, Any]]) -> GpuModel | None:
    """The --model a user gives for a config whose entries have no device-filter: the first catalog GPU
    that has its profile names and counts (its owner in NVIDIA's file comments)."""
    if all("device-filter" in e for e in entries):
        return None
    for m in CATALOG.models:
        layouts = [e.get("mig-devices") or {} for e in entries]
        if all(all((p := m.profile(n)) and c <= p.max_count for n, c in lay.items()) for lay in layouts):
            return m
    return None


def semantics(entries: list[dict[str, Any]]) -> list[tuple[str, str, bool, str]]:
    """What each entry does to mig-parted, one row per PCI id it filters on ('*': any GPU): comparable."""
    rows = []
    for e in entries:
        f = e.get("device-filter") or []
        ids = [read_filter_id(x).pci or x for x in ([f] if isinstance(f, str) else f)] or ["*"]
        devices = "all" if e["devices"] == "all" else ",".join(map(str, e["devices"]))
        layout = ",".join(f"{k}={v}" for k, v in sorted((e.get("mig-devices") or {}).items()) if v)
        rows += [(i, devices, bool(e["mig-enabled"]), layout) for i in ids]
    return sorted(rows)


def round_trip(text: str, config: str, tmp_path: Path, model: GpuModel | None = None) -> str:
    """Import ``config`` of ``text``, generate it, check it with NVIDIA's parser, compare the meaning."""
    imported = import_config(text.encode(), "nvidia.yaml", config=config, model=model)
    checked = check_bytes(imported.text.encode(), "imported.yaml")
    assert checked.profile is not None, [p.format() for p in checked.problems]
    assert checked.profile.restore.config_name == config  # the name is kept, never renamed
    out = mig_parted_config_text(checked.profile)
    assert_mig_parted_accepts(out, [config], tmp_path / "round-trip.yaml")
    original = yaml.safe_load(text)["mig-configs"][config]
    assert semantics(yaml.safe_load(out)["mig-configs"][config]) == semantics(original)
    return imported.text


@pytest.mark.parametrize(("file", "config"), ALL, ids=[f"{f}:{c}" for f, c in ALL])
def test_every_nvidia_config_round_trips_exactly(file: str, config: str, tmp_path: Path) -> None:
    text = config_text(NVIDIA_CONFIGS / file)
    model = model_for(yaml.safe_load(text)["mig-configs"][config])
    round_trip(text, config, tmp_path, model)


def test_the_fixtures_are_nvidias_files() -> None:
    shared = shared_file(REPO.parent / "shared" / "reference" / "nvidia-configs")  # a failure in CI when absent
    for path in [*NVIDIA_CONFIGS.glob("*.yaml"), NVIDIA_CONFIGS / "LICENSE"]:
        assert path.read_bytes() == (shared / path.name).read_bytes(), path.name
    assert len(ALL) == 59  # 9 + 50 configs


# the minimal reproduction: one filter naming two models (H100 80GB and A100 80GB share names)
TWO_MODEL_FILTER = """\
version: v1
mig-configs:
  all-1g.10gb:
  - device-filter: ["0x233010DE", "0x20B210DE"]
    devices: all
    mig-enabled: true
    mig-devices: {"1g.10gb": 7}
"""

DGX_STATION = """\
version: v1
mig-configs:
  all-balanced-dgx-station-80:
    - device-filter: "0x20B210DE"
      devices: all
      mig-enabled: true
      mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}
    - device-filter: "0x1FB010DE"
      devices: all
      mig-enabled: false
      mig-devices: {}
"""


def test_one_filter_for_two_models_makes_no_yaml_alias(tmp_path: Path) -> None:
    profile = round_trip(TWO_MODEL_FILTER, "all-1g.10gb", tmp_path)
    assert "&id" not in profile and "*id" not in profile
    data = yaml.safe_load(profile)
    assert [(g["model"], g["pci_device_ids"]) for g in data["gpus"]] == [
        ("h100-80gb", ["0x233010DE"]), ("a100-80gb", ["0x20B210DE"])]


def test_a_gpu_without_mig_beside_mig_gpus(tmp_path: Path) -> None:
    profile = yaml.safe_load(round_trip(DGX_STATION, "all-balanced-dgx-station-80", tmp_path))
    assert profile["gpus"][1] == {"model": "dgx-display", "devices": "all", "pci_device_ids": ["0x1FB010DE"],
                                  "mig": {"enabled": False}}


def test_a_decimal_filter_is_read_as_mig_parted_reads_it(tmp_path: Path) -> None:
    text = TWO_MODEL_FILTER.replace('["0x233010DE", "0x20B210DE"]', '"590352606"')
    profile = round_trip(text, "all-1g.10gb", tmp_path)
    assert "'590352606' is read by mig-parted as the number 590352606" in profile and "0x233010DE" in profile
    assert yaml.safe_load(profile)["gpus"][0]["pci_device_ids"] == ["0x233010DE"]


def test_pre_production_gb200_names_import_with_model(tmp_path: Path) -> None:
    text = config_text(NVIDIA_CONFIGS / "mig-manager-example-hopper-blackwell.yaml")
    for config in ("all-3g.95gb", "all-4g.95gb", "all-7g.189gb"):
        profile = round_trip(text, config, tmp_path, CATALOG.find("gb200-189gb"))
        assert yaml.safe_load(profile)["gpus"][0]["model"] == "gb200-189gb"
    filtered = TWO_MODEL_FILTER.replace('["0x233010DE", "0x20B210DE"]', '"0x294110DE"')
    for name, model in (("3g.95gb", "gb200-189gb"), ("3g.93gb", "gb200-186gb")):  # one PCI id, two name sets
        profile = round_trip(filtered.replace('"1g.10gb": 7', f'"{name}": 2'), "all-1g.10gb", tmp_path)
        assert yaml.safe_load(profile)["gpus"][0]["model"] == model


REFUSED = {
    "name-with-spaces": ("version: v1\nmig-configs:\n  A100 prod layout:\n  - {devices: all, mig-enabled: false}\n",
                         "A100 prod layout", "import-config-name"),
    "name-is-a-boolean": ("version: v1\nmig-configs:\n  off:\n  - {devices: all, mig-enabled: false}\n",
                          "false", "yaml-key-type"),  # YAML 1.1 reads off as false: refused by the loader
    "mixed-filtered-and-not": (DGX_STATION.replace('    - device-filter: "0x1FB010DE"\n', "    -")
                               .replace("    -      devices: all", "    - devices: [3]"),
                               "all-balanced-dgx-station-80", "import-filter-mixed"),
    "layout-on-a-gpu-without-mig": (DGX_STATION.replace('mig-enabled: false\n      mig-devices: {}',
                                                        'mig-enabled: true\n      mig-devices: {}'),
                                    "all-balanced-dgx-station-80", "no-mig"),
}


@pytest.mark.parametrize("name", sorted(REFUSED), ids=sorted(REFUSED))
def test_what_a_profile_cannot_say_is_refused(name: str) -> None:
    text, config, rule = REFUSED[name]
    with pytest.raises(ImportRefused) as e:
        import_config(text.encode(), "nvidia.yaml", config=config, model=CATALOG.find("a100-80gb"))
    assert rule in [p.rule for p in e.value.problems], [p.format() for p in e.value.problems]


def test_a_name_is_never_renamed_to_current() -> None:
    with pytest.raises(ImportRefused) as e:
        import_config(REFUSED["name-with-spaces"][0].encode(), "nvidia.yaml", model=CATALOG.find("a100-80gb"))
    (p,) = e.value.problems
    assert "'A100 prod layout' cannot be a profile's restore.config_name" in p.message and p.line == 3


# --- generated variations: import never makes a profile migbake rejects -----------------------------

_IDS = sorted({i for m in (*CATALOG.models, *CATALOG.non_mig_gpus) for i in m.pci_device_ids})
# refusals about the config itself; never about the syntax or shape of the profile import wrote
_OWN_OUTPUT = ("yaml-", "schema-", "duplicate-key", "empty-file", "not-a-mapping")


@st.composite
def nvidia_like_configs(draw: st.DrawFn) -> str:
    entries = []
    for _ in range(draw(st.integers(1, 4))):
        ids = draw(st.lists(st.sampled_from(_IDS), min_size=1, max_size=3, unique=True))
        model = CATALOG.by_pci_id(ids[0])
        assert model is not None
        enabled = model.has_mig and draw(st.booleans())
        names = draw(st.lists(st.sampled_from(model.profile_names), max_size=2, unique=True)) if enabled else []
        layout = {n: draw(st.integers(1, 2)) for n in names}
        devices = draw(st.one_of(st.just("all"), st.lists(st.integers(0, 7), min_size=1, max_size=3, unique=True)))
        entries.append({"device-filter": ids if len(ids) > 1 or draw(st.booleans()) else ids[0],
                        "devices": devices, "mig-enabled": enabled, "mig-devices": layout})
    return str(yaml.safe_dump({"version": "v1", "mig-configs": {"current": entries}}, sort_keys=False))


@settings(max_examples=150, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=nvidia_like_configs())
def test_import_never_makes_a_profile_migbake_rejects(text: str, tmp_path: Path) -> None:
    try:
        round_trip(text, "current", tmp_path)
    except ImportRefused as e:
        for p in e.problems:
            assert p.file == "nvidia.yaml" and p.line >= 1 and not p.rule.startswith(_OWN_OUTPUT), p.format()


def test_a_dgx_station_node_passes_preflight_with_its_display_gpu() -> None:
    from migbake.node.nvidiasmi import Capture, Gpu
    from migbake.node.preflight import check_capture

    checked = check_bytes(import_config(DGX_STATION.encode(), "nvidia.yaml").text.encode(), "p.yaml")
    assert checked.profile is not None
    gpus = (*(Gpu(i, "A100-SXM4-80GB", "0x20B210DE", "Enabled", ("3g.40gb", "2g.20gb", "1g.10gb", "1g.10gb"))
              for i in (0, 1, 2, 4)), Gpu(3, "DGX Display", "0x1FB010DE", "[N/A]"))
    result = check_capture(checked.profile, Capture("nvidia-smi-csv", "station.csv", gpus))
    assert result.ready and all(c.status in ("PASS", "SKIP") for c in result.checks), result
