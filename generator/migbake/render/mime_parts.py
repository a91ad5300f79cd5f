"""The user's own part of a multi-part user-data, read and typed (``generate --user-data-mime FILE[:TYPE]``),
and EC2's 16 KB user-data limit on the form that would be sent.

The forms themselves are the ``user-data`` target (``render.targets.userdata``); this module makes the part it
carries (``user_part``: a ``MimePart`` whose name and media type are checked) and says when what would be sent
is too big. The size check is on the form that would be sent (the last, most complete one: the MIME bundle
when there is one, gzipped when asked for).

A user's part may be a NodeConfig for EKS AL2023's nodeadm, which reads only parts of media type
``application/node.eks.aws`` (awslabs/amazon-eks-ami:nodeadm/internal/configprovider/userdata.go@v20260724
L18-23, mime.go L34-74) and skips every other part without a word: ``FILE:application/node.eks.aws``, or
a file whose first document is ``apiVersion: node.eks.aws/v1alpha1`` + ``kind: NodeConfig``.
"""

from __future__ import annotations

import re

import yaml

from migbake.kubernetes.kubelet import NODECONFIG_API_VERSION, NODECONFIG_KIND, NODECONFIG_MEDIA_TYPE
from migbake.problems import RenderError, UsageError
from migbake.render.artifact import gzip_bytes
from migbake.render.guard import mime_header_value
from migbake.render.parts import MimePart

EC2_USER_DATA_LIMIT = 16384  # bytes, before base64 encoding
MAX_PART_BYTES = 4 * 1024 * 1024  # a user's own part (--user-data-mime FILE): far above any cloud's limit
# a MIME subtype (RFC 6838 restricted-name: what RFC 2045's token allows, less its oddities): no space,
# no CR/LF, no ; or = that would add a parameter or a header to the part
SUBTYPE = re.compile(r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}")
# ... or a whole media type, TYPE/SUBTYPE (application/node.eks.aws)
MEDIA_TYPE = re.compile(r"([A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126})/([A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126})")
_NOT_IN_FILENAME = re.compile(r'["\\\x00-\x1f\x7f-\x9f\u2028\u2029]')
MIME_OPTION = "--user-data-mime"  # the option that names the user's part
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
    what = f"{name} is {len(data)} bytes: as EC2 instance user data it is above EC2's 16 KB limit"
    if gzipped:
        return f"{what} even gzipped: make the parts smaller, or fetch the large one with #include"
    if not too_big_for_ec2(gzip_bytes(data)):
        return f"{what}; use --user-data-gzip: gzipped it fits"
    return f"{what}, gzipped too: make the parts smaller, or fetch the large one with #include"


def guess_part_type(text: str) -> str | None:
    """The MIME subtype cloud-init would give a part starting like ``text`` (None: unknown)."""
    for prefix, subtype in PART_TYPES.items():
        if text.startswith(prefix):
            return subtype
    return None


def _first_document_aliases(text: str, name: str) -> None:
    """UsageError at the first alias of ``text``'s first YAML document: a part migbake reads as a NodeConfig
    is read without expanding an alias (a few lines of them expand to billions of nodes)."""
    try:
        for event in yaml.parse(text, Loader=yaml.SafeLoader):
            if isinstance(event, yaml.DocumentEndEvent):
                return
            if isinstance(event, yaml.AliasEvent):
                mark = event.start_mark
                where = f"{mark.line + 1}:{mark.column + 1}" if mark is not None else "1:1"
                raise UsageError(f"{name}:{where}: a YAML alias (*{event.anchor}) in a "
                                 f"part read as a NodeConfig: write the value out (aliases can expand without "
                                 "bound)", option=MIME_OPTION)
    except yaml.YAMLError:
        return  # not YAML: no NodeConfig, said by the caller


def nodeconfig_kind(text: str, name: str = "") -> str | None:
    """``NodeConfig`` when ``text``'s first YAML document is a NodeConfig nodeadm reads; the apiVersion/kind it
    names when it looks like another version of one (``node.eks.aws/...``); None when it is no NodeConfig.
    An alias in that document is a UsageError naming ``name`` (``_first_document_aliases``)."""
    _first_document_aliases(text, name)
    try:
        first = next(iter(yaml.safe_load_all(text)), None)  # nodeadm reads only the first document
    except yaml.YAMLError:
        return None
    if not isinstance(first, dict) or not str(first.get("apiVersion", "")).startswith("node.eks.aws/"):
        return None
    if first.get("apiVersion") == NODECONFIG_API_VERSION and first.get("kind") == NODECONFIG_KIND:
        return NODECONFIG_KIND
    return f"{first.get('apiVersion')} {first.get('kind')}"


