"""The log lines of runtimes whose state changed in one refresh: each said once, and a fleet's in a few lines.

A runtime is logged when it starts or stops being served, complete or warming up: `runtime NS/DEPLOYMENT: 1/2
ready pods fresh; <why>`. One at a time that is the line to read. But a refresh can change thousands at once:
the first refresh after every start (or a rollout of the adapter) finds every runtime, and a broken network
policy or a lost node turns hundreds stale together. One line per runtime then is 5,000 lines saying the same
thing at each restart. So a refresh that changes more than `NAMED` runtimes logs one line per state instead,
with how many, the first few named (`autoscaler.log_lists`) and the first one's own line as an example;
which runtimes exactly, and why, is in `modelmesh_autoscaler_runtime_values_known` and `/debug/runtimes`.
"""

from __future__ import annotations

import logging
from collections import defaultdict

from autoscaler.log_lists import NAMED, few
from autoscaler.model import RuntimeView
from autoscaler.policies.decision import SOURCE_DOWN

log = logging.getLogger("autoscaler.refresher")


def changed(before: RuntimeView | None, after: RuntimeView) -> bool:
    """Whether `after` is worth a line: the runtime is new, or is served, complete or warming up where it was
    not (or the other way round)."""
    return (before is None or before.known != after.known or before.complete != after.complete
            or bool(before.warming_up) != bool(after.warming_up))


def _state(view: RuntimeView) -> str:
    if view.scaled_to_zero:
        return "scaled to zero (nothing to judge; 503, the HPA holds)"
    if view.complete:
        return "serving"
    if view.warming_up:
        return "warming up (503 until every Ready pod is fresh)"
    if view.known:
        return "holding values (some Ready pods not fresh)"
    return "unknown (503)"


def _level(view: RuntimeView) -> int:
    """INFO for a runtime served in full, or scaled to zero (nothing is wrong); else WARNING."""
    return logging.INFO if view.complete or view.scaled_to_zero else logging.WARNING


def _line(view: RuntimeView) -> str:
    if view.reason.startswith(SOURCE_DOWN):  # its pods' samples are the last good ones, kept: none read now
        return f"runtime {view.key}: {view.ready_pods} ready pods, none read; {view.reason}"
    return f"runtime {view.key}: {view.fresh_pods}/{view.ready_pods} ready pods fresh; {view.reason or 'serving'}"


class RuntimeTransitions:
    """Collects one refresh's changed runtimes (`note`), then logs them (`flush`)."""

    def __init__(self) -> None:
        self._views: list[RuntimeView] = []

    def note(self, before: RuntimeView | None, after: RuntimeView) -> None:
        if changed(before, after):
            self._views.append(after)

    def flush(self) -> None:
        views, self._views = self._views, []
        if len(views) <= NAMED:
            for view in views:
                log.log(_level(view), "%s", _line(view))
            return
        by_state: dict[str, list[RuntimeView]] = defaultdict(list)
        for view in views:
            by_state[_state(view)].append(view)
        for state, group in by_state.items():
            level = _level(group[0])
            keys = [str(view.key) for view in group]
            if len(group) == 1:
                log.log(level, "%s", _line(group[0]))
                continue
            log.log(level, "%d runtimes now %s: %s (e.g. %s)", len(group), state, few(keys), _line(group[0]))
