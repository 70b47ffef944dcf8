"""What a 503 tells a platform engineer (kubectl's error, an HPA event, KEDA's log) about a value the adapter
cannot serve: a lasting state names its cause and what to change; "unknown right now" is kept for a moment's gap.

The refresher is the real one, deciding with the shipped policies, and the answers come from the real app; the
source stands in for the exporters (or Prometheus), whose pods report what each test says:
- every pod's exporter answers (its GPU reading is fresh) but has never read ModelMesh (a wrong --modelmesh-url):
  the whole runtime is a 503 for as long as that lasts;
- fresh load data without a request rate, or without any cache state (with --source prometheus: series that
  Prometheus does not keep): that one metric is a 503 for good;
- a request rate the runtime reported, gone from every pod for a refresh: a gap, "unknown right now".
"""

from __future__ import annotations

import json
from typing import Any

from aiohttp.test_utils import TestClient

from autoscaler.api.app import build_api_app
from autoscaler.api.runtimes import KEDA_ROUTE
from autoscaler.model import PodSample, RuntimeKey, RuntimeSnapshot
from autoscaler.names import ServedMetric
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from autoscaler.source_problems import SourceProblem
from autoscaler.sources.base import SourceDefaults
from tests.api.builders import KEY, NOW

FULL = {"requests_per_second": 20.0, "queue_delay_s": 0.0, "lru_age_s": 900.0, "cache_used_ratio": 0.5,
        "models_loaded": 3.0}
"""A pod's load data with every signal."""


class PodsSource(SourceDefaults):
    """Two pods with a fresh GPU reading and the load fields of `load`; `load` None: no load ever read."""

    name = "stand-in"
    errors: dict[str, int] = {}

    def __init__(self, load: dict[str, float] | None) -> None:
        self.load = load

    async def collect(self, now: float) -> list[RuntimeSnapshot]:
        pods = tuple(
            PodSample(f"pod-{i}", gpu_busy=0.5, gpu_sampled_at=now - 1, **(
                {} if self.load is None else {"sampled_at": now - 1, **self.load}))  # type: ignore[arg-type]
            for i in range(2))
        return [RuntimeSnapshot(KEY, pods, now, replicas=2)]

    async def close(self) -> None:
        return None


async def served(aiohttp_client: Any, source: PodsSource, refreshes_s: tuple[float, ...] = (0.0, 1.0)
                 ) -> TestClient[Any, Any]:
    """The app over a refresher that refreshed at each of `refreshes_s` after NOW."""
    clock = [NOW]
    refresher = Refresher(source, PolicyBook(RuntimePolicy(warmup_grace_s=30.0)), AdapterMetrics(),
                          clock=lambda: clock[0], monotonic=lambda: clock[0])
    for at in refreshes_s:
        clock[0] = NOW + at
        await refresher.refresh_once()
    client: TestClient[Any, Any] = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    return client


async def answer(client: TestClient[Any, Any], metric: ServedMetric) -> tuple[int, str]:
    response = await client.get(f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{KEY.namespace}/{metric.value}"
                                f"?labelSelector=deployment%3D{KEY.deployment}")
    body = await response.text()
    return response.status, json.loads(body).get("message", body) if response.status != 200 else body


async def keda(client: TestClient[Any, Any]) -> tuple[int, str]:
    response = await client.get(KEDA_ROUTE.format(namespace=KEY.namespace, deployment=KEY.deployment))
    body = await response.text()
    return response.status, json.loads(body).get("message", body) if response.status != 200 else body


async def test_exporters_that_never_read_modelmesh_name_the_setting(aiohttp_client: Any) -> None:
    """Was: "is unknown right now: ... (pod-0: no data; ...)" for as long as the exporters' --modelmesh-url was
    wrong, during the warm-up and after it."""
    for refreshes in ((0.0,), (0.0, 15.0, 45.0)):  # warming up, and past warmup_grace_s
        client = await served(aiohttp_client, PodsSource(None), refreshes)
        for metric in ServedMetric:
            status, message = await answer(client, metric)
            assert status == 503, message
            assert "unknown right now" not in message, message
            assert f"{metric.value} for runtime {KEY} is not served: no ready pod's load data has been read " in message
            assert "their GPU readings are fresh" in message and "--modelmesh-url" in message, message
            # the view does not say which source read it: a Prometheus user is told what to check there
            assert "with --source prometheus, Prometheus keeps no exporter series" in message, message
            assert "why: /debug/runtimes/" in message, message
        status, message = await keda(client)
        assert status == 503 and "unknown right now" not in message, message
        assert f"values of runtime {KEY} are not served: no ready pod's load data has been read " in message, message
        assert "--modelmesh-url" in message and "scalers should hold" in message, message


class NamedSource(PodsSource):
    """`PodsSource` under a real source's name, no load ever read, and nothing it says fails."""

    def __init__(self, name: str) -> None:
        super().__init__(None)
        self.name = name


async def test_a_known_source_is_told_its_own_checks_only(aiohttp_client: Any) -> None:
    """The adapter knows which source it reads: the scrape source's 503 said what a Prometheus PodMonitor may drop,
    and --source prometheus's how the adapter reaches the exporters' port."""
    scraping = await served(aiohttp_client, NamedSource("scrape"))
    status, message = await answer(scraping, ServedMetric.REQUEST_LOAD)
    assert status == 503 and "--modelmesh-url" in message, message
    assert "Prometheus" not in message and "PodMonitor" not in message, message
    reading = await served(aiohttp_client, NamedSource("prometheus"))
    status, message = await answer(reading, ServedMetric.REQUEST_LOAD)
    assert status == 503 and "Prometheus keeps no exporter series" in message and "--modelmesh-url" in message
    assert "with the scrape source" not in message and "NetworkPolicies" not in message, message


