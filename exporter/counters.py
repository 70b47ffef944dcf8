"""Running totals of ModelMesh's counters across restarts, and the load rates over a trailing window.

ModelMesh reports cumulative histograms; the autoscaler needs rates over a window. Each scrape's counters
are folded into running totals that survive a ModelMesh restart, and rates are the change of those totals
across the last `load_window_s`.

Counters are followed **per series** (name and labels), the way Prometheus's `rate()` does, not as one sum.
ModelMesh never drops a series while it runs, so a reading is of a new container (a restart) when a series went
down, or when its labelled series are all gone and it has published no instance record (a new JVM that has served
nothing yet). Then everything the reading holds is the new container's, counted in full, and the old container's
counts are forgotten, but for the series read since the old container's last read (a restart told reads late, where
a new container first served only models new to the pod: those may be the new container's, already counted, and
count on from their last counts, never twice; one of those back below its kept count later is the new container's,
counted in full, not a second restart): a series that shows up later is the new container's and counts in
full too, not beyond the old count (a crash-looping ModelMesh, each JVM serving fewer requests than the first, was
otherwise counted as serving nothing). Outside a restart a series missing from one body adds nothing and keeps its
last count, so it does not count twice when it comes back; a new series counts in full. A body that carries the
instance record but no counter series at all (with per-model metrics on every series is labelled, and a body cut
down to the instance gauges has none left) is no news: it adds nothing (a point of the rate window at the last
totals), and the next read is compared with the one before it, counting on from the last counts (read as a restart,
the next good read counted ModelMesh's whole history again). A cut body without the instance record is the same as a
new JVM that has not published it yet, and is read as a restart: the next read counts what the container holds in
full. Comparing sums instead would read any missing series as a restart. A body without an unlabelled series the
last one had is refused instead (ModelMesh serves those from its start, at 0 in a new container): it is cut or
garbled, and read as a restart it would count the whole history again too. Where such a body came first (the
exporter's first read), the read that brings the unlabelled series is a new baseline: its series were missing
before, not new since. (With per-model metrics on there is no unlabelled series: a first read without counter series
leaves nothing to count from, and the next read counts what ModelMesh served before the exporter started.) A body
whose counts rose faster than the signals' ceilings allow (`exporter.counter_ceilings`) is refused too, the last
good values kept, and is the baseline the next readings count on from (`exporter.counter_jumps`): a count that
jumped once and stays costs one read, not every read after it.

Logs go to the ModelMesh collector's logger (`exporter.collectors.modelmesh`), the one operators filter on. What
proves a new container is in `counter_restarts`, the bodies refused as cut in `counter_body_checks`, the totals and
the rates over the window in `counter_rates`.
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import KeysView, Mapping, Sequence

from exporter import names
from exporter.counter_body_checks import check_requests_kept, check_unlabelled_kept
from exporter.counter_ceilings import Series, implausible_step, series_text
from exporter.counter_jumps import CounterJumps
from exporter.counter_rates import Rates, Totals, window_rates
from exporter.counter_restarts import kept_across, proven_old, unpublished, went_down
from exporter.modelmesh_text import COUNTER_FIELDS, REQUESTS, Labels, ModelMeshReading, ScrapeFailure

log = logging.getLogger("exporter.collectors.modelmesh")


class CounterWindow:
    """Running totals across counter resets, and rates over a trailing window.

    The first reading is the baseline: totals start at 0 there, as any counter of a process that starts. Were
    they to start at ModelMesh's own counts, an exporter restart after a ModelMesh restart would set
    `requests_total` back from the absorbed total to ModelMesh's count since its restart, which Prometheus
    reads as a counter reset: every request ModelMesh counted since its restart, served in one scrape
    interval. Starting at 0, the restart adds only what the new exporter counted. After a gap between
    readings longer than the window plus `late_s`, or a counter reset, the window starts again at that reading,
    and no rate is given until a second reading comes.
    """

    def __init__(self, window_s: float, forget_after_s: float = 3600.0, *, late_s: float = 0.0) -> None:
        """`forget_after_s`: how long a vanished series is remembered (bounds memory under label churn).

        `late_s`: how much farther apart than the window two readings may be and still not be a gap: the read's
        timeout. A read answers up to its timeout after it starts, so reads that came on time are up to the
        interval plus the timeout apart, and the window may be as short as the interval. Without it, a window
        equal to the interval (which the settings allow) took every reading, a few milliseconds more than the
        interval after the last, for a gap: no rate, ever, and a log line at every read."""
        self.window_s = window_s
        self.late_s = late_s
        self._forget_after_s = forget_after_s
        self._history: deque[Totals] = deque()
        # Two tables, not one of (count, seen at) pairs: each is updated from the reading's own dicts, whose
        # stored hashes are reused (a series key is a tuple, whose hash Python does not keep, and hashing the keys
        # was most of the window's cost: docs/performance.md)
        self._counts: dict[Series, float] = {}
        """Each series' last count."""
        self._seen_at: dict[Series, float] = {}
        """When each series was last read."""
        self._keys: dict[str, dict[Labels, Series]] = {}
        """Field → labels → the key of that series in the tables: one key per series, not one per series and
        reading (a new key each read held in `_current` and beside the tables' own was 17 MiB at 80,000 models,
        and the tables made anew to drop the old keys 20 MiB more while a read was folded in)."""
        self._current: KeysView[Series] = {}.keys()
        """The series of the last reading (its own keys, not a copy: a set of 300,000 series was 16 MiB)."""
        self._uncertain: set[Series] = set()
        """The series kept as baselines at the last restart told (`counter_restarts.kept_across`) and not read
        since: their counts may be the old container's. One back below its count is the new container's, counted
        in full, not a second restart (`counter_restarts.proven_old`)."""
        self._jumps = CounterJumps()
        self._refused_at: float | None = None
        """When the last reading refused for its counts' rise was read, until the next reading is accepted: the
        rate window starts again there, as what that reading added is not counted."""
        self.resets = 0
        """ModelMesh restarts seen."""
        self.restarts = 0
        """Times the rate window started again (after a gap longer than the window plus `late_s`, or a counter
        reset)."""
        self.news: str | None = None
        """The line that says why the rates start again at the last reading: a new ModelMesh container, or no good
        reading for longer than the window plus `late_s` (None: neither). The collector says it, within its
        recovery line when that reading ends a logged outage (`CollectorHealth.succeeded`): a crash-looping
        ModelMesh, or an outage longer than the window, said the end of every outage twice at the same read."""

    def add(self, reading: ModelMeshReading, at: float) -> frozenset[Labels] | None:
        """Fold in one reading taken at monotonic time `at` (seconds); ScrapeFailure, changing nothing, for one
        that cannot be ModelMesh's (`counter_body_checks`), or whose counts rose faster
        than any pod's (`exporter.counter_ceilings`: a garbled count of 1e308, published, was a rate of as much
        for a whole window, on the dashboards and alerts that read the exporter's series). That one changes only
        what the next readings count on from (`exporter.counter_jumps`), not what is served.

        Returns the labels of the request-count series that rose since the last reading: a series of a model
        served since then (all of a new container's with a count, at a restart; a new series in full). None
        at the first reading, which has nothing to compare with (`exporter.model_recency` decides what that
        means)."""
        self.news = None
        previous = self._history[-1] if self._history else None
        body = self._keyed(reading)
        self._jumps.forget_unseen((body, self._seen_at), at - self._forget_after_s)
        unjumped = self._jumps.read(body)
        if unjumped.stuck is not None:
            raise ScrapeFailure(names.REASON_PARSE, (
                f"ModelMesh's {series_text(unjumped.stuck)} still reads {body[unjumped.stuck]:g}, the count the "
                "refused read had: garbled, or jumped with no request since; read from there it would say this pod "
                "served nothing, so no read is taken until it moves (the last good values stay)"))
        series = unjumped.counts
        check_unlabelled_kept(self._current, series)
        old = proven_old(self._uncertain, self._counts, self._seen_at, series)
        counts: Mapping[Series, float] = (
            {key: count for key, count in self._counts.items() if key not in old} if old else self._counts)
        # Cut down to the instance gauges (per-model metrics on), or a container with no request yet: no news, and
        # no reading of which series are left (`_current`): the one after it is compared with the one before
        cut = previous is not None and not series and reading.has_instance_record
        restart = None if previous is None or cut else (
            went_down(series, counts) or unpublished(series, reading.has_instance_record, self._counts))
        if previous is not None and not restart:
            check_requests_kept(self._current, self._counts, series)
        # ModelMesh serves its unlabelled histograms from its start: appearing now, they were missing from the
        # reads before (a body cut or filtered), whose series are no baseline to count from
        rebase = previous is not None and not restart and any(
            (field, ()) in series and (field, ()) not in self._current for field in COUNTER_FIELDS)
        # The first reading is the baseline: what ModelMesh counted before the exporter started is not ours.
        values: dict[str, float] = dict.fromkeys(COUNTER_FIELDS, 0.0) if previous is None else dict(previous.values)
        risen: set[Labels] | None = None
        history: Sequence[Totals] = self._history
        if previous is not None:
            risen = set()
            increases: dict[Series, float] = {}
            # A new series, or a series of a new container not read since it started: all of it happened since the
            # last reading. A series read since then keeps its count as the baseline (`counter_restarts.kept_across`).
            before: Mapping[Series, float] = (
                {} if rebase else kept_across(series, counts, self._seen_at, previous.at) if restart else counts)
            for key, value in () if rebase else series.items():
                increase = increases[key] = value - before.get(key, 0.0)
                values[key[0]] += increase
                if increase > 0 and key[0] == REQUESTS:
                    risen.add(key[1])
            if self._refused_at is not None and unjumped.stayed and not (restart or rebase or unjumped.ended):
                # What the refused reading added is not counted: this one's increases are since then
                history = [Totals(self._refused_at, previous.values)]
            absurd = implausible_step([totals.values for totals in history], values, at - history[-1].at,
                                      increases, body)
            if absurd is not None:
                self._jumps.refused(body, series, before, at)
                self._refused_at = at
                raise ScrapeFailure(names.REASON_PARSE, absurd)
        self._jumps.accepted(unjumped)
        if restart:
            # Every series of the old container is gone with it: one that shows up later is the new container's,
            # counted in full. Kept as a baseline, a new JVM's series counted only beyond the old count: a
            # crash-looping ModelMesh whose JVMs each serve less than the first read as serving nothing. A series
            # read since the restart may be the new container's (`counter_restarts.kept_across`): its count stays
            # the baseline.
            kept = before.keys()
            gone = [key for key in self._counts if key not in kept]
            self._jumps.forget(gone)
            for key in gone:
                del self._counts[key]
                del self._seen_at[key]
            self._uncertain = {key for key in kept if key not in series}
        elif self._uncertain:
            # The old container's counts, unread now: one that shows up later is a new container's, in full
            gone = [key for key in old if key not in series]
            self._jumps.forget(gone)
            for key in gone:
                del self._counts[key]
                del self._seen_at[key]
            self._uncertain.difference_update(series)
            self._uncertain.difference_update(old)
        self._counts.update(series)
        self._seen_at.update(dict.fromkeys(series, at))
        if not cut:
            self._current = series.keys()
        gap = previous is not None and at - previous.at > self.window_s + self.late_s
        if rebase:
            self._history.clear()
            self.restarts += 1
            log.info("ModelMesh's unlabelled histograms are back after reads without them: this read is the new "
                     "baseline (nothing counted across the reads without them); no rates until the next one")
        elif previous is not None and (restart or gap):
            # A rate across a gap would average the gap in (low load right after a saturation); one across a
            # restart mixes two containers' counts. Start the window again from this reading: no rate until
            # the next one (docs/design.md, Missing data). The running totals go on counting.
            self._history.clear()
            self.restarts += 1
            after = f" after {at - previous.at:.0f} s without a reading" if gap else ""
            if restart:
                self.resets += 1
                self.news = (f"ModelMesh restarted ({restart}){after}: counting on from its new counts; no rates "
                             "until a second reading of the new container")
            else:
                self.news = (f"no good ModelMesh reading for {at - previous.at:.1f} s, more than the load window "
                             f"({self.window_s:g} s) plus the read timeout ({self.late_s:g} s): rates start again "
                             "from this reading")
        elif unjumped.ended:
            # Its count was garbled, not jumped: counted again from the last good count, but when the requests
            # between came is unknown (a rate over this step alone would show them as a spike)
            self._history.clear()
            self.restarts += 1
            self.news = (f"ModelMesh's counts are back below what the refused read had (a garbled read, not a jump; "
                         f"{unjumped.below} series): counted on from the last good read; no rates until the "
                         "next one")
        elif self._refused_at is not None and unjumped.stayed:
            self._history = deque(history)
            self.restarts += 1
            self.news = ("ModelMesh's counts stayed up where the refused read had them (jumped, or still "
                         "garbled): counting on from the refused read, what it added not counted")
        self._refused_at = None
        self._history.append(Totals(at, values))
        # Keep one point at or before the window start so the rate covers the whole window.
        while len(self._history) > 2 and self._history[1].at <= at - self.window_s:
            self._history.popleft()
        forget_before = at - self._forget_after_s
        if min(self._seen_at.values(), default=at) < forget_before:  # only under label churn: no loop otherwise
            stale = [key for key, seen in self._seen_at.items() if seen < forget_before]
            for key in stale:
                del self._counts[key]
                del self._seen_at[key]
            self._uncertain.difference_update(stale)
            self._jumps.forget(stale)
        self._forget_keys()
        return None if risen is None else frozenset(risen)

    def _keyed(self, reading: ModelMeshReading) -> dict[Series, float]:
        """The reading's counts by series, each series' key the one the tables hold (`_keys`)."""
        body: dict[Series, float] = {}
        for field in COUNTER_FIELDS:
            keys = self._keys.setdefault(field, {})
            for labels, value in reading.counters.get(field, {}).items():
                key = keys.get(labels)
                if key is None:
                    key = keys[labels] = (field, labels)
                body[key] = value
        return body

    def _forget_keys(self) -> None:
        """Keep `_keys` to the series the tables hold: those forgotten, and those only refused readings had."""
        if sum(len(keys) for keys in self._keys.values()) != len(self._counts):
            self._keys = {}
            for key in self._counts:
                self._keys.setdefault(key[0], {})[key[1]] = key

    @property
    def remembered(self) -> frozenset[Series]:
        """The series the window keeps anything of (a last count, a jump's baseline): those seen within
        `forget_after_s`, whose memory stays bounded however series come and go."""
        return frozenset(self._seen_at) | self._jumps.series

    @property
    def latest(self) -> Totals | None:
        return self._history[-1] if self._history else None
    def rates(self) -> Rates | None:
        """Rates over the window (or the time since the first reading, if shorter); None before two readings
        (`counter_rates.window_rates`)."""
        return window_rates(self._history)
