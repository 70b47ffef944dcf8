"""A backend's words as a 503's message may tell them: with no URL and no IP address in them.

The HPA controller copies a 503's message into the HPA's conditions and events, which `kubectl describe hpa` shows
to whoever may read HPAs. The sources' words name where they read (`http://10.2.0.7:9187/metrics: [Errno 111]
Connect call failed ('10.2.0.7', 9187)`, `Prometheus at http://prometheus-k8s.monitoring.svc:9090 has ...`): an
address in the cluster's network, which nobody reading an HPA can act on and which is not theirs to see, where the
pod's name (the message names it beside the words) and the port in the hint are what they can act on. The whole
words stay in /debug and the log, read on the adapter's own terms.

What goes: each URL, with the word that leads to it (`at`, `from`, `to`) or the colon after it where it begins the
words; a socket address as Python writes it (`('10.2.0.7', 9187)`); then any IPv4 or IPv6 address left (with its
port), said as "its address". Host names outside a URL stay: a word is no address unless it parses as one.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Final

_URL: Final = r"""(?P<q>['"]?)\b[A-Za-z][A-Za-z0-9+.-]*://[^\s'"<>;,()]*[^\s'"<>;,():.](?P=q)"""
"""A URL, quoted or not, up to the space or punctuation that ends it (a trailing colon or full stop is the
sentence's, not the URL's)."""
_LEADING_URL: Final = re.compile(rf"^{_URL}:?\s*")
_LED_URL: Final = re.compile(rf"\s+(?:at|from|to)\s+{_URL}")
_ANY_URL: Final = re.compile(_URL)
_SOCKET_ADDRESS: Final = re.compile(r"""\s*\(\s*['"][^'"]*['"](?:\s*,\s*\d+)+\s*\)""")
_ADDRESS_LIKE: Final = re.compile(r"""(?<![\w:.])['"]?\[?[0-9A-Fa-f]*[:.][0-9A-Fa-f:.%]*\]?(?::\d+)?['"]?(?![\w])""")
"""Anything an IP address (with a port, brackets or quotes) might be; `_address_said` keeps only what parses."""
ITS_ADDRESS: Final = "its address"


def _address_said(match: re.Match[str]) -> str:
    """The token as it is, or "its address" where it is an IP address (bracketed, quoted, with a port), followed by
    the sentence's own colon or full stop where it had one (`fe80::` ends in colons of its own)."""
    token = match.group()
    unquoted = token.strip("'\"")
    bare = unquoted.rstrip(".:")
    for end in range(len(unquoted), len(bare) - 1, -1):  # the longest address, its trailing colons its own
        core, trailer = unquoted[:end], "" if token != unquoted else unquoted[end:]
        host, colon, port = core.rpartition(":")
        for candidate in (core, core.strip("[]"), host.strip("[]") if colon and port.isdigit() else ""):
            try:
                ipaddress.ip_address(candidate.partition("%")[0])
            except ValueError:
                continue
            return ITS_ADDRESS + trailer
    return token


def without_addresses(words: str) -> str:
    """`words` with each URL and IP address cut out (the module's docstring says how and why)."""
    words = _LEADING_URL.sub("", words)
    words = _LED_URL.sub("", words)
    words = _ANY_URL.sub(ITS_ADDRESS, words)
    words = _SOCKET_ADDRESS.sub("", words)
    return _ADDRESS_LIKE.sub(_address_said, words)
