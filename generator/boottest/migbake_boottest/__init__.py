"""Boot tests: install migbake's output into a real Debian image, boot it under QEMU, check the claims.

Test-only machinery (simulated NVIDIA tools, fake kubelet) goes into the guest image, never on the host.
Entry points: ``plan(profile, ...)`` then ``run(plan)`` (what ``migbake boot-test`` calls); one run:
``run_boot_test``; ``prepare_assets`` builds the cached rootfs and kernel once. Its parts:
``vm/`` (rootfs, kernel, images, QEMU, a Packer build into a rootfs), ``scenarios/`` (each scenario family
beside its claims), ``simgpu/`` (the simulated GPU in C), ``guest/`` (files installed into the guest only);
``run`` (one boot test end to end), ``hostrun`` (host commands), ``guestreport`` (what a guest left behind).

A distribution of its own (migbake-boottest, test-only: README.md beside this package), never in migbake's wheel.
May import migbake's library (render, node, rules, ...); only ``command`` (the ``migbake boot-test`` command, found
through its entry point) imports ``migbake.commands.common``; nothing of migbake imports this package.
"""

from migbake_boottest.errors import BootTestError
from migbake_boottest.run import BootAssets, BootOutcome, BootTestResult, prepare_assets, run_boot_test
from migbake_boottest.scenarios.claims import Claim
from migbake_boottest.session import BootPlan, check_host, host_tools, plan, run

__all__ = [
           "BootAssets",
           "BootOutcome",
           "BootPlan",
           "BootTestError",
           "BootTestResult",
           "Claim",
           "check_host",
           "host_tools",
           "plan",
           "prepare_assets",
           "run",
           "run_boot_test",
]
