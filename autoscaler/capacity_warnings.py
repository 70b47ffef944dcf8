"""The no-capacity warning of a refresh's runtimes, a fleet's in one line.

A runtime without a capacity signal (no pod reports a GPU and `target_rps_per_pod` is not set) never scales
below its Ready pods; the decision carries the warning in its view (`/debug` shows it under `warnings`) and
remembers that it was said (`RuntimeMemory.warned_no_capacity`), so it is said once per runtime per start.
Said by the decision as it decided, one line per runtime, a CPU fleet of a thousand runtimes wrote a thousand
lines naming the same setting at every start. So the refresh collects the runtimes newly warned about and says
them as `transition_log` says a refresh's changed runtimes: one line each up to `NAMED`, else one line with the
count, the first few named and one runtime's own line as an example.
"""

from __future__ import annotations

import logging

from autoscaler.log_lists import NAMED, few
from autoscaler.model import RuntimeView
from autoscaler.policies.recommendation import NO_CAPACITY_SETTING

log = logging.getLogger("autoscaler.refresher")


class NoCapacityWarnings:
    """Collects one refresh's runtimes newly without a capacity signal (`note`), then logs them (`flush`)."""

    def __init__(self) -> None:
        self._views: list[RuntimeView] = []

    def note(self, view: RuntimeView, warned_before: bool, warned_now: bool) -> None:
        """`warned_before`, `warned_now`: the runtime's memory of the warning before and after this refresh's
        decision (`warned_no_capacity`); it is said when it flips on."""
        if warned_now and not warned_before and view.warnings:
            self._views.append(view)

    def flush(self) -> None:
        views, self._views = self._views, []
        if len(views) <= NAMED:
            for view in views:
                log.warning("%s", view.warnings[0])
            return
        setting = NO_CAPACITY_SETTING
        log.warning("%d runtimes: no capacity signal (no pod reports a GPU and %s is not set): %s; their "
                    "recommendations never fall below their Ready pods. Set %s in the policy file's defaults: "
                    "for all, or per runtime (annotation autoscaler.modelmesh.io/%s); each runtime's /debug "
                    "says it under warnings (e.g. %s)", len(views), setting, few([str(v.key) for v in views]),
                    setting, setting.replace("_", "-"), views[0].warnings[0])
