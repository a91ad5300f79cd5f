"""Building the simulated GPU (``simgpu/``, C) with the system compiler, for a guest image or a host test.

Two outputs: ``libnvidia-ml.so.1`` (the fake NVML that NVIDIA's real nvidia-mig-parted loads by name)
and ``nvidia-smi`` (the simulated tool over the same state). Test-only: see ``simgpu/README.md``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from migbake_boottest.hostrun import Log, no_log, require_tools, run

SIMGPU_SOURCES = Path(__file__).parent
LIBRARY = "libnvidia-ml.so.1"
CFLAGS = ("-std=gnu11", "-O2", "-Wall", "-Wextra", "-Werror")


@dataclass(frozen=True)
class SimGpuBuild:
    """The compiled simulated GPU."""

    library: Path
    nvidia_smi: Path


def compile_simgpu(out_dir: Path, *, log: Log = no_log) -> SimGpuBuild:
    """Compile the fake NVML library and the simulated nvidia-smi into ``out_dir`` with ``gcc``."""
    require_tools("gcc")
    out_dir.mkdir(parents=True, exist_ok=True)
    library, smi = out_dir / LIBRARY, out_dir / "nvidia-smi"
    state = SIMGPU_SOURCES / "state.c"
    # -fvisibility=hidden: only the NVML entry points (marked EXPORT) leave the library
    run(["gcc", *CFLAGS, "-shared", "-fPIC", "-fvisibility=hidden", f"-Wl,-soname,{LIBRARY}", "-o", library,
         SIMGPU_SOURCES / "nvml.c", SIMGPU_SOURCES / "nvml_info.c", state], log=log)
    run(["gcc", *CFLAGS, "-o", smi, SIMGPU_SOURCES / "nvidia-smi.c", state], log=log)
    return SimGpuBuild(library, smi)
