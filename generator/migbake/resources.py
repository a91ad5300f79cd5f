"""Where migbake's templates, schemas and data files live, installed or in a source checkout.

In a wheel, ``templates/`` and ``schemas/`` are shipped as the packages ``migbake.templates`` and
``migbake.schemas``; in a source checkout (or an editable install) they are the top-level folders of
the repository. Nothing else in migbake knows these paths.
"""

from __future__ import annotations

from functools import lru_cache
from importlib import resources
from pathlib import Path

SCHEMA_FILE = "node-profile.schema.json"
_CHECKOUT = Path(__file__).resolve().parents[2]


def _dir(package: str, folder: str) -> Path:
    try:
        found = resources.files(package)
        path = Path(str(found))
        if path.is_dir() and any(path.iterdir()):
            return path
    except (ModuleNotFoundError, TypeError, ValueError):
        pass
    return _CHECKOUT / folder


@lru_cache(maxsize=1)
def templates_dir() -> Path:
    """The folder of Jinja2 templates (``templates/``)."""
    return _dir("migbake.templates", "templates")


@lru_cache(maxsize=1)
def schemas_dir() -> Path:
    """The folder of JSON Schemas (``schemas/``)."""
    return _dir("migbake.schemas", "schemas")


def schema_path() -> Path:
    """The node-profile JSON Schema."""
    return schemas_dir() / SCHEMA_FILE


def catalog_text() -> str:
    """The packaged GPU catalog, as JSON text."""
    return (Path(__file__).parent / "data" / "mig-catalog.json").read_text(encoding="utf-8")