class FailingSource(NamedSource):
    """`NamedSource` that says `problems` fail for the runtime, in a backend's words."""

    def __init__(self, name: str, problems: tuple[SourceProblem, ...]) -> None:
        super().__init__(name)
        self.said = problems

    def problems(self, key: RuntimeKey) -> tuple[SourceProblem, ...]:
        return self.said


async def test_a_503_names_the_pods_not_their_addresses(aiohttp_client: Any) -> None:
    """`kubectl describe hpa` shows a 503's message to whoever reads HPAs: it named the failing pod's scrape URL
    and IP (`triton-0: http://10.2.0.7:9187/metrics: ... ('10.2.0.7', 9187)`) and Prometheus's in-cluster URL,
    which nobody reading an HPA can act on. The pod's name, the port and the hint are what they can."""
    scrape = FailingSource("scrape", (
        SourceProblem("tls", "https://[fd00::7]:9187/metrics: certificate verify failed: IP address mismatch, "
                             "certificate is not valid for 'fd00::7'; give it a certificate for the pod's IP", NOW,
                      "pod-0"),
        SourceProblem("connect", "http://10.2.0.8:9187/metrics: [Errno 111] Connect call failed ('10.2.0.8', 9187); "
                                 "nothing accepts connections there: is the exporter sidecar in the pod and listening "
                                 "on port 9187?", NOW, "pod-1")))
    client = await served(aiohttp_client, scrape)
    for status, message in (await answer(client, ServedMetric.REQUEST_LOAD), await keda(client)):
        assert status == 503 and "tls (1 pod), connect (1 pod); pod-0: " in message, message
        assert "certificate verify failed: IP address mismatch" in message, message
        assert "fd00::7" not in message and "://" not in message, message
    prometheus = FailingSource("prometheus", (SourceProblem(
        "unseen", "Prometheus at http://prometheus-k8s.monitoring.svc:9090 has no series for any Ready pod of the "
                  "runtime (a PodMonitor's namespaceSelector?)", NOW),))
    status, message = await answer(await served(aiohttp_client, prometheus), ServedMetric.REQUEST_LOAD)
    assert status == 503 and "Prometheus has no series for any Ready pod" in message, message
    assert "monitoring.svc" not in message and "://" not in message, message
    connect = FailingSource("scrape", scrape.said[1:])
    status, message = await answer(await served(aiohttp_client, connect), ServedMetric.REQUEST_LOAD)
    assert "pod-1: [Errno 111] Connect call failed; nothing accepts" in message, message
    assert "10.2.0.8" not in message and "port 9187" in message, message


async def test_fresh_load_without_a_request_rate_says_which_series_is_missing(aiohttp_client: Any) -> None:
    client = await served(aiohttp_client, PodsSource({**FULL, "requests_per_second": None}))  # type: ignore[dict-item]
    status, _ = await answer(client, ServedMetric.DESIRED_REPLICAS)
    assert status == 200
    status, message = await answer(client, ServedMetric.REQUEST_LOAD)
    assert status == 503 and "unknown right now" not in message, message
    assert f"modelmesh_request_load for runtime {KEY} is not served: the runtime has no request-rate signal" \
        in message, message
    assert "modelmesh_pod_requests_per_second" in message and "--source prometheus" in message, message


async def test_fresh_load_without_a_cache_state_says_which_series_is_missing(aiohttp_client: Any) -> None:
    client = await served(aiohttp_client, PodsSource({**FULL, "cache_used_ratio": None}))  # type: ignore[dict-item]
    status, message = await answer(client, ServedMetric.CACHE_PRESSURE)
    assert status == 503 and "unknown right now" not in message, message
    assert f"modelmesh_cache_pressure for runtime {KEY} is not served: the runtime has no cache signal" in message
    assert "modelmesh_pod_cache_used_ratio" in message and "instance record" in message, message


async def test_a_request_rate_gone_for_a_refresh_is_unknown_right_now(aiohttp_client: Any) -> None:
    source = PodsSource(dict(FULL))
    clock = [NOW]
    refresher = Refresher(source, PolicyBook(RuntimePolicy()), AdapterMetrics(), clock=lambda: clock[0],
                          monotonic=lambda: clock[0])
    await refresher.refresh_once()
    source.load = {**FULL, "requests_per_second": None}  # type: ignore[dict-item]
    clock[0] += 1.0
    await refresher.refresh_once()
    client: TestClient[Any, Any] = await aiohttp_client(build_api_app(refresher, refresher.metrics))
    status, message = await answer(client, ServedMetric.REQUEST_LOAD)
    assert status == 503 and f"modelmesh_request_load for runtime {KEY} is unknown right now" in message, message


async def test_the_openapi_document_says_a_503_may_be_lasting(aiohttp_client: Any) -> None:
    """`kubectl get --raw /openapi/v2` described every 503 as "Values unknown right now"."""
    client = await served(aiohttp_client, PodsSource(dict(FULL)))
    response = await client.get("/openapi/v2")
    document = json.loads(await response.text())
    responses = document["paths"]["/keda/v1/namespaces/{namespace}/runtimes/{deployment}"]["get"]["responses"]
    description = responses["503"]["description"]
    assert "not served" in description and "the message says" in description, description
