"""migbake's JSON Schemas, shipped as the package ``migbake.schemas`` (pyproject maps it to this folder)."""
