"""The adapter's KEDA endpoint read the way KEDA reads it (tests/api/keda_model.py, from kedacore/keda at commit
8b4f083ca8c8c2baf8477e322bd4d16ac4dfa09a, `pkg/scalers/metrics_api_scaler.go`, `pkg/fallback/fallback.go`,
`pkg/scaling/executor/scale_scaledobjects.go`), with the shipped ScaledObject and what docs/operations.md tells a
KEDA user to set: the replicas that come out are the recommendation, and an unknown runtime holds them."""

from __future__ import annotations

import copy
import dataclasses
import functools
import re
from typing import Any

import yaml
from aiohttp.test_utils import TestClient
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.api.app import build_api_app
from autoscaler.api.runtimes import KEDA_ROUTE, keda_answer
from autoscaler.model import RuntimeSnapshot, RuntimeView, ServedValue
from autoscaler.names import ServedMetric
from autoscaler.policies.decision import decide
from autoscaler.policies.policy import RuntimePolicy
from tests.api.builders import KEY, NOW, refresher_with, runtime_view
from tests.api.keda_model import (
    AUTH_MODE_NAMES,
    BEARER_TOKEN_NAMES,
    ScaledObjectModel,
    ScalerError,
    read_value,
)
from tests.manifests.support import KEDA, REPO, find, installed

OPERATIONS = REPO / "docs" / "operations.md"
PATH = KEDA_ROUTE.format(namespace=KEY.namespace, deployment=KEY.deployment)


@functools.cache
def _example() -> dict[str, Any]:
    return find(installed(KEDA), "ScaledObject")


def example() -> dict[str, Any]:
    """The shipped ScaledObject, as `kubectl kustomize` renders it (a copy: tests change it)."""
    return copy.deepcopy(_example())


def with_desired(view: RuntimeView, desired: int) -> RuntimeView:
    served = view.values[ServedMetric.DESIRED_REPLICAS]
    value = ServedValue(float(desired), float(desired), served.timestamp)
    return dataclasses.replace(view, values={**view.values, ServedMetric.DESIRED_REPLICAS: value})


def scaled_to_zero() -> RuntimeView:
    """A runtime modelmesh-serving scaled to zero (no InferenceService uses it): no pods, nothing to judge."""
    view, _ = decide(RuntimeSnapshot(key=KEY, pods=(), taken_at=NOW, replicas=0), RuntimePolicy(), None, NOW, 30.0)
    assert view.scaled_to_zero
    return view


def answer(view: RuntimeView) -> tuple[int, bytes]:
    status, body, _ = keda_answer(view)
    return status, body


async def test_kedas_plain_get_reads_the_recommendation(aiohttp_client: Any) -> None:
    """KEDA sends a bare GET (no Accept header, its token only) and reads the body only on a 200."""
    view = runtime_view()
    client: TestClient[Any, Any] = await aiohttp_client(build_api_app(refresher_with(view), refresher_with().metrics))
    async with client.get(PATH, skip_auto_headers=["Accept", "Accept-Encoding", "User-Agent"]) as response:
        status, body = response.status, await response.read()
    value = read_value(status, body, example()["spec"]["triggers"][0]["metadata"]["valueLocation"])
    assert value == view.values[ServedMetric.DESIRED_REPLICAS].value


@given(desired=st.integers(1, 2000), current=st.integers(1, 2000))
def test_the_hpa_keda_makes_adopts_the_recommendation(desired: int, current: int) -> None:
    """docs/design.md: with an AverageValue target of 1 the HPA scales to the recommendation (within its 10%
    tolerance it keeps the replicas it has, as for the plain HPA)."""
    scaled = ScaledObjectModel.from_manifest(example())
    scaled.max_replicas = 10_000
    replicas = scaled.poll(*answer(with_desired(runtime_view(), desired)), replicas=current)
    assert replicas == desired or (replicas == current and abs(desired / current - 1) <= 0.1 + 1e-12)


def test_an_unknown_runtime_holds_its_replicas_with_the_shipped_scaled_object() -> None:
    """A 503 is an error to KEDA ("api returned 503"): without `fallback` neither KEDA nor its HPA moves."""
    for view in (runtime_view(fresh=False), scaled_to_zero()):
        status, body = answer(view)
        assert status == 503
        scaled = ScaledObjectModel.from_manifest(example())
        assert [scaled.poll(status, body, replicas=7) for _ in range(20)] == [7] * 20


def test_a_null_value_is_an_error_to_keda_too_so_it_holds() -> None:
    view = runtime_view()
    unknown = dataclasses.replace(view, values={**view.values,
                                               ServedMetric.DESIRED_REPLICAS: ServedValue(None, None, None)})
    status, body = answer(unknown)
    assert status == 200
    try:
        read_value(status, body, ServedMetric.DESIRED_REPLICAS.value)
    except ScalerError as error:
        assert "got Null" in str(error)
    else:
        raise AssertionError("KEDA reads null as a value")
    assert ScaledObjectModel.from_manifest(example()).poll(status, body, replicas=4) == 4


