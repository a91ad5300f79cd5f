"""One source of truth for GPU facts: the schema's model examples and the README follow the catalog."""

from __future__ import annotations

import json
import re

import pytest
from support import REPO, CliRunner

from migbake.cli.group import main
from migbake.gpu.catalog import load_catalog


def test_schema_model_examples_are_the_catalog_ids() -> None:
    schema = json.loads((REPO / "schemas/node-profile.schema.json").read_text())
    model = schema["properties"]["gpus"]["items"]["properties"]["model"]
    assert model["examples"] == list(load_catalog().keys)


def test_docs_gpu_table_is_what_migbake_gpus_prints() -> None:
    readme = (REPO / "docs" / "catalog.md").read_text()
    block = re.search(r"<!-- gpu-models:[^>]*-->\n(.*?)<!-- /gpu-models -->", readme, re.S)
    assert block, "docs/catalog.md has no gpu-models block"
    printed = CliRunner().invoke(main, ["gpus", "--markdown"]).stdout
    assert block.group(1) == printed, "docs/catalog.md's GPU table is stale: paste `migbake gpus --markdown` into it"


@pytest.mark.parametrize("name", ["node-profile.schema.json", "mig-catalog.schema.json"])
def test_every_schema_property_has_a_description(name: str) -> None:
    schema = json.loads((REPO / "schemas" / name).read_text())

    def walk(node: object, path: str) -> list[str]:
        missing: list[str] = []
        if isinstance(node, dict):
            for name, sub in node.get("properties", {}).items():
                if "description" not in sub:
                    missing.append(f"{path}/{name}")
                missing += walk(sub, f"{path}/{name}")
            for key in ("items", "additionalProperties"):
                if isinstance(node.get(key), dict):
                    missing += walk(node[key], f"{path}/{key}")
            for sub in node.get("oneOf", []):
                missing += walk(sub, path)
        return missing

    assert walk(schema, "") == []


def test_docs_document_every_top_level_profile_key() -> None:
    schema = json.loads((REPO / "schemas/node-profile.schema.json").read_text())
    readme = (REPO / "docs" / "profile.md").read_text()
    for key in schema["properties"]:
        assert f"`{key}" in readme, key
