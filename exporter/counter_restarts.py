"""Telling a new ModelMesh container from the old one's reads, for the counter window (`counters.CounterWindow`):
which series prove a restart (a count that went down; every labelled series gone with no instance record published),
which kept counts a reading proves a dead container's, and which last counts a restart told now counts on from.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from exporter.counter_ceilings import Series
from exporter.modelmesh_text import Labels

__all__ = ["kept_across", "proven_old", "unpublished", "went_down"]


def proven_old(uncertain: set[Series], counts: Mapping[Series, float], seen_at: Mapping[Series, float],
               series: Mapping[Series, float]) -> set[Series]:
    """The series kept at the last restart told, unread since (`uncertain`), whose kept counts this reading
    proves a dead container's: one back below its kept count, and those last read at or before it. Here they
    count in full, as a series never seen does; missing, their counts are forgotten.

    A kept count may be the old container's: a series read after another's last read of the old container may
    have been read of either (nothing tells which). Back below it, it is a new container's, whose counts start
    at 0; read as a count that went down, one restart was said twice (a second "ModelMesh restarted" line, the
    restarts seen 1 -> 2, and no rate at that read: a reviewer's fuzz, 55 runs in 2000 with a tenth of the
    series missing from each body). A container new since its last read is new since every read before it
    too, so the counts kept from those are dead as well: counted on from, the requests a new container served
    up to them were lost (a fuzz's `requests_total` 15 short where it had been right). A second restart is
    still told, by the other series that go down with it (read since the first was told). The doubt ends at a
    series' first read after the restart was told."""
    if not uncertain:
        return set()
    below = [seen_at[key] for key in uncertain if key in series and series[key] < counts[key]]
    if not below:
        return set()
    last = max(below)
    return {key for key in uncertain if seen_at[key] <= last}


def kept_across(series: Mapping[Series, float], counts: Mapping[Series, float], seen_at: Mapping[Series, float],
                previous_at: float) -> dict[Series, float]:
    """The series whose last count may be the new container's, at a restart told now: their counts, the
    baselines its series count on from (the others count in full, and their old counts are forgotten).

    The restart came after the last read of each series that went down (its count there was the old
    container's), or after the last reading where no series did (a new JVM not publishing yet). A series read
    after that may have been read of the new container, the restart untold: with per-model metrics on, a new
    container that first serves only a model new to the pod has none of the old series, and its record
    published, nothing tells it from the old one (a body may lack series). That series counted in full then;
    counted in full again now, its requests counted twice (a reviewer's `requests_total` jumped by 41 in a
    read where 11 requests came). Counted on from its last count, it counts each request once; what it had
    before the restart, if its last read was still the old container's, is not counted (never twice, at
    worst less: nothing tells which container it was read of). `counts`: the last counts, less those of the
    series whose counts are proven the old container's (`proven_old`)."""
    down = [seen_at[key] for key, value in series.items() if value < counts.get(key, value)]
    told_after = max(down, default=previous_at)
    return {key: count for key, count in counts.items() if seen_at[key] > told_after}


def went_down(series: Mapping[tuple[str, Labels], float], counts: Mapping[Series, float]) -> str | None:
    """Why this reading is of a new container, as its counts prove, or None. ModelMesh never drops a series
    in its life, so a counter that went down is a restart. Series missing are not, however many: a body may
    lack them (one without any counter series but with the instance record never gets here: no news). `counts`:
    the last counts, less those of the series whose counts are proven the old container's (`proven_old`)."""
    down = sum(1 for key, value in series.items() if value < counts.get(key, value))  # new: not down
    return f"{down} of its counter series went down" if down else None


def unpublished(series: Mapping[tuple[str, Labels], float], instance_record: bool,
                remembered: Iterable[Series]) -> str | None:
    """Why this reading is of a new container though no count went down, or None: its labelled series are all
    missing, and it has published no instance record (`instance_record` False: capacity 0): a new JVM's
    gauges read 0 until it first publishes one. That is how a new container looks by default (per-model
    metrics off, and a model server that does not limit model concurrency, so ModelMesh never times its
    queue): its unlabelled histograms are at 0 as the old one's were, none went down, and without this its
    first reading was taken for the old container's: a rate of the old counts over the window, and the new
    requests counted only beyond the old counts. A body cut down to the instance gauges of a container that
    has not published its record yet looks the same, and is read as a restart too: nothing tells them apart."""
    if instance_record:
        return None
    # Of every series remembered, not only the last reading's: one that lacked them (a body missing the only
    # code served, with per-model metrics off) left none to miss, and the new JVM went untold
    labelled = [key for key in remembered if key[1]]
    if labelled and not any(key in series for key in labelled):
        return (f"none of its {len(labelled)} labelled counter series is left, and it has published no "
                "instance record yet")
    return None
