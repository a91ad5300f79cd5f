"""The first boot through cloud-init: which units bootcmd holds, and what runcmd starts again.

On the first boot systemd has queued the image's units before cloud-init writes the restore unit and the
drop-ins, and sees neither until a daemon-reload. So bootcmd (before sysinit.target, once per instance)
cancels the start jobs of every consumer, of NVIDIA's GPU clients and of the packaged manager; runcmd
reloads, masks or disables the manager, enables and runs the restore, then starts again only the held
units the image enables: the fail-closed consumers only after a successful restore. Before the restore,
``restore.sh --check-image`` checks that the node holds the tools and units; when it does not, the
restore does not run and the fail-closed consumers stay down.
"""

from __future__ import annotations

import shlex

from migbake.profile.nodefacts import GPU_CLIENTS
from migbake.profile.nodeprofile import NodeProfile


def _q(words: list[str] | tuple[str, ...]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def held_units(p: NodeProfile) -> list[str]:
    """Every unit bootcmd stops before it can touch the GPU: consumers, GPU clients, the manager."""
    units = [c.unit for c in p.all_consumers]
    units += [u for u in GPU_CLIENTS if u not in units]
    return [*units, p.conflicting_manager.unit]


def base_image_check(p: NodeProfile) -> str:
    """Shell that sets ``m`` to the pieces the node lacks (empty: none) and says so on stderr.

    The pieces image.provided_later names are left to the restore, which checks them at every boot.
    """
    tests = []
    for piece in p.base_pieces_at("bake"):
        if piece.kind == "tool":
            test, why = f"[ -x {shlex.quote(piece.path)} ]", f"{piece.name} (no executable {piece.path})"
        else:
            test = f"[ -n \"$(systemctl show --property=FragmentPath --value {shlex.quote(piece.name)})\" ]"
            why = f"{piece.name} (no unit file)"
        tests.append(f"{test} || m=\"$m, \"{shlex.quote(why)}; ")
    said = (f"migbake: the node lacks what profile {p.name} needs: ", "; install them in the image, or list "
            "them under image.provided_later if a later step installs them; the restore did not run")
    return ("m=''; " + "".join(tests) + f"if [ -n \"$m\" ]; then echo {shlex.quote(said[0])}\"${{m#, }}\""
            f"{shlex.quote(said[1])} >&2; fi; ")


def commands(p: NodeProfile) -> tuple[list[list[str]], list[list[str]]]:
    """bootcmd and runcmd, each command as an argv."""
    mgr, restore = p.conflicting_manager.unit, p.restore.unit
    hold = f"for u in {_q(held_units(p))}; do systemctl stop --no-block \"$u\" 2>/dev/null || true; done"
    bootcmd = [["cloud-init-per", "instance", "migbake-hold", "sh", "-c", hold]]
    verb = p.conflicting_manager.action  # mask or disable: both are systemctl verbs
    runcmd = [
        ["systemctl", "daemon-reload"],
        ["sh", "-c", f"systemctl {verb} --now {shlex.quote(mgr)} 2>/dev/null || true"],
        ["systemctl", "enable", restore],
    ]
    gated = list(p.held_units)
    always = [c.unit for c in p.all_consumers if not c.fail_closed]
    always += [u for u in GPU_CLIENTS if u not in always and u not in gated]
    start = ("for u in {}; do if systemctl is-enabled --quiet \"$u\" 2>/dev/null; then "
             "systemctl start --no-block \"$u\"; fi; done")
    # run the restore now (kubelet may only be started later, by kubeadm join); fail closed: after a
    # failed restore the fail-closed consumers stay down (starting one would only pull the failing
    # restore in again); GPU clients and the other consumers start either way, after the attempt
    # first the node's check that it holds the tools and units the restore needs, as
    # install-mig-restore.sh checks a Packer bake: when not, no restore, and the message names each piece
    script = base_image_check(p)
    script += (f"if [ -n \"$m\" ]; then ok=no; elif systemctl start {shlex.quote(restore)}; then ok=yes; "
               "else ok=no; fi; ")
    script += start.format(_q(always)) + "; "
    if gated:
        why = (f"migbake: {restore} failed, so {p.consumers_text(only_fail_closed=True)} "
               f"{'is' if len(gated) == 1 else 'are'} not started (fail closed); see: journalctl -b -u {restore}")
        script += (f"if [ \"$ok\" = yes ]; then {start.format(_q(gated))}; "
                   f"else echo {shlex.quote(why)} >&2; exit 1; fi")
    else:
        script += f"[ \"$ok\" = yes ] || {{ echo {shlex.quote(f'migbake: {restore} failed')} >&2; exit 1; }}"
    runcmd.append(["sh", "-c", script])
    return bootcmd, runcmd
