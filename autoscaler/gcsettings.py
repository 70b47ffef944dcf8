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

Only the refresh process calls it (`workers._refresh_process`, `server.serve_in_process`). A serving worker
keeps the default thresholds (a request leaves next to no container objects behind: about one young
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


def tune_for_refresh() -> None:
    """Freeze what start-up left alive and set `THRESHOLDS` (see the module docstring).

    Call it once start-up is over (imports done, clients built); calling it again freezes what has been
    allocated since, which is harmless.
    """
    gc.collect()  # start-up garbage is collected rather than frozen forever
    gc.freeze()
    gc.set_threshold(*THRESHOLDS)


def tune_for_serving() -> None:
    """Freeze what a serving worker's start-up left alive, once it is about to serve (see the module
    docstring); thresholds stay Python's."""
    gc.collect()
    gc.freeze()
