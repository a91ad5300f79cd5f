"""Boot tests: install migbake's output into a real Debian image, boot it under QEMU, check the claims.

Test-only machinery (simulated NVIDIA tools, fake kubelet) goes into the guest image, never on the host.
Entry point: ``run_boot_test``; ``prepare_assets`` builds the cached rootfs and kernel once.
"""

from migbake.boottest.claims import Claim
from migbake.boottest.errors import BootTestError
from migbake.boottest.run import BootAssets, BootOutcome, BootTestResult, prepare_assets, run_boot_test

__all__ = ["BootAssets", "BootOutcome", "BootTestError", "BootTestResult", "Claim", "prepare_assets",
           "run_boot_test"]
