"""One pod sending random bearer tokens cannot take every TokenReview slot: each peer address has a share of
`--max-in-flight-reviews` (a quarter) for tokens not reviewed lately, as kube's priority-and-fairness gives each
flow a share. Before, a flood from one pod filled the whole cap, and KEDA's ServiceAccount token, not known yet
after an adapter restart, got 429 on every poll for as long as the flood went on: its trigger failed.

Peers are told apart by their address: Linux routes all of 127/8 to loopback, so a client bound to 127.0.0.2 is
another pod than one on 127.0.0.1. The fake Kubernetes API holds TokenReviews so that they stay in flight."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator, Callable

import pytest
from aiohttp.test_utils import make_mocked_request
from hypothesis import example, given
from hypothesis import strategies as st

from autoscaler.api.authn import AuthenticationError, TokenAuthenticator, TokenReviewsBusy
from autoscaler.api.peer_share import peer_share
from autoscaler.kube.reviews import TokenReviewResult
from autoscaler.settings import ServeSettings
from tests.api.builders import KEY, Pki
from tests.api.conftest import SecuredApi, secured_api
from tests.fakes.kube import FakeKubeApi
from tests.support.waiting import eventually

KEDA_PATH = f"/keda/v1/namespaces/{KEY.namespace}/runtimes/{KEY.deployment}"
KEDA_USER = "system:serviceaccount:keda:keda-operator"
CAP = 8
"""`--max-in-flight-reviews`."""
SHARE = 2
"""A peer's share of it: CAP // 4, worked out by hand."""
KEDA = "127.0.0.1"
FLOODER = "127.0.0.2"


@pytest.fixture
async def api(pki: Pki, kube: FakeKubeApi, settings_for: Callable[..., ServeSettings]) -> AsyncIterator[SecuredApi]:
    """Token answers kept for no time, so every request is a TokenReview (as after a restart, or each TTL);
    a long Kubernetes API deadline, so that held reviews stay in flight."""
    kube.tokens["keda-token"] = (KEDA_USER, [])
    kube.allow(user=KEDA_USER, resource="runtimes")
    async with secured_api(pki, kube, settings_for(token_cache_ttl_s=0.0, max_in_flight_reviews=CAP),
                           kube_timeout_s=60.0) as secured:
        yield secured


def flood(api: SecuredApi, peer: str, count: int) -> list[asyncio.Task[tuple[int, object]]]:
    """`count` concurrent requests from `peer`, each with a random token (never valid)."""
    return [asyncio.create_task(api.get(KEDA_PATH, token=secrets.token_hex(16), local_address=peer))
            for _ in range(count)]


async def settled(tasks: list[asyncio.Task[tuple[int, object]]], held_hits: Callable[[], int]) -> None:
    """Every request of `tasks` has either reached the API server (its review held) or been answered."""
    await eventually(lambda: held_hits() + sum(task.done() for task in tasks) == len(tasks))


async def test_keda_token_never_seen_is_served_while_one_pod_floods_random_tokens(api: SecuredApi) -> None:
    held = api.kube.delay("tokenreviews", 3.0, times=CAP)  # as many as the flood could start: all held
    flooding = flood(api, FLOODER, CAP)
    await settled(flooding, lambda: held.hits)
    held.times = held.hits  # reviews from now on are not held

    status, body = await api.get(KEDA_PATH, token="keda-token", local_address=KEDA)

    assert status == 200, body  # before: 429, the flooder's reviews filled the cap
    statuses = sorted(status for status, _ in await asyncio.gather(*flooding))
    assert statuses == [401] * SHARE + [429] * (CAP - SHARE)


async def test_a_peer_past_its_share_gets_429_with_retry_after_while_another_peer_is_reviewed(
        api: SecuredApi) -> None:
    held = api.kube.delay("tokenreviews", 3.0, times=SHARE)
    flooding = flood(api, FLOODER, SHARE)
    await eventually(lambda: held.hits == SHARE)

    status, body = await api.get(KEDA_PATH, token=secrets.token_hex(16), local_address=FLOODER)

    assert status == 429, body  # before: 401, reviewed: the cap (8) was not full
    assert body["reason"] == "TooManyRequests" and body["details"]["retryAfterSeconds"] == 1, body
    assert "TokenReview" in body["message"], body
    assert (await api.get(KEDA_PATH, token=secrets.token_hex(16), local_address="127.0.0.3"))[0] == 401
    assert {status for status, _ in await asyncio.gather(*flooding)} == {401}
    assert (await api.get(KEDA_PATH, token=secrets.token_hex(16), local_address=FLOODER))[0] == 401  # share back


