"""The gate's open paths (`--authorization-always-allow-paths`): served without authentication exactly when
`AlwaysAllowPaths` holds the request's decoded path and the request is not a resource request, as
kube-apiserver matches them. The gate tests this inline on the raw path when it holds no escape (a Python call
less on every request), so the promise is checked here against the set's own answer (`opens`) for paths with
and without escapes, exact entries and prefixes, resource paths (`/debug/runtimes/NS/NAME`) and others."""

from __future__ import annotations

from aiohttp.test_utils import make_mocked_request
from hypothesis import assume, example, given
from hypothesis import strategies as st

from autoscaler.api.auth import auth_gate
from autoscaler.api.authn import UnionAuthenticator
from autoscaler.api.authz import Decision
from autoscaler.api.identity import Attributes, UserInfo
from autoscaler.api.open_paths import AlwaysAllowPaths
from autoscaler.selfmetrics import AdapterMetrics


class NeverAsked:
    def cached(self, user: UserInfo, attributes: Attributes) -> Decision | None:
        raise AssertionError("an open path is never authorized")

    async def authorize(self, user: UserInfo, attributes: Attributes) -> Decision:
        raise AssertionError("an open path is never authorized")


OPEN = AlwaysAllowPaths.parse(["/healthz", "metrics", "/debug/*", "/a b"])
GATE = auth_gate(UnionAuthenticator([]), NeverAsked(), OPEN, AdapterMetrics())

pieces = st.sampled_from(["/", "healthz", "metrics", "debug", "runtimes", "%2F", "%68", "%2f", "%20", " ", "a",
                          "b", "%", "%zz", "+", "apis", "healthz/", "%2Fhealthz", "ealthz"])


@given(st.lists(pieces, max_size=6).map(lambda parts: "/" + "".join(parts)))
@example("/%68ealthz")
@example("/debug%2Fruntimes")
@example("/a%20b")
@example("/debug/")
@example("/healthz/")
@example("/debug/runtimes/a/b")
@example("/debug/runtimes/a%2Fb/b")
def test_a_path_is_open_exactly_when_the_set_holds_its_decoded_form(raw_path: str) -> None:
    assume(not raw_path.startswith("//"))  # a network-path reference to the test's URL parser
    request = make_mocked_request("GET", raw_path)
    decision = GATE(request)
    if decision is not None:  # not open: authentication would follow (and refuse: no authenticators)
        decision.close()  # type: ignore[attr-defined]  # the coroutine, never started
    assert (decision is None) == OPEN.opens("GET", raw_path, request.path), (raw_path, request.path)
