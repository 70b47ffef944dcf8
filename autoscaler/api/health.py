"""`/healthz`, `/livez` and `/readyz` as k8s.io/apiserver serves them (`pkg/server/healthz`), for the checks the
adapter has: operators and tools written against kube-apiserver, metrics-server or prometheus-adapter ask for
`/readyz?verbose` to see which check fails and `/livez/ping` to see the process answer at all.

- `PATH` answers `ok` when every check passes; with `?verbose` (the key, whatever its value) it lists each
  check (`[+]NAME ok`) and ends `NAME check passed`;
- `?exclude=NAME` (repeatable) leaves a check out (`[+]NAME excluded: ok`); a name no check of the path has
  is warned of in the listing (`warn: some health checks cannot be excluded: no matches for "NAME"`);
- each check is also served alone at `PATH/NAME` (`ok`).

A failing check answers as the adapter always has: 503 and a `Status` saying why (the kubelet's probe reads any
code from 400 as a failure; kube-apiserver's 500 listing withholds the reason, which the adapter's probes and
operators need). The checks:

- `ping`: the process answers;
- `values` (`/readyz` only): the first refresh has completed and no drain after SIGTERM has withdrawn readiness;
- `refresh`: the refresh delivers values within the stall limit (`stall.StallWatch`; always passes where none
  watches): a hung refresh is cured by a restart only, so `/livez` fails too.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from aiohttp import web

from autoscaler.api.list_options import go_quote
from autoscaler.api.snapshot import SNAPSHOT_KEY
from autoscaler.api.stall import StallWatch
from autoscaler.api.status import ApiError, ApiResponse

Check = Callable[[web.Request], None]
"""Passes by returning; fails by raising the `ApiError` its path answers with."""
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _ping(request: web.Request) -> None:
    return None


def _values(request: web.Request) -> None:
    if not request.app[SNAPSHOT_KEY].current.ready:
        raise ApiError(503, "waiting for the first refresh")


CHECKS: dict[str, tuple[str, ...]] = {"/healthz": ("ping", "refresh"), "/livez": ("ping", "refresh"),
                                      "/readyz": ("ping", "values", "refresh")}
"""Each health path's named checks, in the order they run and are listed (`openapi` documents each)."""
CHECK_DESCRIPTIONS = {
    "ping": "ok while the process answers.",
    "values": "ok once the first refresh completed (503 before it, and while draining after SIGTERM).",
    "refresh": "ok while the values are refreshed (503 once the refresh has stalled).",
}


def health_checks(stall: StallWatch | None) -> dict[str, tuple[tuple[str, Check], ...]]:
    """Each health path's checks (`CHECKS`) with what runs them; without a stall watch (`stall` None: never
    judged) `refresh` always passes."""
    run: dict[str, Check] = {"ping": _ping, "values": _values,
                             "refresh": _ping if stall is None else lambda request: stall.refuse_if_stalled()}
    return {path: tuple((name, run[name]) for name in names) for path, names in CHECKS.items()}


def health_routes(stall: StallWatch | None) -> list[tuple[str, Handler]]:
    """Every health path and `PATH/NAME` of its checks, with its handler."""
    routes: list[tuple[str, Handler]] = []
    for path, checks in health_checks(stall).items():
        routes.append((path, _root(path.removeprefix("/"), checks)))
        routes.extend((f"{path}/{name}", _one(check)) for name, check in checks)
    return routes


def _root(name: str, checks: tuple[tuple[str, Check], ...]) -> Handler:
    async def health(request: web.Request) -> web.Response:
        excluded = set(request.query.getall("exclude", ()))
        listing = []
        for check_name, check in checks:
            if check_name in excluded:
                excluded.discard(check_name)
                listing.append(f"[+]{check_name} excluded: ok\n")
                continue
            check(request)
            listing.append(f"[+]{check_name} ok\n")
        if excluded:
            listing.append("warn: some health checks cannot be excluded: no matches for "
                           f"{','.join(go_quote(left) for left in sorted(excluded))}\n")
        if "verbose" not in request.query:
            return ApiResponse(text="ok")
        return ApiResponse(text="".join(listing) + f"{name} check passed\n")

    return health


def _one(check: Check) -> Handler:
    async def health_check(request: web.Request) -> web.Response:
        check(request)
        return ApiResponse(text="ok")

    return health_check
