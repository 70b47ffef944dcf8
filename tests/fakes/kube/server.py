"""`FakeKubeApi`: the aiohttp server that puts the fake's parts together, and the process entry point.

The class is assembled from mixins, one per concern (see the package docstring); this module owns what is
about being a server: listening (plain or TLS), outages (`pause` / `resume`), the kubeconfig clients are
given, the middleware that records, injects faults and authenticates, routing a path to discovery, a
review or a stored resource, and process mode (`python -m tests.fakes.kube --state FILE.yaml`).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import signal
import ssl
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml
from aiohttp import web
from aiohttp.typedefs import Handler

from tests.fakes.kube.cluster import ClusterControls
from tests.fakes.kube.discovery import discovery_document
from tests.fakes.kube.faults import FaultInjection
from tests.fakes.kube.kserve import KServeControls
from tests.fakes.kube.resources import SUBJECT_ACCESS_REVIEWS, TOKEN_REVIEWS, parse_path
from tests.fakes.kube.reviews import AuthReviews
from tests.fakes.kube.subresources import Subresources
from tests.fakes.kube.wire import JSON, ApiError, json_body, json_response, truthy

if TYPE_CHECKING:
    from kubernetes.aio.client import Configuration


class FakeKubeApi(ClusterControls, KServeControls, AuthReviews, Subresources, FaultInjection):
    """A fake kube-apiserver on 127.0.0.1. Use as `async with FakeKubeApi() as kube:` and point clients at
    `kube.url` (or at `kube.write_kubeconfig(path)`).

    State lives in memory and is changed either through the HTTP API, by the code under test, or through the
    test controls below; both emit the same watch events. All controls are synchronous and must be called from
    the event loop the server runs on.
    """

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        git_version: str = "v1.31.0",
        require_token: str | None = None,
        tls: bool = False,
        clock: Callable[[], float] = time.time,
    ) -> None:
        super().__init__()
        self.host = host
        self.tls = tls
        """Serve https with a certificate from a throwaway CA (`ca_pem`). kubectl (client-go) sends credentials
        only over TLS, so a test that checks kubectl's token needs it; the Python clients send tokens either way."""
        self.ca_pem: bytes | None = None
        self._ssl: ssl.SSLContext | None = None
        self._port = port
        self.git_version = git_version
        self.require_token = require_token
        self.clock = clock
        self._runner: web.AppRunner | None = None
        self.set_authentication_config()

    # ---- lifecycle -------------------------------------------------------------------------------------------

    async def __aenter__(self) -> FakeKubeApi:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def start(self) -> None:
        """Listen on `host:port` (port 0 picks a free one, kept for `resume()`)."""
        app = web.Application(middlewares=[self._middleware])
        app.router.add_route("*", "/{tail:.*}", self._dispatch)
        runner = web.AppRunner(app, access_log=None, handler_cancellation=True, shutdown_timeout=1.0)
        await runner.setup()
        if self.tls and self._ssl is None:
            self._ssl = self._make_tls()
        site = web.TCPSite(runner, self.host, self._port, ssl_context=self._ssl)
        await site.start()
        self._runner = runner
        self._port = runner.addresses[0][1]

    async def close(self) -> None:
        """Finish every watch stream cleanly and stop listening."""
        self.end_watches()
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def pause(self) -> None:
        """An outage: drop every open connection (watches see the connection die) and refuse new ones."""
        self.end_watches(abort=True)
        if self._runner is not None:
            runner, self._runner = self._runner, None
            await runner.cleanup()

    async def resume(self) -> None:
        """Come back on the same port after `pause()`, with the same state."""
        await self.start()

    @property
    def port(self) -> int:
        return self._port

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://{self.host}:{self._port}"

    def write_kubeconfig(
        self, path: str | Path, token: str = "test-token", namespace: str = "default", token_file: Path | None = None
    ) -> Path:
        """A kubeconfig pointing at this server with a bearer token, for the Python clients and kubectl.

        With `token_file` the user reads its token from that file (`tokenFile`) instead, as a projected
        service-account token is handed to a process; client-go reads such a file again every minute.

        Over plain http kubectl sends no credentials at all (client-go reads the user's auth only for TLS
        transports); start the fake with `tls=True` when kubectl's token matters.

        From here on a request without an `Authorization` header is `system:anonymous`, refused with RBAC's 403
        but for the health endpoints and /version (401 with `anonymous_auth` False; kubectl over http excepted):
        a client of the code under test that drops the credentials fails here as on a cluster."""
        target = Path(path)
        self.credentials_given = True
        cluster: JSON = {"server": self.url}
        user: JSON = {"tokenFile": str(token_file)} if token_file is not None else {"token": token}
        if self.ca_pem is not None:
            cluster["certificate-authority-data"] = base64.b64encode(self.ca_pem).decode()
        document = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "fake", "cluster": cluster}],
            "users": [{"name": "fake-user", "user": user}],
            "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "fake-user", "namespace": namespace}}],
            "current-context": "fake",
            "preferences": {},
        }
        target.write_text(yaml.safe_dump(document, sort_keys=False))
        return target

    def client_configuration(self, token: str = "test-token") -> Configuration:
        """A `kubernetes.aio` client `Configuration` for this server carrying `token` as a bearer token (the one
        `write_kubeconfig` hands out by default), for a client a test builds by hand beside one from a kubeconfig
        (discovery's pod watch next to the writer's `KubeClient`, say).

        Once a kubeconfig is written the fake refuses a request without credentials (anonymous, 403), so a
        client built without the token sees its lists and watches fail, and the test waits for nothing until it
        times out; before that (and without `require_token`) the header goes unread. Plain http only: a
        `tls=True` fake wants the kubeconfig."""
        # Imported here, as trustme is for TLS: process mode (`python -m tests.fakes.kube`) goes without the client.
        from kubernetes.aio.client import Configuration

        configuration = Configuration()
        configuration.host = self.url
        configuration.api_key = {"BearerToken": f"Bearer {token}"}
        return configuration

    def _make_tls(self) -> ssl.SSLContext:
        import trustme  # a test dependency; imported only when TLS is asked for

        from tests.support.certificates import issue_cert

        authority = trustme.CA()
        certificate = issue_cert(authority, self.host, "localhost")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        certificate.configure_cert(context)
        self.ca_pem = authority.cert_pem.bytes()
        return context

    # ---- HTTP ------------------------------------------------------------------------------------------------

    @web.middleware
    async def _middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        """Record, then delay / fail as injected, then authenticate; any ApiError becomes its Status answer, held
        where a test holds it after the request was applied (`hold_answer(applied=True)`)."""
        record = await self._record(request)
        try:
            await self._inject(request)
            self._authenticate(request)
            response: web.StreamResponse = await handler(request)
        except ApiError as error:
            response = json_response(error.status(), status=error.code, headers=error.headers)
        await self._hold(request, applied=True)
        self._answered(record, response.status)
        return response

    async def _dispatch(self, request: web.Request) -> web.StreamResponse:
        path = request.path.rstrip("/") or "/"
        if path in ("/healthz", "/livez", "/readyz"):
            return web.Response(text="ok")
        discovery = discovery_document(path, git_version=self.git_version, server_address=f"{self.host}:{self._port}")
        if discovery is not None:
            if request.method != "GET":
                raise ApiError.method_not_allowed()
            return json_response(discovery)
        parsed = parse_path(path)
        if parsed is None:
            raise ApiError.no_such_path()
        rtype, namespace, name, subresource = parsed
        if subresource is not None:
            if not rtype.namespaced or namespace is not None:
                key = (namespace or "", name or "")
                return json_response(self._subresource(request.method, rtype, key, subresource,
                                                       await request.read(), request.content_type))
            raise ApiError.no_such_path()
        if rtype is SUBJECT_ACCESS_REVIEWS and name is None and request.method == "POST":
            return self._subject_access_review(await json_body(request))
        if rtype is TOKEN_REVIEWS and name is None and request.method == "POST":
            return self._token_review(await json_body(request))
        if not rtype.stored or (
            rtype.namespaced and namespace is None and (name is not None or request.method != "GET")
        ):
            raise ApiError.method_not_allowed()
        if not rtype.namespaced and namespace is not None:
            raise ApiError.no_such_path()
        ns = namespace or ""
        if name is None:
            if request.method == "GET":
                if truthy(request.query.get("watch")):
                    return await self._watch(request, rtype, namespace)
                return json_response(self._list(rtype, namespace, request))
            if request.method == "POST":
                return json_response(self._post(rtype, ns, await json_body(request)), status=201)
            raise ApiError.method_not_allowed()
        key = (ns, name)
        if request.method == "GET":
            obj = self._objects[rtype].get(key)
            if obj is None:
                raise ApiError.not_found(rtype, name)
            return json_response(self._render(rtype, obj))
        if request.method == "PUT":
            result, created = self._put(rtype, key, await json_body(request))
            return json_response(result, status=201 if created else 200)
        if request.method == "PATCH":
            return json_response(self._patch(rtype, key, request.content_type, await request.read()))
        if request.method == "DELETE":
            return json_response(self._delete(rtype, key))
        raise ApiError.method_not_allowed()

    # ---- process mode ---------------------------------------------------------------------------------------

    def load_state(self, state: Mapping[str, Any]) -> None:
        """Load deployments, pods, tokens and access rules from a mapping (the `--state` YAML file)."""
        for item in state.get("deployments") or []:
            self.add_deployment(
                item.get("namespace", "default"),
                item["name"],
                int(item.get("replicas", 1)),
                labels=item.get("labels"),
                selector=item.get("selector"),
                annotations=item.get("annotations"),
            )
        for item in state.get("runtimes") or []:
            self.add_modelmesh_runtime(
                item.get("namespace", "default"),
                item["deployment"],
                int(item.get("replicas", 2)),
                ready_pods=item.get("ready_pods"),
                annotations=item.get("annotations"),
            )
        for item in state.get("pods") or []:
            self.add_pod(
                item.get("namespace", "default"),
                item["name"],
                labels=item.get("labels"),
                ip=item.get("ip"),
                ready=bool(item.get("ready", True)),
                created=item.get("created"),
                annotations=item.get("annotations"),
            )
        for token, identity in (state.get("tokens") or {}).items():
            self.tokens[token] = (identity["user"], list(identity.get("groups") or []))
        for rule in state.get("allow") or []:
            self.allow(**rule)
        if state.get("require_token"):
            self.require_token = str(state["require_token"])


async def _serve(args: argparse.Namespace) -> None:
    kube = FakeKubeApi(args.host, args.port)
    if args.state:
        kube.load_state(yaml.safe_load(Path(args.state).read_text()) or {})
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    async with kube:
        if args.kubeconfig:
            kube.write_kubeconfig(args.kubeconfig, token=args.token)
        print(f"fake kube-apiserver listening on {kube.url}", flush=True)
        await stop.wait()


def main(argv: Sequence[str] | None = None) -> None:
    """`python -m tests.fakes.kube --port N --state FILE.yaml [--kubeconfig OUT]`: serve until SIGTERM."""
    parser = argparse.ArgumentParser(
        prog="python -m tests.fakes.kube",
        description="A fake Kubernetes API server that speaks the real wire format, shared by every test that "
        "needs one.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--state", help="YAML with deployments, runtimes, pods, tokens, allow, require_token")
    parser.add_argument("--kubeconfig", help="write a kubeconfig pointing at the server here")
    parser.add_argument("--token", default="test-token", help="bearer token written into --kubeconfig")
    asyncio.run(_serve(parser.parse_args(argv)))
