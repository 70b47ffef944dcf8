"""How much of an exporter's answer the adapter will read: any pod of a discovered runtime that declares the
exporter port answers the scrape, so its text is a tenant's, untrusted, and read in the refresh's event loop.

The fast reader (`exporter_text`) reads the exporter's own shape in one pass in C, linear in the text: its check
for a label named twice on a line, the one expression of its own with a backreference, is bounded by
`MAX_LABELS_PER_LINE` (the exporter writes at most three labels on a line). A text the fast reader does not know
goes to `prometheus_client`'s parser, pure Python, about 0.5 to 1 s of the event loop per MiB whatever its shape
(`bench/bench_exporter_text.py`): 15 such pods used up a 15 s refresh under the 1 MiB body cap. So a text in any
other shape is read only up to `FALLBACK_MAX_BYTES`, at most about 30 to 65 ms of a refresh per pod, and a line
with more labels than `MAX_LABELS_PER_LINE` is refused in any shape. A refused answer is a failed scrape (reason
`parse`, the pod's last good sample held, the problem in the log and in /debug), as any garbled answer is.
"""

from __future__ import annotations

from itertools import repeat
from typing import Final

MAX_LABELS_PER_LINE: Final = 16
"""The most labels on one line of an answer the adapter reads (the exporter writes at most 3: a pod's namespace,
name and uid). Past it the answer is refused: the duplicate-label check costs up to this many passes over a
line, and a tenant's single line of 25,000 labels held the refresh for minutes when that was unbounded."""
FALLBACK_MAX_BYTES: Final = 64 * 1024
"""The largest answer read by `prometheus_client`'s parser, the reader of any text not in the exporter's own shape
(an old exporter's, one with an escape the exporter never writes): about 30 to 65 ms of the refresh per pod. The
exporter's own output, 5 KB with 8 GPUs, about 80 bytes more per model served recently, takes the fast reader
up to the 1 MiB body cap (`scrape_fetch.MAX_BODY_BYTES`)."""
_LABEL_START: Final = '="'
"""How a label's value starts, counted to find a line with too many labels in one C pass (`str.count`). A label
value holds a quote only escaped (`\\"`), so the count is the labels', but for a value ending in `=`."""


def over_limit(text: str) -> str | None:
    """What is over which limit in an answer the fast reader did not read, or None to read it with the library:
    said for the log and /debug, with the limit's name, which `docs/configuration.md` describes."""
    if text.count(_LABEL_START) > MAX_LABELS_PER_LINE:  # else no line can be over it: one C pass, no lines made
        lines = text.split("\n")
        counts = list(map(str.count, lines, repeat(_LABEL_START)))  # in C: a Python loop cost 90 ms a MiB
        for number, labels in enumerate(counts):
            if labels > MAX_LABELS_PER_LINE and not lines[number].startswith("#"):
                return (f"line {number + 1} has {labels:,} labels, over the {MAX_LABELS_PER_LINE} a line the adapter "
                        "reads (MAX_LABELS_PER_LINE; the exporter writes at most 3): not the exporter's metrics, "
                        "refused unread")
    size = len(text.encode())
    if size > FALLBACK_MAX_BYTES:
        return (f"{size:,} bytes not in the exporter's own shape, over the {FALLBACK_MAX_BYTES // 1024} KiB the "
                "adapter reads of any other shape (FALLBACK_MAX_BYTES; the exporter's own output is read up to "
                "1 MiB): refused unread. Run the exporter image the adapter ships with, not another server at the "
                "exporter port")
    return None