async def test_reviews_in_flight_stay_within_the_cap_when_many_pods_flood(api: SecuredApi) -> None:
    """Five pods with a share of two each could start ten reviews; the cap (eight) still holds."""
    held = api.kube.delay("tokenreviews", 6.0)
    flooding = [task for peer in range(2, 7) for task in flood(api, f"127.0.0.{peer}", 3)]
    await settled(flooding, lambda: held.hits)

    assert held.hits == CAP
    statuses = sorted(status for status, _ in await asyncio.gather(*flooding))
    assert statuses == [401] * CAP + [429] * (len(flooding) - CAP)
    assert len(api.kube.token_reviews) == CAP


async def test_requests_with_a_token_under_review_share_it_past_the_peers_share(api: SecuredApi) -> None:
    held = api.kube.delay("tokenreviews", 3.0, times=SHARE)
    tokens = [secrets.token_hex(16) for _ in range(SHARE)]
    first = [asyncio.create_task(api.get(KEDA_PATH, token=token, local_address=FLOODER)) for token in tokens]
    await eventually(lambda: held.hits == SHARE)

    again = await asyncio.gather(api.get(KEDA_PATH, token=tokens[0], local_address=FLOODER),
                                 api.get(KEDA_PATH, token=tokens[1], local_address="127.0.0.3"))

    assert [status for status, _ in again] == [401, 401]  # the reviews under way answered them: not 429
    assert {status for status, _ in await asyncio.gather(*first)} == {401}
    assert len(api.kube.token_reviews) == SHARE


async def test_a_token_accepted_before_is_reviewed_past_its_peers_share_and_the_cap(api: SecuredApi) -> None:
    assert (await api.get(KEDA_PATH, token="keda-token", local_address=FLOODER))[0] == 200
    held = api.kube.delay("tokenreviews", 3.0, times=CAP)
    flooding = [task for peer in range(2, 2 + CAP // SHARE) for task in flood(api, f"127.0.0.{peer}", SHARE)]
    await eventually(lambda: held.hits == CAP)  # 127.0.0.2's share, and the cap, full

    status, body = await api.get(KEDA_PATH, token="keda-token", local_address=FLOODER)

    assert status == 200, body
    assert {status for status, _ in await asyncio.gather(*flooding)} == {401}


class HeldReviewer:
    """A TokenReviewer whose reviews all wait for `release`; it counts how many were under way at once."""

    def __init__(self) -> None:
        self.release = asyncio.Event()
        self.under_way = 0
        self.most = 0

    async def review_token(self, token: str) -> TokenReviewResult:
        self.under_way += 1
        self.most = max(self.most, self.under_way)
        await self.release.wait()
        self.under_way -= 1
        return TokenReviewResult(False, error="invalid bearer token")


@given(st.integers(1, 12), st.lists(st.tuples(st.integers(0, 3), st.integers(0, 11)), max_size=40))
@example(8, [(0, token) for token in range(8)] + [(1, 8)])  # one peer floods: 2 reviewed, 6 refused; another in
def test_a_review_is_refused_only_past_the_cap_or_the_peers_share(cap: int, requests: list[tuple[int, int]]) -> None:
    """Requests (peer, token) arrive while every review is held. A request is refused (not judged) exactly
    when its token has no review under way and either `cap` reviews are, or its peer started its share of
    them; the others share or start one. Once the reviews end, every peer has its whole share again."""
    share = peer_share(cap)
    assert share == max(1, cap // 4)

    def request(peer: int, token: str) -> asyncio.Task[object]:
        mocked = make_mocked_request("GET", "/", headers={"Authorization": f"Bearer {token}"})
        return asyncio.create_task(authenticator.authenticate(mocked.clone(remote=f"10.0.0.{peer}")))

    async def run() -> None:
        under_way: dict[int, int] = {}  # the model: token -> the peer that started its review
        tasks = []
        for peer, token in requests:
            task = request(peer, f"token-{token}")
            await asyncio.sleep(0)  # the request has started its review, joined one, or been refused
            by_peer = sum(starter == peer for starter in under_way.values())
            refused = token not in under_way and (len(under_way) >= cap or by_peer >= share)
            assert task.done() == refused and (not refused or isinstance(task.exception(), TokenReviewsBusy))
            if not refused:
                under_way.setdefault(token, peer)
            tasks.append(task)
        await asyncio.sleep(0)  # the reviews started have reached the reviewer
        assert reviewer.most == len(under_way) <= cap
        reviewer.release.set()
        answers = await asyncio.gather(*tasks, return_exceptions=True)
        assert all(isinstance(answer, AuthenticationError) for answer in answers)
        again = [request(peer, f"later-{peer}-{n}") for peer in range(4) for n in range(share)]
        await asyncio.sleep(0)
        assert sum(task.done() for task in again) == max(0, 4 * share - cap)  # every peer's share whole again
        await asyncio.gather(*again, return_exceptions=True)

    reviewer = HeldReviewer()
    authenticator = TokenAuthenticator(reviewer, ttl_s=0.0, max_in_flight=cap)
    asyncio.run(run())
