"""Deliver the user-data: size against the EC2 limit, a gzip form, and a MIME multi-part form.

With gzip the MIME form is gzipped too; the size check is on the form that would be sent (the last,
most complete one: the MIME bundle when there is one, gzipped when asked for).

The multi-part form is built as ``cloud-init devel make-mime`` builds it (one ``MIMEText`` attachment
per part inside a ``MIMEMultipart``), with a boundary derived from the content so that the same input
gives the same bytes. migbake's own part comes last with a ``Merge-Type`` that appends lists and merges
mappings, so a user's ``runcmd`` or ``write_files`` is kept rather than replaced.
"""

from __future__ import annotations

import gzip
import hashlib
import re
from email.mime.multipart import MIMEMultipart
from email.mime.text import MIMEText

from migbake.problems import RenderError, UsageError
from migbake.render.guard import mime_header_value

EC2_USER_DATA_LIMIT = 16384  # bytes, before base64 encoding
MAX_PART_BYTES = 4 * 1024 * 1024  # a user's own part (--user-data-mime FILE): far above any cloud's limit
# a MIME subtype (RFC 6838 restricted-name: what RFC 2045's token allows, less its oddities): no space,
# no CR/LF, no ; or = that would add a parameter or a header to the part
SUBTYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}")
_NOT_IN_FILENAME = re.compile(r'["\\\x00-\x1f\x7f-\x9f\u2028\u2029]')
MIME_OPTION = "--user-data-mime"  # the option that names the user's part
MERGE_TYPE = "list(append)+dict(no_replace,recurse_list)+str()"
PART_TYPES = {
    "#cloud-config": "cloud-config",
    "#!": "x-shellscript",
    "#include": "x-include-url",
    "#cloud-boothook": "cloud-boothook",
    "#part-handler": "part-handler",
    "## template: jinja": "jinja2",
}


def too_big_for_ec2(data: bytes) -> bool:
    """Whether ``data`` exceeds EC2's 16 KB user-data limit."""
    return len(data) > EC2_USER_DATA_LIMIT


def size_warning(name: str, data: bytes, *, gzipped: bool) -> str | None:
    """The warning for the form that would be sent (``name``, ``data``) when it is over EC2's limit, else None.

    It names --user-data-gzip only when that was not given and the gzipped form would fit.
    """
    if not too_big_for_ec2(data):
        return None
    what = f"{name} is {len(data)} bytes, above EC2's 16 KB user-data limit"
    if gzipped:
        return f"{what} even gzipped: make the parts smaller, or fetch the large one with #include"
    if not too_big_for_ec2(gzip.compress(data, compresslevel=9, mtime=0)):
        return f"{what} (use --user-data-gzip: gzipped it fits)"
    return f"{what}, gzipped too: make the parts smaller, or fetch the large one with #include"


def gzip_user_data(text: str) -> bytes:
    """Gzip with no name and a zero timestamp: cloud-init detects and inflates it; output is deterministic."""
    return gzip.compress(text.encode("utf-8"), compresslevel=9, mtime=0)


def guess_part_type(text: str) -> str | None:
    """The MIME subtype cloud-init would give a part starting like ``text`` (None: unknown)."""
    for prefix, subtype in PART_TYPES.items():
        if text.startswith(prefix):
            return subtype
    return None


def _filename_parameter(name: str) -> str | tuple[str, str, str]:
    """``filename`` as Python's email writes it: a quoted string for ASCII, else an RFC 2231 parameter
    (``filename*=utf-8''h%C3%A9llo.sh``). A non-ASCII value in the header's text would make the whole header
    one RFC 2047 encoded word, which no reader takes apart again: cloud-init then names the part
    ``part-001`` (cloudinit/user_data.py, ``_process_before_attach``: ``msg.get_filename()``)."""
    return name if name.isascii() else ("utf-8", "", name)


def mime_user_data(ours: str, theirs: str, their_name: str, their_type: str | None = None) -> str:
    """A multi-part MIME user-data: the user's part first, then migbake's cloud-config (merged onto it).

    A part it cannot carry (its type, its file name) is a UsageError: a bad value of ``--user-data-mime``.
    """
    if their_type is not None and not SUBTYPE.fullmatch(their_type):
        raise UsageError(f"{their_type!r} is not a MIME subtype (letters, digits and !#$&^_.+-, such as "
                         "x-shellscript or cloud-config)", option=MIME_OPTION)
    if _NOT_IN_FILENAME.search(their_name):
        raise UsageError(f"{their_name!r}: a file name with a quote, a backslash or a control character cannot "
                         "be a part's filename; rename the file", option=MIME_OPTION)
    subtype = their_type or guess_part_type(theirs)
    if subtype is None:
        raise UsageError(f"{their_name}: cannot tell its cloud-init part type from its first line; name "
                         "it with FILE:TYPE (e.g. my.sh:x-shellscript)", option=MIME_OPTION)
    for value, what in ((their_name, "the part's file name"), (subtype, "the part's type")):
        try:
            mime_header_value(value, what)  # both are printed into MIME headers
        except RenderError as e:
            raise UsageError(str(e), option=MIME_OPTION) from e
    first = MIMEText(theirs, subtype, "utf-8")
    first.add_header("Content-Disposition", "attachment", filename=_filename_parameter(their_name))
    second = MIMEText(ours, "cloud-config", "utf-8")
    second.add_header("Content-Disposition", 'attachment; filename="migbake-user-data"')
    second.add_header("Merge-Type", MERGE_TYPE)
    boundary = "migbake-" + hashlib.sha256((theirs + "\0" + ours).encode("utf-8")).hexdigest()[:32]
    combined = MIMEMultipart(boundary=boundary)
    combined.attach(first)
    combined.attach(second)
    return combined.as_string() + "\n"
