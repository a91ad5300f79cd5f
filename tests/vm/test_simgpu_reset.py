"""The simulated GPU's MIG mode query and the knobs of the Ampere reboot scenarios, on the host (no VM).

``nvidia-smi --query-gpu=index,mig.mode.current,mig.mode.pending --format=csv,noheader`` is how the
generated restore.sh sees a pending mode change; ``reset-fails`` (a GPU reset is refused, as in a
passthrough VM) and ``pending-forever`` (the change never takes effect) drive the boot-test scenarios
``ampere-pending`` and ``ampere-pending-stuck``, under NVIDIA's real nvidia-mig-parted.
"""

from __future__ import annotations

from pathlib import Path

import test_simgpu
from test_simgpu import A100, H200, SEVEN, NodeFactory

build, make_node = test_simgpu.build, test_simgpu.make_node  # the fixtures of the simulated node

QUERY = ("nvidia-smi", "--query-gpu=index,mig.mode.current,mig.mode.pending", "--format=csv,noheader")
TWO = [{"1g.10gb": 7}, {"3g.40gb": 2}]


def reboot(root: Path) -> None:
    """What the simulated GPU sees at the next boot: state files stamped with another boot id."""
    for name in ("var/mig-mode", "run/instances"):
        state = root / name
        if state.exists():
            lines = state.read_text().splitlines()
            state.write_text("\n".join(["boot 00000000-next-boot", *lines[1:]]) + "\n")


def test_query_answers_like_the_real_nvidia_smi(make_node: NodeFactory) -> None:
    node = make_node("a100", TWO, A100)
    plain = node.run(*QUERY)
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout == "0, Disabled, Disabled\n1, Disabled, Disabled\n"
    header = node.run("nvidia-smi", "--query-gpu=index,pci.bus_id,mig.mode.pending", "--format=csv", "-i", "1")
    assert header.stdout == "index, pci.bus_id, mig.mode.pending\n1, 00000000:28:00.0, Disabled\n"
    wrong = node.run("nvidia-smi", "--query-gpu=index,mig.mode.nope", "--format=csv")
    assert wrong.returncode == 2 and 'Field "mig.mode.nope" is not a valid field to query.' in wrong.stdout


def test_reset_fails_leaves_the_mode_pending_until_the_next_boot(make_node: NodeFactory) -> None:
    node = make_node("a100", TWO, A100)
    (node.root / "knobs/reset-fails").touch()
    config = node.config("layouts", TWO)
    applied = node.mig_parted("apply", "-f", str(config), "-c", "current")
    assert applied.returncode == 1
    assert "nvidia-smi -r -i 0000:18:00.0,0000:28:00.0" in (node.root / "calls.log").read_text()
    assert node.run(*QUERY).stdout == "0, Disabled, Enabled\n1, Disabled, Enabled\n"
    reboot(node.root)
    assert node.run(*QUERY).stdout == "0, Enabled, Enabled\n1, Enabled, Enabled\n"
    again = node.mig_parted("apply", "-f", str(config), "-c", "current")  # no reset needed any more
    assert again.returncode == 0, again.stderr[-2000:]
    assert node.mig_parted("assert", "-f", str(config), "-c", "current").returncode == 0


def test_pending_forever_survives_a_reboot_and_a_reset(make_node: NodeFactory) -> None:
    node = make_node("a100", TWO, A100)
    (node.root / "knobs/pending-forever").touch()
    config = node.config("layouts", TWO)
    assert node.mig_parted("apply", "-f", str(config), "-c", "current").returncode == 1
    assert node.run(*QUERY).stdout == "0, Disabled, Enabled\n1, Disabled, Enabled\n"
    assert node.run("nvidia-smi", "-r").returncode == 0  # the reset "works", the change does not
    reboot(node.root)
    assert node.run(*QUERY).stdout == "0, Disabled, Enabled\n1, Disabled, Enabled\n"


def test_hopper_never_has_a_pending_mode(make_node: NodeFactory) -> None:
    node = make_node("h200", [SEVEN], H200)
    (node.root / "knobs/reset-fails").touch()  # no reset is ever needed: the knob changes nothing
    config = node.config("seven", [SEVEN])
    assert node.mig_parted("apply", "-f", str(config), "-c", "current").returncode == 0
    assert node.run(*QUERY).stdout == "0, Enabled, Enabled\n"
