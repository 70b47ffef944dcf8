"""An exporter horizon shorter than `target_lru_age_s`: what the decision says about it, and why it holds.

The cache need counts the copies served within `target_lru_age_s` (docs/design.md, Recommendation), from each
pod's last-served times. An exporter keeps a model there for its `--model-recency-horizon` only (an hour by
default) and says so (`modelmesh_exporter_model_recency_horizon_seconds`, `PodSample.recency_horizon_s`). With a
shorter horizon the count covers the horizon, not the window: a model served before it is dropped by the exporter,
not unused, and the recommendation fell on that, with nothing said. So while the shortest horizon of a runtime's
pods is below its window, the view warns, naming both settings and what to set, and the cache term may rise but not
fall (`recommend`): the simplest rule that cannot lower the recommendation on data the exporter dropped.
"""

from __future__ import annotations

from typing import Final

HORIZON_FLAG: Final = "--model-recency-horizon"
HORIZON_ENV: Final = "EXPORTER_MODEL_RECENCY_HORIZON"
WINDOW_SETTING: Final = "target_lru_age_s"


def short_horizon_cause(horizon_s: float, window_s: float) -> str:
    """Why the cache term holds, for `held` in /debug and the reason in the logs."""
    return (f"the exporters keep per-model use for {horizon_s:g} s ({HORIZON_FLAG}), less than {WINDOW_SETTING} "
            f"{window_s:g} s")


def short_horizon_warning(key: object, horizon_s: float, window_s: float) -> str:
    """The view's warning (/debug `warnings`; the refresh logs it once per change: `horizon_log`)."""
    return (f"runtime {key}: {short_horizon_cause(horizon_s, window_s)}: the cache need counts only the models "
            f"served within {horizon_s:g} s, so the cache term is held (may rise, not fall). Set the exporter "
            f"sidecar's {HORIZON_FLAG} "
            f"({HORIZON_ENV}) to at least {window_s:g}, or lower {WINDOW_SETTING} (config file or annotation "
            f"autoscaler.modelmesh.io/target-lru-age-s) to at most {horizon_s:g}")


def is_short_horizon_warning(warning: str) -> bool:
    """Whether one of a view's warnings is `short_horizon_warning`'s."""
    return f"({HORIZON_FLAG}), less than {WINDOW_SETTING}" in warning
