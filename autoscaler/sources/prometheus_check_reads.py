"""The reads of the scrape-interval check (`prometheus_lookback`) after a round's queries: Prometheus's flags and the
times of a selector's samples. Unlike a round's, their failures are no outage: what nothing says is None or none;
a read cut by the refresh's deadline or a read timeout is `OutOfTime`, not known, asked again at a later refresh.
`PrometheusReader.flags` and `sample_times` run them in a query thread within the refresh's deadline.
"""

from __future__ import annotations

import requests

from autoscaler.sources.prometheus_answers import REASON_TIMEOUT, PrometheusSourceError
from autoscaler.sources.prometheus_connection import PrometheusConnection


class OutOfTime(Exception):
    """A read of the scrape-interval check cut by the refresh's deadline or by a read timeout: what it would have
    told is not known (not absent), and is asked again at a later refresh."""


def read_flags(connection: PrometheusConnection) -> dict[str, str] | None:
    """Prometheus's command-line flags as /api/v1/status/flags says them (`PrometheusReader.flags`), in a query
    thread; None where nothing says them, `OutOfTime` where the read timed out."""
    try:
        response = connection.session.get(f"{connection.url}/api/v1/status/flags", headers=connection.client.headers,
                                          timeout=connection.timeout_s)
        data = response.json()["data"] if response.status_code == 200 else None
    except requests.exceptions.Timeout as error:  # before OSError, which it is: slow, not absent
        raise OutOfTime(f"reading /api/v1/status/flags: no answer within {connection.timeout_s:g} s") from error
    except (PrometheusSourceError, OSError, ValueError, KeyError, TypeError):  # requests' own are OSErrors
        return None
    if not isinstance(data, dict):
        return None
    return {name: value for name, value in data.items() if isinstance(value, str)}


def read_sample_times(connection: PrometheusConnection, selector: str, window_s: float) -> list[list[float]]:
    """The times of the samples each series of `selector` has in the last `window_s` (`PrometheusReader.sample_times`),
    in a query thread; none where the query fails, `OutOfTime` where it timed out."""
    try:
        result = connection.request(f"{selector}[{window_s:.0f}s]", connection.params)
        return [[float(at) for at, _ in series["values"]] for series in result]
    except PrometheusSourceError as error:
        if error.reason == REASON_TIMEOUT:  # slow, not absent
            raise OutOfTime(f"reading the samples' spacing: {error.detail}") from error
        return []
    except (ValueError, KeyError, TypeError):
        return []
