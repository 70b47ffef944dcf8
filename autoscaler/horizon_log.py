"""The log lines of runtimes whose exporters keep per-model use for less than `target_lru_age_s`: once per change.

The decision puts the warning in the runtime's view (`/debug` shows it under `warnings`,
`policies.recency_horizon`) at every refresh while it lasts; the log says it when it appears or its numbers change,
and once when it is gone, not at every refresh. A fleet whose sidecars all run one short horizon (a policy
file's `target_lru_age_s`, 600 s by default, raised for every runtime above the sidecars' horizon, an hour by
default) is one line with the count, the first few named and one runtime's own line as an example (`log_lists`),
not 5,000 lines at every start.

Per runtime the refresh pays two truth tests (`Refresher._decide_runtime`): a view without warnings, of a runtime not
warned about, is not looked at.
"""

from __future__ import annotations

import logging

from autoscaler.log_lists import say_each_or_counted
from autoscaler.model import RuntimeKey, RuntimeView
from autoscaler.policies.recency_horizon import HORIZON_ENV, HORIZON_FLAG, WINDOW_SETTING, is_short_horizon_warning

log = logging.getLogger("autoscaler.refresher")


class ShortHorizonLog:
    """What each runtime's short-horizon warning last said (`note` each view that has warnings or was warned
    about, then `flush` once a refresh)."""

    def __init__(self) -> None:
        self.said: dict[RuntimeKey, str] = {}
        """The warning last logged, by runtime: truthy while any runtime is warned about."""
        self._new: list[str] = []
        self._gone: list[RuntimeKey] = []

    def note(self, view: RuntimeView) -> None:
        """One runtime's view of this refresh; call it only where the view has warnings or the runtime is in
        `said` (the refresh's two truth tests)."""
        warning = next((text for text in view.warnings if is_short_horizon_warning(text)), None)
        if warning is None:
            if self.said.pop(view.key, None) is not None:
                self._gone.append(view.key)
        elif self.said.get(view.key) != warning:
            self.said[view.key] = warning
            self._new.append(warning)

    def forget(self, key: RuntimeKey) -> None:
        """A runtime gone or created again is forgotten silently (a runtime deleted says nothing of its sidecars;
        one created again is warned about afresh)."""
        self.said.pop(key, None)

    def flush(self) -> None:
        new, self._new = self._new, []
        gone, self._gone = self._gone, []
        say_each_or_counted(
            log, new, lambda warning: warning,
            lambda count, named: (f"{count} runtimes: their exporters keep per-model use for less than "
                                  f"{WINDOW_SETTING} ({HORIZON_FLAG}): {named}; their cache terms are held (may rise, "
                                  f"not fall). Set the sidecars' {HORIZON_FLAG} ({HORIZON_ENV}) to at least "
                                  f"{WINDOW_SETTING}, or lower {WINDOW_SETTING}; each runtime's /debug says it under "
                                  f"warnings (e.g. {new[0]})"),
            shown=lambda warning: warning.split(":", 1)[0].removeprefix("runtime "), level=logging.WARNING)
        say_each_or_counted(
            log, gone,
            lambda key: (f"runtime {key}: no Ready pod's exporter keeps per-model use for less than "
                         f"{WINDOW_SETTING} now ({HORIZON_FLAG}); the cache term may fall again"),
            lambda count, named: (f"{count} runtimes: no Ready pod's exporter keeps per-model use for less than "
                                  f"{WINDOW_SETTING} now ({HORIZON_FLAG}): {named}; their cache terms may fall "
                                  "again"))
