"""How long one round of Prometheus queries may take, which both the reader and the stall limit must agree on.

A round is given two timeouts and a second: a refused connection is tried once more (each try within
`--prometheus-timeout`), and an answer trickled a byte at a time is cut at the round's end rather than at a
read's timeout, which it never reaches. The serving side's stall limit (`ServeSettings.source_deadline_s`) has to
outlast it, or a slow Prometheus would get the adapter restarted by its liveness probe; kept here, apart from the
reader's imports (requests, prometheus-api-client), so that the settings can read it at no cost.
"""

from __future__ import annotations


def round_deadline_s(timeout_s: float) -> float:
    """The longest one round of queries may take, `timeout_s` being each request's (`--prometheus-timeout`)."""
    return 2 * timeout_s + 1.0
