"""Where migbake's templates, schemas and data files live, installed or in a source checkout.

In a wheel, ``templates/`` and ``schemas/`` are shipped as the packages ``migbake.templates`` and
``migbake.schemas``; in a source checkout (or an editable install) they are the top-level folders of
the repository. Nothing else in migbake knows these paths.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

SCHEMA_FILE = "node-profile.schema.json"
CATALOG_SCHEMA_FILE = "mig-catalog.schema.json"
_CHECKOUT = Path(__file__).resolve().parents[2]


def _dir(folder: str) -> Path:
    # installed from a wheel: migbake/<folder>; source checkout or editable install: <repo>/<folder>
    for candidate in (Path(__file__).resolve().parent / folder, _CHECKOUT / folder):
        if candidate.is_dir():
            return candidate
    raise FileNotFoundError(f"migbake's {folder}/ folder is missing from this installation")


@lru_cache(maxsize=1)
def templates_dir() -> Path:
    """The folder of Jinja2 templates (``templates/``)."""
    return _dir("templates")


@lru_cache(maxsize=1)
def schemas_dir() -> Path:
    """The folder of JSON Schemas (``schemas/``)."""
    return _dir("schemas")


def schema_path() -> Path:
    """The node-profile JSON Schema."""
    return schemas_dir() / SCHEMA_FILE


def catalog_schema_path() -> Path:
    """The JSON Schema of a GPU catalog file (the packaged catalog and --catalog files)."""
    return schemas_dir() / CATALOG_SCHEMA_FILE


def catalog_text() -> str:
    """The packaged GPU catalog, as JSON text."""
    return (Path(__file__).parent / "gpu" / "data" / "mig-catalog.json").read_text(encoding="utf-8")


def managed_text() -> str:
    """What managed node pools and Bottlerocket express natively (``gpu/data/managed-mig.json``), as JSON text."""
    return (Path(__file__).parent / "gpu" / "data" / "managed-mig.json").read_text(encoding="utf-8")


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The node-profile JSON Schema, parsed."""
    data: dict[str, Any] = json.loads(schema_path().read_text(encoding="utf-8"))
    return data


@lru_cache(maxsize=1)
def load_catalog_schema() -> dict[str, Any]:
    """The GPU catalog JSON Schema, parsed."""
    data: dict[str, Any] = json.loads(catalog_schema_path().read_text(encoding="utf-8"))
    return data
