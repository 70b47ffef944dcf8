"""One request to Prometheus's query API through the library (`ask`, for `PrometheusReader`): every exception it can
raise is a `PrometheusSourceError` with one of the REASON_* values, the library's exception chained as its cause
(what a proxy or gateway answered instead of the query API is said by `prometheus_answers`), so that a refresh's
failure is counted by its reason and said in one line.
"""

from __future__ import annotations

import re
from typing import Any, Final

import requests
import urllib3
from prometheus_api_client.exceptions import PrometheusApiClientException
from prometheus_api_client.prometheus_connect import PrometheusConnect

from autoscaler.sources.prometheus_answers import (
    REASON_CONNECT,
    REASON_HTTP,
    REASON_PARSE,
    REASON_TIMEOUT,
    PrometheusSourceError,
    not_json,
    not_sent,
    timeout_hint,
    tls_failed,
)


def ask(client: PrometheusConnect, promql: str, params: dict[str, str], *, url: str, shown_url: str,
        ca_file: str | None, timeout_s: float) -> Any:
    """The library call, with every exception it can raise turned into a PrometheusSourceError; a read timeout's
    names `--prometheus-timeout` (`timeout_s`) and what to do, as a 401's names its flag."""
    try:
        return client.custom_query(promql, params=params)
    except PrometheusSourceError:  # from `check_answer`: said already
        raise
    except requests.exceptions.JSONDecodeError as error:  # before RequestException and ValueError: it is both
        raise not_json(url, error) from error
    except requests.exceptions.SSLError as error:  # before ConnectionError, which it is
        raise tls_failed(url, error) from error
    except requests.exceptions.Timeout as error:  # before ConnectionError: ConnectTimeout is both
        raise PrometheusSourceError(
            REASON_TIMEOUT, f"{shown_url}: {_without_query(error)}; {timeout_hint(timeout_s)}") from error
    except (requests.exceptions.ConnectionError, requests.exceptions.RetryError) as error:
        if _timed_out(error):
            raise PrometheusSourceError(
                REASON_TIMEOUT, f"{shown_url}: {_without_query(error)}; {timeout_hint(timeout_s)}") from error
        raise PrometheusSourceError(REASON_CONNECT, f"{shown_url}: {_without_query(error)}") from error
    except PrometheusApiClientException as error:
        raise PrometheusSourceError(REASON_HTTP, f"{shown_url}: {error}") from error
    except (ValueError, KeyError, TypeError) as error:  # JSONDecodeError is a ValueError
        raise PrometheusSourceError(REASON_PARSE, f"{shown_url}: {error!r}") from error
    except requests.exceptions.RequestException as error:
        raise PrometheusSourceError(REASON_CONNECT, f"{shown_url}: {error!r}") from error
    except OSError as error:  # after requests' own, which are OSErrors too; raised before anything was sent
        raise not_sent(url, error, ca_file) from error


_QUERY_STRING: Final = re.compile(r"(/api/v1/query)\?[^\s)'\"]*")


def _without_query(error: Exception) -> str:
    """The error's text with the URL-encoded PromQL left out of the URLs it quotes (urllib3 quotes the whole
    request URL, about 1.5 KB for the freshness query); the error's chained cause keeps everything."""
    return _QUERY_STRING.sub(r"\1?...", str(error))


def _timed_out(error: requests.exceptions.RequestException) -> bool:
    """True when requests reports urllib3 retries that ran out on read timeouts as a ConnectionError.

    (Only ReadTimeoutError: urllib3's NewConnectionError, a refused connection, subclasses its TimeoutError.)
    """
    reason = getattr(error.args[0], "reason", None) if error.args else None
    return isinstance(reason, urllib3.exceptions.ReadTimeoutError)
