"""The user-data's delivery forms (``OUT/cloud-init/user-data.gz``, ``.mime``, ``.mime.gz``): the ``user-data`` target.

It reads the cloud-init target's user-data and writes beside it what ``generate --user-data-gzip /
--user-data-mime`` ask for (``plan.user_data``; the user's part comes read and typed, ``render.mime_parts``).
With gzip the MIME form is gzipped too. Each layout's seed (``cloud-init/layouts/NAME/user-data``) gets the same
forms beside it.

The multi-part form is built as ``cloud-init devel make-mime`` builds it (one ``MIMEText`` attachment
per part inside a ``MIMEMultipart``), with a boundary derived from the content so that the same input
gives the same bytes. migbake's own part comes last with a ``Merge-Type`` that appends lists and merges
mappings, so a user's ``runcmd`` or ``write_files`` is kept rather than replaced. For ``kubelet.layout:
eks-al2023`` with node labels, migbake adds its own NodeConfig part (the labels, as the baked drop-in has
them, ``plan.kubelet.nodeconfig_part``) after the user's: nodeadm merges the parts in order and appends
``spec.kubelet.flags`` (awslabs/amazon-eks-ami:nodeadm/internal/api/merge.go@v20260724), so the user's
settings and migbake's labels both reach kubelet, also on an AMI older than the ``/etc/eks/nodeadm.d/``
drop-ins (v20251023).
"""

from __future__ import annotations

import hashlib
from email.mime.multipart import MIMEMultipart
from email.mime.nonmultipart import MIMENonMultipart
from email.mime.text import MIMEText

from migbake.render.artifact import Artifact, Rendered, gzip_bytes
from migbake.render.environment import Templates
from migbake.render.guard import mime_header_value
from migbake.render.plan import NODECONFIG_MEDIA_TYPE, MimePart, RenderPlan

USER_DATA = "cloud-init/user-data"
MERGE_TYPE = "list(append)+dict(no_replace,recurse_list)+str()"


def user_data_forms(plan: RenderPlan, done: Rendered, templates: Templates) -> list[Artifact]:
    """``user-data.gz``, ``user-data.mime`` and ``user-data.mime.gz`` beside the user-data, as ``plan.user_data``
    asks (eks-al2023 with node labels: the MIME form also carries them as a NodeConfig part)."""
    forms = plan.user_data
    out = []
    # the user-data, and each layout's seed beside its own (cloud-init/layouts/NAME/user-data)
    for path in [USER_DATA] + [a.path for _, a in done.under("cloud-init/layouts")]:
        text = str(done[path].text)
        if forms.gzip:
            out.append(Artifact(path + ".gz", gzip_user_data(text), 0o644))
        if forms.mime is not None:
            mime = mime_user_data(text, forms.mime, nodeconfig=plan.kubelet.nodeconfig_part)
            out.append(Artifact(path + ".mime", mime, 0o644))
            if forms.gzip:
                out.append(Artifact(path + ".mime.gz", gzip_user_data(mime), 0o644))
    return out


def gzip_user_data(text: str) -> bytes:
    """Gzip with no name and a zero timestamp: cloud-init detects and inflates it; output is deterministic."""
    return gzip_bytes(text.encode("utf-8"))


def _part(text: str, media_type: str) -> MIMENonMultipart:
    main, sub = media_type.split("/", 1)
    if main.lower() == "text":
        return MIMEText(text, sub, "utf-8")
    part = MIMENonMultipart(main, sub)
    part.set_payload(text, "utf-8")  # base64 with charset=utf-8, as the text parts (nodeadm decodes it)
    return part


def _filename_parameter(name: str) -> str | tuple[str, str, str]:
    """``filename`` as Python's email writes it: a quoted string for ASCII, else an RFC 2231 parameter
    (``filename*=utf-8''h%C3%A9llo.sh``). A non-ASCII value in the header's text would make the whole header
    one RFC 2047 encoded word, which no reader takes apart again: cloud-init then names the part
    ``part-001`` (cloudinit/user_data.py, ``_process_before_attach``: ``msg.get_filename()``)."""
    return name if name.isascii() else ("utf-8", "", name)


def mime_user_data(ours: str, theirs: MimePart, nodeconfig: str = "") -> str:
    """A multi-part MIME user-data: the user's part first, then ``nodeconfig`` (migbake's NodeConfig part for
    nodeadm, if any), then migbake's cloud-config (merged onto the user's).

    The part comes checked (``render.mime_parts.user_part``); its name and type pass the MIME header guard once
    more on their way into the headers (a RenderError: never printed unchecked).
    """
    mime_header_value(theirs.name, "the part's file name")
    mime_header_value(theirs.media_type, "the part's type")
    first = _part(theirs.text, theirs.media_type)
    first.add_header("Content-Disposition", "attachment", filename=_filename_parameter(theirs.name))
    parts = [first]
    if nodeconfig:
        labels = _part(nodeconfig, NODECONFIG_MEDIA_TYPE)
        labels.add_header("Content-Disposition", 'attachment; filename="migbake-node-labels.yaml"')
        parts.append(labels)
    last = MIMEText(ours, "cloud-config", "utf-8")
    last.add_header("Content-Disposition", 'attachment; filename="migbake-user-data"')
    last.add_header("Merge-Type", MERGE_TYPE)
    parts.append(last)
    # the boundary: a hash of the parts' texts (without a NodeConfig part, of the two alone as before it)
    seed = "\0".join([theirs.text, nodeconfig, ours]) if nodeconfig else theirs.text + "\0" + ours
    boundary = "migbake-" + hashlib.sha256(seed.encode("utf-8")).hexdigest()[:32]
    combined = MIMEMultipart(boundary=boundary)
    for part in parts:
        combined.attach(part)
    return combined.as_string() + "\n"
