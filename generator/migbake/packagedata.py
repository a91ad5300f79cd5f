"""migbake's package data, read through ``importlib.resources``: the JSON Schemas (``migbake.schemas``) and the GPU
data files (``migbake.gpu.data``); the Jinja2 templates are the package ``migbake.templates`` (render.environment).

pyproject maps ``migbake.templates`` and ``migbake.schemas`` to the repository's top-level templates/ and schemas/
folders: a wheel ships them inside the package, and an editable install imports them from the checkout.
"""

from __future__ import annotations

import json
from functools import lru_cache
from importlib.resources import files
from typing import Any


def _text(package: str, name: str) -> str:
    return (files(package) / name).read_text(encoding="utf-8")


def catalog_text() -> str:
    """The packaged GPU catalog, as JSON text."""
    return _text("migbake.gpu.data", "mig-catalog.json")


def managed_text() -> str:
    """What managed node pools and Bottlerocket express natively (``gpu/data/managed-mig.json``), as JSON text."""
    return _text("migbake.gpu.data", "managed-mig.json")


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The node-profile JSON Schema, parsed."""
    data: dict[str, Any] = json.loads(_text("migbake.schemas", "node-profile.schema.json"))
    return data


@lru_cache(maxsize=1)
def load_catalog_schema() -> dict[str, Any]:
    """The JSON Schema of a GPU catalog file (the packaged catalog and --catalog files), parsed."""
    data: dict[str, Any] = json.loads(_text("migbake.schemas", "mig-catalog.schema.json"))
    return data
