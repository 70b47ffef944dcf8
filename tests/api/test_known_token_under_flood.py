"""An unauthenticated client sending random bearer tokens cannot lock a known client (KEDA with its
ServiceAccount token) out: the cap on TokenReviews in flight refuses reviews of tokens never seen, but a token
the API server accepted a short while ago is reviewed again even while the cap is full. Before, the KEDA
token's answer expiring during such a flood (every `--authentication-token-webhook-cache-ttl`) was a 401, and
KEDA's trigger failed, for as long as the flood went on."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable

import pytest

from autoscaler.settings import ServeSettings
from tests.api.builders import KEY, Pki
from tests.api.conftest import SecuredApi, secured_api
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

KEDA_PATH = f"/keda/v1/namespaces/{KEY.namespace}/runtimes/{KEY.deployment}"
SLOTS = 2
"""TokenReviews in flight at once (`--max-in-flight-reviews`): two are enough to fill. A peer address has a
share of one of them (`peer_share.peer_share`), so the flood comes from two pods (127.0.0.2 and 127.0.0.3: Linux
routes all of 127/8 to loopback): a flood from enough addresses still fills the cap."""
FLOODERS = ("127.0.0.2", "127.0.0.3")


def random_token_flood(api: SecuredApi) -> list[asyncio.Task[tuple[int, object]]]:
    """One request with a random token from each flooding pod: SLOTS reviews, the cap full."""
    return [asyncio.create_task(api.get(KEDA_PATH, token=secrets.token_hex(16), local_address=peer))
            for peer in FLOODERS]


@pytest.fixture
async def uncached(pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]
                   ) -> AsyncIterator[SecuredApi]:
    """The gate with token answers kept for no time at all: every request is a TokenReview, as the first
    request after each TTL is. The Kubernetes API deadline is long, so that held reviews stay in flight."""
    settings = settings_for(token_cache_ttl_s=0.0, max_in_flight_reviews=SLOTS)
    async with secured_api(pki, kube, settings, kube_timeout_s=60.0) as api:
        yield api


async def test_a_token_accepted_before_is_reviewed_again_while_random_tokens_fill_the_cap(
        uncached: SecuredApi) -> None:
    kube = uncached.kube
    kube.tokens["keda-token"] = ("system:serviceaccount:keda:keda-operator", [])
    kube.allow(user="system:serviceaccount:keda:keda-operator", resource="runtimes")
    assert (await uncached.get(KEDA_PATH, token="keda-token"))[0] == 200

    held = kube.delay("tokenreviews", 3.0, times=SLOTS)  # the flood's reviews, held: the cap is full
    flood = random_token_flood(uncached)
    await eventually(lambda: held.hits == SLOTS)
    assert (await uncached.get(KEDA_PATH, token=secrets.token_hex(16)))[0] == 429  # unseen: refused at once

    status, body = await uncached.get(KEDA_PATH, token="keda-token")

    assert status == 200, body
    assert {status for status, _ in await asyncio.gather(*flood)} == {401}


async def test_a_token_not_yet_reviewed_while_the_cap_is_full_is_told_to_retry_not_that_it_is_invalid(
        uncached: SecuredApi) -> None:
    """After an adapter restart during a random-token flood KEDA's token is not known yet, so the full cap
    refuses its review. It used to get 401 Unauthorized, and KEDA's operators went looking at a token that was
    fine; the token was never judged, so the answer is kube's 429 TooManyRequests with a Retry-After, and its
    next try after the flood's reviews end is reviewed and served."""
    kube = uncached.kube
    kube.tokens["keda-token"] = ("system:serviceaccount:keda:keda-operator", [])
    kube.allow(user="system:serviceaccount:keda:keda-operator", resource="runtimes")
    held = kube.delay("tokenreviews", 1.0, times=SLOTS)
    flood = random_token_flood(uncached)
    await eventually(lambda: held.hits == SLOTS)

    status, body = await uncached.get(KEDA_PATH, token="keda-token")

    assert status == 429, body
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 1, body
    assert "TokenReview" in body["message"], body
    assert {status for status, _ in await asyncio.gather(*flood)} == {401}  # reviewed: the flood's tokens are bad
    assert (await uncached.get(KEDA_PATH, token="keda-token"))[0] == 200
