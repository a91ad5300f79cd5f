"""Butane to Ignition for the subset migbake writes: files (inline or fetched with a hash) and systemd units.

What butane v0.29.0 does with it (coreos/butane@v0.29.0, read and checked against the binary; the tests
compare butane's own output with ours as data, tests/outputs/test_butane.py): ``inline`` contents become a
``data:`` URL with ``compression: ""`` (base/v0_7/translate.go ``translateResource``); a remote
``source`` and its ``verification`` pass as they are; ``mode``, ``overwrite`` and units (``name``,
``enabled``, ``mask``, ``contents``, ``dropins``) pass through; the openshift variant wraps the config
in a MachineConfig (config/openshift/v4_14/translate.go).
"""

from __future__ import annotations

import base64
from functools import lru_cache
from typing import Any
from urllib.parse import quote

# variant -> version migbake writes -> the Ignition spec butane translates it to
# (coreos/butane:config/config.go@v0.29.0; README of ../shared/tools/butane)
SPEC = {("fcos", "1.6.0"): "3.5.0", ("flatcar", "1.1.0"): "3.4.0", ("openshift", "4.14.0"): "3.4.0"}
MACHINE_CONFIG_API = "machineconfiguration.openshift.io/v1"
ROLE_LABEL = "machineconfiguration.openshift.io/role"

# RFC 2396 unreserved characters, kept as they are by vincent-petithory/dataurl's Escape (vendored by
# butane@v0.29.0: vendor/github.com/vincent-petithory/dataurl/rfc2396.go) beside letters and digits; every other
# byte is %XX, upper case, as urllib.parse.quote writes it
_UNRESERVED = "-_.!~*'()"


@lru_cache(maxsize=64)  # a file's URL is written in three configs of a render (fcos, flatcar, openshift)
def data_url(data: bytes) -> str:
    """The ``data:`` URL butane's ``MakeDataURL`` writes for ``data``, without its gzip form.

    butane (coreos/butane:base/util/url.go@v0.29.0) keeps the shortest of the percent-escaped and the
    base64 form, then a gzip form if shorter still. migbake stops before gzip: the gzip bytes depend on
    the zlib build (Go's and Python's already differ), and a generated file must be the same on every
    machine; Ignition reads every form alike (``compression: ""`` says: not compressed).
    """
    escaped = quote(data, safe=_UNRESERVED)
    encoded = base64.b64encode(data).decode("ascii")
    if len(";base64," + encoded) < len("," + escaped):
        return "data:;base64," + encoded
    return "data:," + escaped


def _resource(contents: dict[str, Any]) -> dict[str, Any]:
    if "inline" in contents:
        return {"compression": "", "source": data_url(str(contents["inline"]).encode("utf-8"))}
    return dict(contents)  # a remote source with its verification: as it is


def ignition(butane: dict[str, Any]) -> dict[str, Any]:
    """The Ignition config of a Butane config migbake wrote (``storage.files`` and ``systemd.units``)."""
    config: dict[str, Any] = {"ignition": {"version": SPEC[butane["variant"], butane["version"]]}}
    files = [{**{k: v for k, v in f.items() if k != "contents"}, "contents": _resource(f["contents"])}
             for f in butane.get("storage", {}).get("files", [])]
    if files:
        config["storage"] = {"files": files}
    units = butane.get("systemd", {}).get("units", [])
    if units:
        config["systemd"] = {"units": [dict(u) for u in units]}
    return config


def machine_config(butane: dict[str, Any]) -> dict[str, Any]:
    """The MachineConfig an openshift Butane config translates to: its metadata, the Ignition config in spec."""
    meta = butane["metadata"]
    return {"apiVersion": MACHINE_CONFIG_API, "kind": "MachineConfig",
            "metadata": {"labels": dict(meta["labels"]), "name": meta["name"]},
            "spec": {"config": ignition(butane)}}
