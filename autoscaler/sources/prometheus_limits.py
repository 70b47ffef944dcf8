"""A query Prometheus refused for its size, said with the query and the setting that fixes it.

Prometheus answers HTTP 422 `query processing would load too many samples into memory in query execution`
when one query would hold more than its `--query.max-samples` (50,000,000 by default) at once. The answer names
neither the query nor that flag. The adapter's queries read every pod Prometheus has the exporters' series for
in the namespaces discovery reads (`--namespaces` and the policy file's runtimes'; all of them without
`--namespaces`): a large shared Prometheus is where it happens.
"""

from __future__ import annotations

from typing import Final

from autoscaler.sources.prometheus_answers import PrometheusSourceError

TOO_MANY_SAMPLES: Final = "too many samples"
"""What Prometheus's refusal says (errorType `execution`, HTTP 422)."""

MAX_SAMPLES_HINT: Final = (
    "Prometheus refused to load that many samples for one query (its --query.max-samples, 50000000 by default): "
    "each of the adapter's queries reads every pod Prometheus has the exporters' series for in the namespaces the "
    "adapter serves (every namespace without --namespaces); raise --query.max-samples on Prometheus, or give the "
    "adapter --namespaces where it serves some namespaces only"
)


def named(error: PrometheusSourceError, field: str) -> PrometheusSourceError:
    """`error` with the query it failed (by the signal `field` it reads) and what to change, where Prometheus
    refused it for its size; any other error as it is."""
    if TOO_MANY_SAMPLES not in error.detail:
        return error
    named_error = PrometheusSourceError(
        error.reason, f"the {field} query: {error.detail}; {MAX_SAMPLES_HINT}", error.kind)
    named_error.__cause__ = error.__cause__
    return named_error
