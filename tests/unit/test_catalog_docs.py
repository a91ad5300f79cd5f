"""The schema follows the catalog (its model examples are the catalog's ids), every schema property has a
description, and docs/profile.md names every top-level key. docs/catalog.md's table of GPU models is written
by docs/reference/generate.py."""

from __future__ import annotations

import json

import pytest
from support import REPO

from migbake.gpu.catalog import load_catalog


def test_schema_model_examples_are_the_catalog_ids() -> None:
    schema = json.loads((REPO / "schemas/node-profile.schema.json").read_text())
    model = schema["properties"]["gpus"]["items"]["properties"]["model"]
    assert model["examples"] == list(load_catalog().keys)


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
