"""The bodies the counter window refuses as cut or garbled, changing nothing (ScrapeFailure): one without an
unlabelled series ModelMesh serves from its start, and one of the same container without any of the request series
the last read had. Taken as good, each read as a restart or as an idle pod (`counters.CounterWindow.add`).
"""

from __future__ import annotations

from collections.abc import KeysView, Mapping

from exporter import names
from exporter.counter_ceilings import Series
from exporter.modelmesh_text import COUNTER_FIELDS, REQUESTS, SAMPLE_OF_FIELD, Labels, ScrapeFailure

__all__ = ["check_requests_kept", "check_unlabelled_kept"]


def check_unlabelled_kept(current: KeysView[Series], series: Mapping[tuple[str, Labels], float]) -> None:
    """Refuse a reading without an unlabelled series the last one had (ScrapeFailure, changing nothing).

    ModelMesh serves its unlabelled histograms (queue delay and cache miss, without per-model metrics) from
    its start, at 0 in a new container: a body without one is cut or garbled, never a restart. Taken as
    good, it read as a restart (none of the last series left), and the next good read counted ModelMesh's
    whole history again as new load. (With per-model metrics on every series is labelled, and a new
    container has none before its first request: there a body without counters is taken, and adds nothing.)"""
    lost = sorted({SAMPLE_OF_FIELD[field] for field in COUNTER_FIELDS
                   if (field, ()) in current and (field, ()) not in series})
    if lost:
        raise ScrapeFailure(names.REASON_PARSE, f"ModelMesh output lacks {', '.join(lost)}, which it serves "
                            "from its start (cut short or garbled?)")


def check_requests_kept(current: KeysView[Series], counts: Mapping[Series, float],
                        series: Mapping[tuple[str, Labels], float]) -> None:
    """Refuse a reading of the same container without any of the request series the last one had
    (ScrapeFailure, changing nothing).

    ModelMesh never drops a series while it runs, so a body that lost every request series while another
    series the last read had above 0 is still there, not lower (no restart), is cut, garbled, or from a
    ModelMesh that names its request histogram otherwise. Taken as good, it was served as 0 requests/s, fresh
    and with nothing in the log: a busy pod read as idle. Where no such series proves the same container (a
    new one may publish its instance record before it serves, its unlabelled histograms at 0 as the old
    one's were), the reading is taken as before: missing series add nothing, and the new container's first
    requests are a restart (counts that went down)."""
    if not any(key[0] == REQUESTS for key in current):
        return
    if any(key[0] == REQUESTS and key in series for key in current):
        return
    if any(key in current and counts[key] > 0 for key in series):
        had = sum(1 for key in current if key[0] == REQUESTS)
        raise ScrapeFailure(names.REASON_PARSE, f"ModelMesh output lacks every {SAMPLE_OF_FIELD[REQUESTS]} "
                            f"series the last read had ({had}), while its other counts go on (no "
                            "restart): cut short, garbled, or the request histogram renamed?")
