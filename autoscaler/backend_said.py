"""How the adapter's log and /debug repeat what a backend said: quoted and cut short.

Any pod of a discovered runtime that declares the exporter port answers the scrape, and what it says of itself
reaches the log when its answer is refused: the pod it claims to run in, the line the library's parser could not
read. A label value may hold an escaped line break, which the reader decodes: written as it is, it ends the
adapter's line and starts one that reads like the adapter's own; and a value may be half a megabyte long. So such
text is written as Python writes a string (`repr`: a line break is `\\n`, quotes around it), at most
`SAID_CHARS` of it, as the request paths a client sends are (`autoscaler.api`). So are the words of the other
backends, which may say anything too: Prometheus's own error and warnings, an error page's title, a Kubernetes
Status's message. Apart from the sources and the Kubernetes layer, which both use it and may not import each other.
"""

from __future__ import annotations

from typing import Final

SAID_CHARS: Final = 200
"""The most characters of a backend's own words a log line or /debug repeats; its length is said past it."""


def quoted(text: str) -> str:
    """`text` quoted on one line, cut at `SAID_CHARS` with its whole length said: `'ns/pod'`, or
    `'nnn...' (500,014 characters)`."""
    if len(text) <= SAID_CHARS:
        return repr(text)
    shown = repr(text[:SAID_CHARS])
    return f"{shown[:-1]}...{shown[-1]} ({len(text):,} characters)"


def told(text: str) -> str:
    """`text` as it is where it is short and printable (a library's own words, `Server disconnected`), else
    `quoted`: a backend's words inside a library's message (aiohttp quoting an exporter's status line of a
    megabyte, Prometheus's `error` with terminal escapes and line breaks) reach the log and /debug cut short, on
    one line."""
    return text if len(text) <= SAID_CHARS and text.isprintable() else quoted(text)