def part_media_type(theirs: str, their_name: str, their_type: str | None) -> str:
    """The media type of the user's part: TYPE (a subtype of text/, or a whole media type), else told by content."""
    if their_type is not None:
        whole = MEDIA_TYPE.fullmatch(their_type)
        if whole is None and not SUBTYPE.fullmatch(their_type):
            raise UsageError(f"{their_type!r} is neither a MIME subtype (letters, digits and !#$&^_.+-, such as "
                             f"x-shellscript or cloud-config: text/TYPE) nor a media type TYPE/SUBTYPE (such as "
                             f"{NODECONFIG_MEDIA_TYPE})", option=MIME_OPTION)
        if their_type.lower() == "node.eks.aws" or (whole and whole.group(2).lower() == "node.eks.aws"
                                                    and their_type.lower() != NODECONFIG_MEDIA_TYPE):
            raise UsageError(f"{their_type!r}: nodeadm reads a NodeConfig part only as {NODECONFIG_MEDIA_TYPE} and "
                             f"skips any other type silently; write {their_name}:{NODECONFIG_MEDIA_TYPE}",
                             option=MIME_OPTION)
        if whole and whole.group(1).lower() in ("multipart", "message"):
            # RFC 2046 5.1, 5.2: their bodies are MIME entities of their own (parts, a whole message), so
            # cloud-init would read this file's text as the structure of the user-data
            raise UsageError(f"{their_name}: {their_type!r}: a part of type multipart/* or message/* would be read "
                             "as a MIME document of its own inside migbake's multi-part user-data; give the "
                             "part's own type (x-shellscript, cloud-config, ...), or pass the parts one by one",
                             option=MIME_OPTION)
        if their_type.lower() == NODECONFIG_MEDIA_TYPE and nodeconfig_kind(theirs, their_name) != NODECONFIG_KIND:
            raise UsageError(f"{their_name}: {NODECONFIG_MEDIA_TYPE} is for a NodeConfig (apiVersion "
                             f"{NODECONFIG_API_VERSION}, kind {NODECONFIG_KIND}, its first YAML document), and this "
                             "file is none: nodeadm would refuse the part at boot; give the file's own type",
                             option=MIME_OPTION)
        return their_type if whole else f"text/{their_type}"
    subtype = guess_part_type(theirs)
    if subtype is not None:
        return f"text/{subtype}"
    kind = nodeconfig_kind(theirs, their_name)
    if kind == NODECONFIG_KIND:
        return NODECONFIG_MEDIA_TYPE
    if kind is not None:
        raise UsageError(f"{their_name}: {kind} is not a NodeConfig nodeadm reads (apiVersion "
                         f"{NODECONFIG_API_VERSION}, kind {NODECONFIG_KIND})", option=MIME_OPTION)
    raise UsageError(f"{their_name}: cannot tell its part type from its first line or content; name it with "
                     f"FILE:TYPE (e.g. my.sh:x-shellscript, nodeconfig.yaml:{NODECONFIG_MEDIA_TYPE})",
                     option=MIME_OPTION)


def user_part(text: str, name: str, kind: str | None = None) -> MimePart:
    """The user's part ``name`` with ``text``, typed by ``kind`` (TYPE of FILE:TYPE) or by its content.

    A part the multi-part form cannot carry (its type, its file name) is a UsageError: a bad value of
    ``--user-data-mime``.
    """
    if _NOT_IN_FILENAME.search(name):
        raise UsageError(f"{name!r}: a file name with a quote, a backslash or a control character cannot "
                         "be a part's filename; rename the file", option=MIME_OPTION)
    media_type = part_media_type(text, name, kind)
    for value, what in ((name, "the part's file name"), (media_type, "the part's type")):
        try:
            mime_header_value(value, what)  # both are printed into MIME headers
        except RenderError as e:
            raise UsageError(str(e), option=MIME_OPTION) from e
    return MimePart(text, name, media_type)
