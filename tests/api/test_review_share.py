"""One identity cannot queue SubjectAccessReviews without bound. Any pod's ServiceAccount token authenticates
(no rights needed: a denial takes a review too), and a request to a path not reviewed yet (a random namespace)
costs a review. Before, such requests waited their turn for one of the `--max-in-flight-reviews` slots, each
holding its connection open meanwhile: a few hundred of them kept every one of the `--max-connections` busy,
and the aggregator's new connections were refused, so every HPA held. Now a user with as many reviews under
way as there are slots gets 429 `TooManyRequests` at once, as kube-apiserver's priority and fairness answers
a flow over its share, and other users' reviews take the next free slot."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import pytest

from autoscaler.settings import ServeSettings
from tests.api.builders import Pki
from tests.api.conftest import SecuredApi, secured_api
from tests.fakes.kube import FakeKubeApi
from tests.support.kubectl import KUBECTL, write_kubeconfig
from tests.support.waiting import eventually

SLOTS = 2
HPA = {"X-Remote-User": "hpa"}


@pytest.fixture
async def api(pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]) -> AsyncIterator[SecuredApi]:
    async with secured_api(pki, kube, settings_for(max_in_flight_reviews=SLOTS), kube_timeout_s=60.0) as api:
        yield api


def somewhere_new() -> str:
    return f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{secrets.token_hex(6)}/modelmesh_gpu_busy"


async def test_a_user_with_every_slot_taken_gets_429_and_others_are_still_served(
        api: SecuredApi, metric_path: Callable[..., str]) -> None:
    api.kube.tokens["pod-token"] = ("system:serviceaccount:apps:some-pod", [])
    api.kube.allow(user="hpa")
    assert (await api.get(somewhere_new(), token="pod-token"))[0] == 403  # its token is now known and cached

    held = api.kube.delay("subjectaccessreviews", 5.0, times=SLOTS)
    holding = [asyncio.create_task(api.get(somewhere_new(), token="pod-token")) for _ in range(SLOTS)]
    await eventually(lambda: held.hits == SLOTS)  # the pod's reviews have every slot

    status, body = await api.get(somewhere_new(), token="pod-token")
    assert (status, body["reason"]) == (429, "TooManyRequests"), body
    assert body["details"] == {"retryAfterSeconds": 1}  # with the header: client-go waits and asks again itself
    assert not any(task.done() for task in holding)  # answered at once, not after a slot came free

    assert (await api.get(metric_path(), cert=api.pki.proxy, headers=HPA))[0] == 200
    assert [status for status, _ in await asyncio.gather(*holding)] == [403] * SLOTS


async def test_kubectl_waits_out_the_429_and_gets_its_answer(api: SecuredApi, tmp_path: Path) -> None:
    """client-go (kubectl, the HPA's client) retries a 429 that carries `Retry-After` by itself: the caller sees
    the answer once a slot is free, not an error."""
    api.kube.tokens["pod-token"] = ("system:serviceaccount:apps:some-pod", [])
    assert (await api.get(somewhere_new(), token="pod-token"))[0] == 403  # its token is now known and cached
    held = api.kube.delay("subjectaccessreviews", 6.0, times=SLOTS)
    holding = [asyncio.create_task(api.get(somewhere_new(), token="pod-token")) for _ in range(SLOTS)]
    await eventually(lambda: held.hits == SLOTS)

    kubeconfig = write_kubeconfig(tmp_path / "kubeconfig", api.url, token="pod-token")
    process = await asyncio.create_subprocess_exec(
        KUBECTL, "--kubeconfig", str(kubeconfig), "--cache-dir", str(tmp_path / "cache"), "-v=6", "get", "--raw",
        somewhere_new(), stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    _, stderr = await asyncio.wait_for(process.communicate(), 60)
    said = stderr.decode()
    await asyncio.gather(*holding)

    assert " 429 Too Many Requests" in said, said[-3000:]  # it was refused while the slots were taken ...
    assert "Error from server (Forbidden)" in said and "TooManyRequests" not in said.splitlines()[-1], said[-3000:]
