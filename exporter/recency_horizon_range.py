"""The longest time a served model is remembered, by either end: the exporter's `--model-recency-horizon` and the
adapter's `target_lru_age_s` take the same week.

The adapter counts per-model use only as long as the exporters keep it, so a `target_lru_age_s` past the longest
horizon held the cache term for good (may rise, never fall); written twice, the two weeks could part. Kept here, in
a module of the standard library alone, because the exporter may not import the adapter's packages and the pure
policies may import nothing that does I/O (tests/test_architecture.py): both may import this one.
"""

from __future__ import annotations

from typing import Final

MODEL_RECENCY_HORIZON_RANGE_S: Final = (0.0, 604_800.0)
"""The model recency horizons taken: `--model-recency-horizon 1e300` was taken and kept every model the pod ever
served in the output, which the horizon is there to stop. A week is far past any useful `target_lru_age_s` (models
used within it should stay cached; the built-in 600 s) and past a weekly job's models; 0 turns the family off."""
