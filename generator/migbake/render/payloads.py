"""Generated files read for what they mean: each gzip, base64, ``data:`` URL or MIME payload decoded in place.

``--check`` compares files through ``readable``, not their compressed bytes: gzip output differs between zlib
builds (zlib-ng's is not zlib's: zlib-ng/zlib-ng#795), so a tree written on a machine whose Python links another
zlib is still up to date when it carries the same files.
"""

from __future__ import annotations

import base64
import binascii
import email
import gzip
import re
import urllib.parse
import zlib
from typing import Any

import yaml

_GZIP_MAGIC = b"\x1f\x8b"
# the ``encoding`` of a file's ``content`` that migbake writes (cloud-init write_files, Cluster API files): gzipped?
_ENCODINGS = {"base64": False, "gzip+base64": True}
# files read as YAML (JSON is YAML too: Ignition) for payloads inside them, and the words that show one may be there
_STRUCTURED = (".yaml", ".yml", ".bu", ".ign", "user-data")
_MAY_CARRY = ("data:", "encoding", "MIME-Version:")
_BOUNDARY = re.compile(r'boundary="?[^";\s]*"?')
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def readable(path: str, data: bytes) -> str | None:
    """The file ``path`` of OUT (``data``) as text, each payload in it decoded in place: a gzipped file inflated,
    a YAML (or JSON) file's ``content`` of ``encoding: base64`` or ``gzip+base64`` and each ``data:`` URL decoded,
    a MIME document's parts decoded without its boundary (a hash of the parts) and read the same way. Two files
    that read the same carry the same files, however their payloads were compressed. None: not text."""
    if data[:2] == _GZIP_MAGIC:
        inner = _inflated(data)
        text = None if inner is None else readable(path.removesuffix(".gz"), inner)
        return None if text is None else f"[gzip, inflated]\n{text}"
    try:
        return _decoded(path, data.decode("utf-8"))
    except UnicodeDecodeError:
        return None


def _inflated(data: bytes) -> bytes | None:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error):
        return None


def _decoded(path: str, text: str) -> str:
    """``text`` with its payloads decoded (``readable``)."""
    if text.startswith("MIME-Version:") or path.endswith(".mime"):
        return _mime(text)
    if (path.endswith(_STRUCTURED) or text.startswith("#cloud-config")) and any(w in text for w in _MAY_CARRY):
        return _yaml_payloads(text)
    return text


def _mime(text: str) -> str:
    """A MIME document: its headers (the boundary left out), then each part's headers and decoded body."""
    message = email.message_from_string(text)
    out = [_BOUNDARY.sub("boundary=(not compared)", f"{k}: {v}") for k, v in message.items()]
    for number, part in enumerate((p for p in message.walk() if not p.is_multipart()), 1):
        out += ["", f"[part {number}]", *(f"{k}: {v}" for k, v in part.items()), ""]
        name = part.get_filename() or ""
        if part.get("Content-Transfer-Encoding", "").lower() in ("base64", "quoted-printable"):
            body = part.get_payload(decode=True)
            out.append(readable(name, body) or repr(body) if isinstance(body, bytes) else "")
        else:  # the text as it stands (Karpenter's parts carry no transfer encoding)
            out.append(_decoded(name, str(part.get_payload())))
    return "\n".join(out) + "\n"


def _yaml_payloads(text: str) -> str:
    """YAML (or JSON) text with each payload scalar replaced, where it stands, by its decoded text."""
    try:
        nodes = list(yaml.compose_all(text, Loader=_Loader))
    except yaml.YAMLError:
        return text
    found: list[tuple[int, int, str]] = []
    stack: list[yaml.Node] = [n for n in nodes if n is not None]
    while stack:
        node = stack.pop()
        if isinstance(node, yaml.SequenceNode):
            stack.extend(node.value)
        elif isinstance(node, yaml.MappingNode):
            scalars = {k.value: v for k, v in node.value if isinstance(k, yaml.ScalarNode)
                       and isinstance(v, yaml.ScalarNode)}
            encoding, content = scalars.get("encoding"), scalars.get("content")
            if encoding is not None and content is not None and encoding.value in _ENCODINGS:
                decoded = _base64(content.value, gzipped=_ENCODINGS[encoding.value])
                if decoded is not None:
                    found.append(_replacement(text, content, f"[{encoding.value}, decoded]", decoded))
            stack.extend(v for k, v in node.value if v is not content)
        elif isinstance(node, yaml.ScalarNode) and node.value.startswith("data:"):
            decoded = _data_url(node.value)
            if decoded is not None:
                found.append(_replacement(text, node, "[data: URL, decoded]", decoded))
        elif isinstance(node, yaml.ScalarNode) and node.value.startswith("MIME-Version:"):
            found.append(_replacement(text, node, "[MIME, parts decoded]", _mime(node.value)))
    for start, end, new in sorted(found, reverse=True):
        text = text[:start] + new + text[end:]
    return text


def _replacement(text: str, node: yaml.Node, what: str, decoded: str) -> tuple[int, int, str]:
    """Where ``node`` stands in ``text``, and its decoded text to stand there instead, each line marked."""
    start, end = node.start_mark.index, node.end_mark.index
    lines = "".join(f"\n  | {line}" for line in decoded.rstrip("\n").split("\n"))
    return start, end, what + lines + ("\n" if text[start:end].endswith("\n") else "")


def _base64(value: str, *, gzipped: bool) -> str | None:
    try:
        raw = base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return None
    inner = _inflated(raw) if gzipped else raw
    return None if inner is None else readable("", inner)


def _data_url(url: str) -> str | None:
    """A ``data:`` URL's data (RFC 2397: base64, or percent-escaped), read like a file (a gzipped one inflated)."""
    head, comma, data = url.partition(",")
    if not comma:
        return None
    try:
        raw = base64.b64decode(data, validate=True) if head.endswith(";base64") else urllib.parse.unquote_to_bytes(data)
    except (binascii.Error, ValueError):
        return None
    return readable("", raw)
