"""Garbage-collector settings for the process that runs the refresh (and the one-process mode).

A refresh allocates tens of thousands of short-lived container objects (per-pod views, tuples, dicts of one
runtime's decision) and frees them a refresh later. With CPython's default thresholds (700, 10, 10) the
young generation is collected every 700 net allocations, and each of those collections also walks whatever
has not yet been promoted; every 10th young collection walks the middle generation, and full collections
walk every object the process holds — modules, classes, the Kubernetes client's generated models — none of
which will ever be garbage. On `bench/bench_refresh.py` (10,000 pods) that is about 15% of a refresh.

`tune_for_refresh()` does two things, once, after start-up:
- `gc.freeze()`: everything alive now (imports, settings, clients) goes to the permanent generation, which
  no collection walks. Objects allocated later are collected as before.
- thresholds of `THRESHOLDS` instead of (700, 10, 10): a refresh's short-lived objects mostly die (their
  reference counts drop to zero) before a collection would see them, so far fewer young collections run,
  each over a young generation that is still small (tens of thousands of objects, a few MiB); and the
  views a refresh keeps until the next one are walked again by the middle generation every 20 young
  collections (about 1M allocations, a few refreshes at 10,000 pods) rather than every 10 of 700. Full
  collections keep their rule, over the objects not frozen: reference cycles are still found, a few
  refreshes later than with the defaults.

Measured alternately in one process (10,000 pods in 100 runtimes, README "One refresh's work"): the same as
with the collector off, about 8% under the defaults; `gc.freeze()` alone does not pay there (fewer objects
counted as long-lived make full collections more frequent), which is why the thresholds go with it.

Reference cycles are made in a refresh whatever the fleet: on Python 3.11 every closed connection is one
(asyncio's socket transport keeps a bound method of itself until the collector frees it: a pod deleted, an
exporter that resets or answers `Connection: close`). At 50,000 a small fleet went hours without a
collection, and the closed connections of every churned pod piled up meanwhile (docs/performance.md, "The
refresh process's memory under churn"). So `CollectAfterRefresh.after_refresh`, a listener `RefreshStack`
adds, looks at the young generation's count when a refresh ends, once its passing objects are freed: if no
collection ran since the last look and the count has grown by `GROWTH_BEFORE_COLLECTING` since, what grew
is garbage or new state, and a full collection frees the garbage, of every age (a connection open across a
collection and closed later is in an older generation). It walks what came after start-up (frozen): a few
thousand objects at a small fleet. A fleet without churn grows by a few objects a refresh (3 at 1,000
runtimes), so a collection every few hours; one large enough to reach the threshold in a refresh runs young
collections of its own, and `after_refresh` starts none.

Only the refresh process calls `tune_for_refresh` (`workers._refresh_process`, `server.serve_in_process`). A
serving worker keeps the default thresholds (a request leaves next to no container objects behind: about one young
collection every 400 requests) but freezes what its start-up left alive (`tune_for_serving`): its full
collections then walk only what came after, not the tens of thousands of objects of its imports and clients.
Nothing either changes alters what is computed: only when garbage is found.
"""

from __future__ import annotations

import gc
from typing import Final

THRESHOLDS: Final = (50_000, 20, 10)
"""`gc.set_threshold` in the refresh process: 50,000 allocations (net of frees) between young collections,
20 young collections per middle one, 10 middle ones per full one (Python's default)."""

GROWTH_BEFORE_COLLECTING: Final = 2_000
"""Net allocations of container objects over refreshes that ran no collection, counted at their ends, after which
`CollectAfterRefresh` collects: about 300 closed connections' cycles, a few hundred kB."""


def tune_for_refresh() -> None:
    """Freeze what start-up left alive and set `THRESHOLDS` (see the module docstring).

    Call it once start-up is over (imports done, clients built); calling it again freezes what has been
    allocated since, which is harmless.
    """
    gc.collect()  # start-up garbage is collected rather than frozen forever
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


class CollectAfterRefresh:
    """A full collection at the end of a refresh once the young generation has grown by
    `GROWTH_BEFORE_COLLECTING` over refreshes that ran no collection (see the module docstring): the garbage a
    small fleet's refreshes leave waits for that much, not for the 50,000 of `THRESHOLDS`."""

    def __init__(self) -> None:
        self._collections = _collections()
        self._young_at_start: int | None = None
        """The young count at the end of the first refresh after a collection: what that refresh allocated,
        its views and the like, which the next one frees. Growth is counted from there."""

    async def after_refresh(self, views: object) -> None:
        """A refresh listener (`Refresher.listeners`); `views` unused."""
        young = gc.get_count()[0]
        if self._young_at_start is None or _collections() != self._collections:
            self._young_at_start = young
        elif young - self._young_at_start > GROWTH_BEFORE_COLLECTING:
            gc.collect()
            self._young_at_start = None
        self._collections = _collections()


def _collections() -> int:
    """How many collections this process has run, of any generation (each collects the young one), those the
    thresholds started and `gc.collect`'s alike."""
    return sum(int(generation["collections"]) for generation in gc.get_stats())


def tune_for_serving() -> None:
    """Freeze what a serving worker's start-up left alive, once it is about to serve (see the module
    docstring); thresholds stay Python's."""
    gc.collect()
    gc.freeze()
