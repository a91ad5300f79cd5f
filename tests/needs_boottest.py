"""Imported by every test of the boot test (the migbake-boottest distribution, generator/boottest) before it imports
``migbake_boottest``: where that distribution is not installed, the importing test module (or the test that
imports this inside itself) is skipped with how to install it; in CI (CI=true), where every test runs, it fails.
"""

from __future__ import annotations

import os

import pytest

INSTALL = "pip install -e ./generator/boottest"

try:
    import migbake_boottest  # noqa: F401
except ModuleNotFoundError:
    if os.environ.get("CI") == "true":
        raise
    pytest.skip(f"the boot test (migbake-boottest) is not installed: {INSTALL}", allow_module_level=True)
