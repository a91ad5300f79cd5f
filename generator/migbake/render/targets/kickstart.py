"""Kickstart (``OUT/kickstart/mig-restore.ks``): a %post that carries the rendered Packer provisioner scripts.

The %post embeds the rootfs files and the bake's own provisioner scripts as quoted here-documents, so the
base-image checks of the bake run there unchanged; each embedded text is guarded below.

Per-layout seeds: for named layouts read from the file source, ``OUT/kickstart/layouts/NAME.ks`` is the same %post
that also writes NAME to ``/etc/migbake/layout`` in the installed system (``generate --layout NAME``: as
``mig-restore.ks``), which the restore reads at the node's first boot.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterator

from migbake.problems import RenderError
from migbake.render.artifact import Artifact, Rendered
from migbake.render.environment import Templates
from migbake.render.guard import Block
from migbake.render.plan import LAYOUT_FILE, RenderPlan
from migbake.render.targets.packer import INSTALL_SCRIPT, MANAGER_SCRIPT
from migbake.render.targets.rootfs import ROOTFS, seed_layouts

HEREDOC_END = "MIGBAKE_EOF"
KS_STAGING = "/tmp/migbake-kickstart"


def kickstart(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """The %post: the staged rootfs, then the bake's scripts run over it."""
    embedded = [{"path": f"rootfs/{rel}", "text": heredoc_body(f"rootfs/{rel}", a.text)}
                for rel, a in done.under(ROOTFS)]
    embedded += [{"path": f"scripts/{posixpath.basename(path)}",
                  "text": heredoc_body(posixpath.basename(path), done[path].text)}
                 for path in (MANAGER_SCRIPT, INSTALL_SCRIPT)]
    for e in embedded:
        e["dir"] = posixpath.dirname(e["path"])
    shared = templates.with_variables({"embedded": embedded, "staging": KS_STAGING, "heredoc_end": HEREDOC_END,
                                       "layout_file": LAYOUT_FILE, "layout_dir": posixpath.dirname(LAYOUT_FILE)})
    out = [shared.file("kickstart/mig-restore.ks.j2", "kickstart/mig-restore.ks", 0o644, {"layout": plan.seed_layout})]
    out += [shared.file("kickstart/mig-restore.ks.j2", f"kickstart/layouts/{name}.ks", 0o644, {"layout": name})
            for name in seed_layouts(plan)]
    return out


def heredoc_body(name: str, text: str) -> Block:
    """``text`` as the body of a quoted here-document inside a Kickstart %post, or a RenderError.

    Anaconda ends a section at a line starting with ``%`` (``%end``), and the shell at the delimiter;
    the here-document adds the final newline back, so the text must end with one.
    """
    if not text.endswith("\n"):
        raise RenderError(f"{name}: a file embedded in the Kickstart %post must end with a newline")
    if HEREDOC_END not in text and not any(_blank_before(text, at) for at in _all(text, "%")):
        return Block(text.rstrip("\n"))  # no line to look at: every % has more than white space before it
    for line in text.splitlines():
        if line.lstrip().startswith("%") or line == HEREDOC_END:
            raise RenderError(f"{name}: the line {line!r} would end the Kickstart %post or its here-document")
    return Block(text.rstrip("\n"))  # a file the render wrote itself, every value in it guarded there


def _all(text: str, char: str) -> Iterator[int]:
    """Where ``char`` is in ``text``."""
    at = text.find(char)
    while at >= 0:
        yield at
        at = text.find(char, at + 1)


def _blank_before(text: str, at: int) -> bool:
    """Whether only white space stands before ``at`` on its line, as ``str.splitlines`` cuts lines (at a line
    feed, and at ``\r``, ``\x0b``, ``\x0c``, ``\x1c``-``\x1e``, ``\x85``, U+2028 and U+2029)."""
    since_feed = text[text.rfind("\n", 0, at) + 1:at]
    return (since_feed + "%").splitlines()[-1][:-1].strip() == ""