def keda_section() -> str:
    """The KEDA part of docs/operations.md ("KEDA: what to set ..."; Installing has another heading that names
    KEDA): from its heading to the next heading of the same level."""
    text = OPERATIONS.read_text()
    heading = re.search(r"^(#{2,}) KEDA: what to set[^\n]*\n", text, re.M)
    assert heading is not None, "docs/operations.md has no section on KEDA"
    end = re.compile(rf"^#{{1,{len(heading.group(1))}}} ", re.M).search(text, heading.end())
    return text[heading.end():end.start() if end else len(text)]


def documented_fallback() -> dict[str, Any]:
    blocks = re.findall(r"```yaml\n(.*?)```", keda_section(), re.S)
    fallbacks = [yaml.safe_load(block)["fallback"] for block in blocks if re.match(r"\s*fallback:", block)]
    assert len(fallbacks) == 1, "the KEDA section shows no `fallback` to set (or several)"
    return fallbacks[0]  # type: ignore[no-any-return]


def test_the_fallback_the_docs_give_holds_the_replicas_through_an_outage() -> None:
    """A KEDA user who sets `fallback` (as KEDA's docs suggest) must not have a 10-pod runtime cut to
    `fallback.replicas` when the adapter answers 503 for a few polls (scrape outage, stale pods, a runtime
    scaled to zero): the docs' fallback keeps the replicas, as the HPA alone would."""
    scaled = example()
    scaled["spec"]["fallback"] = documented_fallback()
    status, body = answer(runtime_view(fresh=False))
    model = ScaledObjectModel.from_manifest(scaled)
    replicas = 10
    for _ in range(20):
        replicas = model.poll(status, body, replicas)
    assert replicas == 10
    # ...whereas KEDA's default (static) fallback scales to its `replicas` once `failureThreshold` is passed.
    static = copy.deepcopy(scaled)
    static["spec"]["fallback"] = {"failureThreshold": 3, "replicas": 2}
    model = ScaledObjectModel.from_manifest(static)
    assert [model.poll(status, body, 10) for _ in range(5)] == [10, 10, 10, 2, 2]


def test_the_docs_say_keda_does_not_scale_runtimes_to_zero() -> None:
    """The adapter's recommendation is at least 1, so with `activationTargetValue` left at 0 KEDA never deems
    the trigger inactive while the runtime is known; set higher, KEDA scales the RuntimeScale to 0, the runtime
    then has no pods to measure (503), and KEDA holds it at zero for good."""
    scaled = example()
    scaled["spec"]["minReplicaCount"] = 0
    scaled["spec"]["triggers"][0]["metadata"]["activationTargetValue"] = "1"
    model = ScaledObjectModel.from_manifest(scaled)
    assert model.poll(*answer(with_desired(runtime_view(), 1)), replicas=1) == 0
    assert model.poll(*answer(scaled_to_zero()), replicas=0) == 0  # never back, however busy it would be
    # The shipped example: never scaled to zero by KEDA.
    model = ScaledObjectModel.from_manifest(example())
    assert model.poll(*answer(with_desired(runtime_view(), 1)), replicas=1) == 1
    section = keda_section()
    for word in ("minReplicaCount", "activationTargetValue"):
        assert word in section, f"docs/operations.md's KEDA section does not say what to do with {word}"


def test_the_trigger_authentication_fills_the_parameters_keda_reads() -> None:
    """`authMode` in the trigger's metadata and a `token` parameter: names today's KEDA reads
    (`authModes;authMode`, `bearerToken;token`) and the only ones KEDA 2.17 and earlier read
    (`config.TriggerMetadata["authMode"]`, `config.AuthParams["token"]` in v2.17.0's metrics_api_scaler.go)."""
    objects = installed(KEDA)
    trigger = example()["spec"]["triggers"][0]
    modes = {name: trigger["metadata"][name] for name in AUTH_MODE_NAMES if name in trigger["metadata"]}
    assert modes == {"authMode": "bearer"}
    auth = find(objects, "TriggerAuthentication", trigger["authenticationRef"]["name"])
    assert [ref["parameter"] for ref in auth["spec"]["secretTargetRef"]] == [BEARER_TOKEN_NAMES[1]]


def test_the_docs_say_to_give_keda_a_runtime_scale_with_replicas() -> None:
    """A RuntimeScale whose replicas read 0 makes an active trigger scale to `minReplicaCount` (KEDA's
    `scaleFromZeroOrIdle`). One created without `spec.replicas` cannot be read at all (its scale GET is a 500
    until the adapter adopts the runtime's replicas, `tests/actuation/test_keda_adoption.py`), and KEDA retries
    a ScaledObject that failed that check with a delay doubling to 1,000 s: so the docs say to apply the
    ScaledObject once the RuntimeScale shows `Desired`."""
    model = ScaledObjectModel.from_manifest(example())
    assert model.poll(*answer(with_desired(runtime_view(), 8)), replicas=0) == 1
    section = keda_section()
    assert "spec.replicas" in section and "Desired" in section, (
        "docs/operations.md's KEDA section does not say to apply a ScaledObject only once its RuntimeScale has "
        "replicas")
