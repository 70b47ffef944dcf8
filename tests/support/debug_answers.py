"""The /debug answer of a view as a serving worker makes it, for tests that read it without running a worker."""

from __future__ import annotations

from autoscaler.api.debug_document import SourceState, debug_json, debug_record
from autoscaler.model import PodUrls, RuntimeView
from autoscaler.policies.policy_origins import PolicyExplained


def debug_body(view: RuntimeView, policy: PolicyExplained | None = None, source: SourceState | None = None,
               urls: PodUrls | None = None) -> bytes:
    """The /debug answer of a view: its record, as the refresh packs it, written as the worker writes it."""
    return debug_json(debug_record(view, policy, source, urls))
