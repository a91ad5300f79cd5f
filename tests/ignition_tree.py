"""Reading an Ignition config as the node will: each file's bytes (data: URLs decoded) and its units.

For the Butane judges (tests/outputs/test_butane.py, tests/unit/test_butane_dataurl.py): the same reading as
normaliser of the issue-35 research (RFC 2397, percent or base64, gunzip when
``compression: gzip``), then each unit and drop-in at the path Ignition writes it to
(coreos/ignition:internal/exec/util/path.go@v2.26.0: /etc/systemd/system/NAME, NAME.d/DROPIN).
"""

from __future__ import annotations

import base64
import gzip
import urllib.parse
from pathlib import Path
from typing import Any


def decode_data_url(source: str, compression: str = "") -> bytes:
    """The bytes of a ``data:`` URL (gunzipped when ``compression`` is gzip)."""
    assert source.startswith("data:"), source
    meta, sep, payload = source[5:].partition(",")
    assert sep == ",", source
    raw = base64.b64decode(payload, validate=True) if meta.endswith(";base64") else \
        urllib.parse.unquote_to_bytes(payload)
    return gzip.decompress(raw) if compression == "gzip" else raw


def as_data(config: dict[str, Any]) -> dict[str, Any]:
    """The config with every data: source replaced by its decoded bytes (``compression`` dropped)."""
    out = dict(config)
    files = []
    for f in config.get("storage", {}).get("files", []):
        f = dict(f)
        c = dict(f.get("contents", {}))
        if str(c.get("source", "")).startswith("data:"):
            c = {"bytes": decode_data_url(c.pop("source"), c.pop("compression", "") or ""), **c}
        f["contents"] = c
        files.append(f)
    if files:
        out["storage"] = {**config["storage"], "files": files}
    return out


def node_files(config: dict[str, Any]) -> dict[str, bytes]:
    """``{path relative to /: bytes}`` of every file, unit and drop-in with contents (a remote source: b"")."""
    out: dict[str, bytes] = {}
    for f in config.get("storage", {}).get("files", []):
        c = f.get("contents", {})
        src = str(c.get("source", ""))
        out[f["path"].lstrip("/")] = decode_data_url(src, c.get("compression", "") or "") \
            if src.startswith("data:") else b""
    for u in config.get("systemd", {}).get("units", []):
        if "contents" in u:
            out[f"etc/systemd/system/{u['name']}"] = u["contents"].encode("utf-8")
        for d in u.get("dropins", []):
            out[f"etc/systemd/system/{u['name']}.d/{d['name']}"] = d["contents"].encode("utf-8")
    return out


def rootfs_differences(config: dict[str, Any], rootfs: Path, extra: set[str]) -> list[str]:
    """How the config's files differ from OUT/rootfs: missing, different bytes, or not expected at all."""
    inside = node_files(config)
    want = {str(p.relative_to(rootfs)): p.read_bytes() for p in sorted(rootfs.rglob("*")) if p.is_file()}
    found = [f"{rel}: missing" for rel in want if rel not in inside]
    found += [f"{rel}: differs from OUT/rootfs" for rel in want if rel in inside and inside[rel] != want[rel]]
    found += [f"{rel}: not in OUT/rootfs" for rel in inside if rel not in want and rel not in extra]
    return found
