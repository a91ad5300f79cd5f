"""Shared fixtures of the VM tier: the OUT directory under test and the once-per-session boot assets."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from vm_support import SAMPLE_OUT, live_boot_lines_of, require_vm_host

if TYPE_CHECKING:  # a test module of this folder that needs the boot test imports needs_boottest first
    from migbake_boottest import BootAssets


@pytest.fixture(scope="session")
def out_dir() -> Path:
    """The migbake output under test: $MIGBAKE_BOOTTEST_OUT, else images/h200-inference/generated.

    Swap this fixture (or set the variable) to point the tier at real generated output.
    """
    chosen = Path(os.environ.get("MIGBAKE_BOOTTEST_OUT") or SAMPLE_OUT)
    if not (chosen / "rootfs").is_dir():
        pytest.fail(f"{chosen} does not look like a migbake output directory")
    return chosen


@pytest.fixture(scope="session")
def boot_assets() -> Iterator[BootAssets]:
    """The cached rootfs and kernel (debootstrap ~60 s and ~5 s when cold), built once per session.

    MIGBAKE_FORCE_REBUILD=1 rebuilds both.
    """
    from migbake_boottest import BootTestError, prepare_assets

    require_vm_host()
    try:
        yield prepare_assets(force_rebuild=os.environ.get("MIGBAKE_FORCE_REBUILD") == "1", log=print)
    except BootTestError as exc:
        pytest.fail(f"cannot prepare the boot assets: {exc}")


@pytest.fixture(scope="session", autouse=True)
def live_boot_lines(pytestconfig: pytest.Config) -> Iterator[None]:
    """One line per boot as it ends, shown at once (vm_support.LiveBootLines), also under pytest-xdist."""
    with live_boot_lines_of(pytestconfig):
        yield
