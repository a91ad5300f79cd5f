"""A URL read as Ignition reads one: Go's ``net/url.Parse``, then the schemes and hosts its fetcher takes.

Ignition (and butane, which validates with Ignition's own code) refuses a ``contents.source`` that
``url.Parse`` refuses, or whose scheme is not one it fetches (coreos/ignition:config/v3_4/types/url.go
@7a03aaec, ``validateURL``: ``url.Parse`` error -> ErrInvalidUrl; schemes http, https, tftp, gs, oem, s3,
arn, data). ``url.Parse`` (golang/go:src/net/url/url.go: ``Parse``, ``parse``, ``parseAuthority``,
``parseHost``, ``validOptionalPort``, ``validUserinfo``, ``unescape``, ``shouldEscape``; the real butane
v0.29.0 judges every case of tests/unit/test_mig_parted_url.py, "unable to parse url") cuts the fragment
at the first ``#``, the query at the first ``?`` (the query is not checked), the authority at the first
``/``, the user information at the last ``@``; it refuses a ``%`` not followed by two hex digits in the
user information, host, path or fragment, a ``%``-escape of an ASCII byte in a host (but ``%25``), a port
that is not digits, a ``[`` host without its ``]``, and user information with a character outside
RFC 3986's. Two more fail only at the fetch, at first boot: an empty host (net/http: "http: no Host in
request URL") and a port above 65535 (net: "invalid port"). ``problem`` returns the first of these.
"""

from __future__ import annotations

import string

_HEX = frozenset(string.hexdigits)
_ALNUM = frozenset(string.ascii_letters + string.digits)
_HOST_OK = frozenset("!$&'()*+,;=:[]<>\"-_.~") | _ALNUM  # shouldEscape(c, encodeHost) is false
_USERINFO_OK = frozenset("-._:~!$&'()*+,;=%@") | _ALNUM  # validUserinfo
FETCHED_SCHEMES = ("http", "https")  # what migbake's schema lets tools.nvidia_mig_parted_url be


def _unescape(s: str, mode: str) -> str | None:
    """Go's ``unescape`` errors (``invalid URL escape``, ``invalid character in host name``), else None."""
    i = 0
    while i < len(s):
        c = s[i]
        if c == "%":
            if i + 2 >= len(s) or s[i + 1] not in _HEX or s[i + 2] not in _HEX:
                return f"invalid URL escape {s[i:i + 3]!r}"
            if mode == "host" and int(s[i + 1], 16) < 8 and s[i:i + 3] != "%25":
                return f"invalid URL escape {s[i:i + 3]!r} (a host escapes only non-ASCII bytes)"
            i += 3
            continue
        if mode in ("host", "zone") and ord(c) < 0x80 and c not in _HOST_OK:
            return f"invalid character {c!r} in host name"
        i += 1
    return None


def _valid_optional_port(port: str) -> bool:
    return port == "" or (port[0] == ":" and all(c in string.digits for c in port[1:]))


def _host(host: str) -> str | None:
    """``parseHost``'s errors, then the fetcher's (empty host, port above 65535)."""
    port = ""
    if host.startswith("["):
        i = host.rfind("]")
        if i < 0:
            return "missing ']' in host"
        port = host[i + 1:]
        if not _valid_optional_port(port):
            return f"invalid port {port!r} after host"
        zone = host.find("%25", 0, i)
        if zone >= 0:
            error = _unescape(host[:zone], "host") or _unescape(host[zone:i], "zone") or _unescape(host[i:], "host")
        else:
            error = _unescape(host, "host")
        name = host[1:i]
    else:
        i = host.rfind(":")
        if i >= 0:
            port = host[i:]
            if not _valid_optional_port(port):
                return f"invalid port {port!r} after host"
        error = _unescape(host, "host")
        name = host[:i] if i >= 0 else host
    if error:
        return error
    if not name:
        return "no host: Ignition's fetch fails at first boot (net/http: no Host in request URL)"
    if port[1:] and int(port[1:]) > 65535:
        return f"port {port[1:]} is above 65535: Ignition's fetch fails at first boot (net: invalid port)"
    return None


def problem(url: str) -> str | None:
    """Why Ignition refuses ``url`` (or fails to fetch it), in Go's words; None when it takes it."""
    rest, hashed, fragment = url.partition("#")
    scheme, colon, rest = rest.partition(":")
    if not colon or scheme.lower() not in FETCHED_SCHEMES:
        return f"scheme {scheme!r} is not http or https"
    rest = rest.partition("?")[0]
    if not rest.startswith("//"):
        return "no //host after the scheme"
    authority, slash, path = rest[2:].partition("/")
    at = authority.rfind("@")
    error = _host(authority[at + 1:])
    if error:
        return error
    if at >= 0:
        userinfo = authority[:at]
        if any(c not in _USERINFO_OK for c in userinfo):
            return "net/url: invalid userinfo"
        error = _unescape(userinfo, "userinfo")
        if error:
            return error
    return _unescape(slash + path, "path") or (_unescape(fragment, "fragment") if hashed else None)
