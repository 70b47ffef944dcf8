"""The HTTP side of asking Prometheus (`PrometheusReader`): one requests session, whose answers are said as what
they are where a proxy or gateway answered instead (`prometheus_answers.check_answer`), whose connections a round
past its deadline shuts (`cuttable_http`), the library's client over it, the parameters every query is sent with,
and the bearer token read again from its file every round.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, cast

import requests
from prometheus_api_client.prometheus_connect import PrometheusConnect
from urllib3.util.retry import Retry

from autoscaler.sources.cuttable_http import CuttableAdapter
from autoscaler.sources.prometheus_answers import REASON_CONNECT, PrometheusSourceError, check_answer
from autoscaler.sources.prometheus_request import ask
from exporter.flag_values import without_password


class PrometheusConnection:
    """One HTTP session to Prometheus's API, and what every request over it carries."""

    def __init__(
        self,
        url: str,
        *,
        timeout_s: float,
        headers: Mapping[str, str] | None,
        verify: bool | str,
        token_file: Path | None,
        retry: Retry | None,
        pool_size: int,
        on_warnings: Callable[[Sequence[str]], None],
    ) -> None:
        """As `PrometheusSource` passes them through `PrometheusReader`; `pool_size`: the queries a round sends at
        once, a pooled connection each; `on_warnings`: where a partial answer's warnings go (`check_answer`)."""
        self.url = url
        self.shown_url = without_password(url)
        self.timeout_s = timeout_s
        self._token_file = token_file
        self._token: str | None = None  # the token last read from it
        self.session = requests.Session()
        self.session.verify = verify
        self._ca_file = verify if isinstance(verify, str) else None
        # Proxies' and gateways' answers said as what they are (a login page, refused credentials, a wrong path).
        self.session.hooks["response"].append(
            functools.partial(check_answer, query_url=f"{url}/api/v1/query", on_warnings=on_warnings))
        self.params = {
            # Prometheus (and Thanos, VictoriaMetrics) stop evaluating when the adapter stops waiting, instead of
            # working on up to --query.timeout (2 min) on a query nobody reads, nine per refresh. Seconds as a
            # plain number: Prometheus refuses "0.5s".
            "timeout": f"{timeout_s:g}",
            # VictoriaMetrics evaluates a query asked "now" at now - 30 s (-search.latencyOffset) unless told
            # `nocache=1`: the clock check would read those 30 s as Prometheus's clock being off and move every
            # time 30 s forward, so values 40 s old would pass for 10 s old. Prometheus, Thanos and Mimir ignore it.
            "nocache": "1",
        }
        # read=False: a read timeout surfaces as requests' ReadTimeout, not as a ConnectionError.
        retry = retry or Retry(total=0, read=False, raise_on_status=False)
        self.client = PrometheusConnect(
            url=self.url,
            headers=dict(headers or {}),
            retry=retry,
            session=self.session,
            timeout=cast(int, timeout_s),  # hinted int, but passed as is to requests, which takes floats
        )
        # In place of the adapter the library mounts for its URL, with the same retries: one whose connections a
        # round past its deadline shuts (`cuttable_http`), also for a redirect to another host.
        self._adapter = CuttableAdapter(max_retries=retry, pool_maxsize=pool_size)
        for prefix in (self.client.url, "http://", "https://"):
            self.session.mount(prefix, self._adapter)

    def read_token(self) -> None:
        """Send the token file's token as `Authorization: Bearer`, read every round (a few bytes, every refresh):
        the kubelet rotates a projected service-account token in place, hourly by default. An empty file is a
        failed read (a tool rewriting it in place empties it first): it sent `Bearer ` with nothing after it,
        and kept that as the last token read."""
        if self._token_file is None:
            return
        try:
            token = self._token_file.read_text(encoding="utf-8").strip()
            if not token:
                raise OSError(0, "the file is empty")
        except OSError as error:  # keep the token last read; with none yet, the round is an outage, said so
            if self._token is None:
                raise PrometheusSourceError(REASON_CONNECT, f"cannot read --prometheus-token-file "
                                            f"{self._token_file}: {error.strerror or error}") from error
            return
        if token != self._token:
            self.client.headers["Authorization"] = f"Bearer {token}"
            self._token = token

    def request(self, promql: str, params: dict[str, str]) -> Any:
        """One request of the query API (`prometheus_request.ask`): its failures are `PrometheusSourceError`s."""
        return ask(self.client, promql, params, url=self.url, shown_url=self.shown_url, ca_file=self._ca_file,
                   timeout_s=self.timeout_s)

    def cut(self) -> int:
        """Shut the connections still open, from any thread (`CuttableAdapter.cut`); how many there were."""
        return self._adapter.cut()

    def close(self) -> None:
        """Shut the connections and the session."""
        self._adapter.cut()
        self.session.close()
