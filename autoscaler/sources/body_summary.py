"""An answer's body in a few words, for a line that says what answered instead of the backend asked.

Any reader of an HTTP backend meets the same strangers at its address (a login proxy's sign-in page, an
ingress's error page, another service): the scrape source and the Prometheus source both say them so, and a
line never quotes a whole page. Kept apart from both sources, so that the scrape path depends on no
Prometheus module.
"""

from __future__ import annotations

import re
from typing import Final

from autoscaler.backend_said import quoted

SUMMARY_CHARS: Final = 200
"""The most of a body quoted in a log line."""

_TITLE: Final = re.compile(r"<title[^>]*>(.*?)</title>", re.IGNORECASE | re.DOTALL)


def body_summary(text: str, content_type: str = "") -> str:
    """A body in a few words: an HTML page's title, or its start (quoted, cut at `SUMMARY_CHARS`)."""
    stripped = text.strip()
    if "html" in content_type.lower() or stripped[:1] == "<":
        title = _TITLE.search(stripped)
        if title is None:
            return "an HTML page"
        name = " ".join(title[1].split())
        # a page's own title: any text, as long as it likes (a NUL, a terminal escape), said as quoted words are
        return f'an HTML page titled "{name}"' if name.isprintable() and len(name) <= SUMMARY_CHARS else (
            f"an HTML page titled {quoted(name)}")
    first = " ".join(stripped.split())
    return repr(first[:SUMMARY_CHARS] + ("..." if len(first) > SUMMARY_CHARS else ""))
