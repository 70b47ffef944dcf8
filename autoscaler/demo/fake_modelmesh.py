"""A stand-in for a ModelMesh runtime container's `/metrics`, driven by the caller: the HTTP surface of a
`FakeModelMesh` (`fake_modelmesh_metrics`, which says what it serves), with its controls, and the process
(`python -m autoscaler.demo.fake_modelmesh`).

Faults, for testing what a scraper does with a broken ModelMesh: `FakeModelMesh.set_fault(...)` or
`POST /control {"fault": "...", "fault_delay_s": 5}`; `"fault": null` heals it. Counters keep counting
through a fault, as a real container's would:

- `garbage`: 200 with an HTML page instead of metrics
- `truncated`: a complete HTTP answer whose body stops mid-line (a proxy or writer that gave up)
- `cut`: the connection drops halfway through a body whose Content-Length promised more
- `slow`: the answer comes after `fault_delay_s` seconds (default 5)
- `error`: HTTP 500
- `endless`: 200 with a body that never ends (comment lines, streamed until the client hangs up)
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import logging
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from ssl import SSLContext
from typing import Any, Final

from aiohttp import web
from prometheus_client import CollectorRegistry
from prometheus_client.aiohttp import make_aiohttp_handler

from autoscaler.api.certs import generate_self_signed, server_context
from autoscaler.demo.fake_modelmesh_metrics import FAULTS, FakeModelMesh, ModelMeshLoad

log = logging.getLogger(__name__)

_FAKE_KEY: web.AppKey[FakeModelMesh] = web.AppKey("fake_modelmesh", FakeModelMesh)

_LOAD_KINDS: Final = {f.name: str(f.type) for f in dataclasses.fields(ModelMeshLoad)}
CONTROL_FIELDS: Final = (*_LOAD_KINDS, "fault", "fault_delay_s")
"""What `POST /control` takes: `ModelMeshLoad`'s fields, and `/metrics`'s fault (`FAULTS`) with its delay."""
MAX_CONTROL_NUMBER: Final = 1e15
"""The largest number `/control` takes: a rate of 1e308 made the counters infinite, and every scrape failed."""
MAX_MODELS_LOADED: Final = 10_000
"""The most models `/control` takes: each is a series of every histogram (10**9 would fill the memory)."""


def control_changes(body: object) -> dict[str, Any]:
    """`POST /control`'s JSON, each field checked before any is applied: a ValueError names the first field it
    does not take, or a value of the wrong kind. Passed on as it was, `{"rps": 600}` (the fake's own `--rps`)
    answered `ModelMeshLoad.__init__() got an unexpected keyword argument 'rps'`, and `"600"` for a rate was taken,
    to fail every scrape after it."""
    takes = f"POST /control takes {', '.join(CONTROL_FIELDS)}"
    if not isinstance(body, dict):
        raise ValueError(f"expected a JSON object of fields; {takes}")
    for name, value in body.items():
        kind = "fault" if name == "fault" else _LOAD_KINDS.get(name, "float" if name == "fault_delay_s" else None)
        if kind is None:
            raise ValueError(f"unknown field {name!r}; {takes}")
        if kind == "fault" and value is not None and not (isinstance(value, str) and value in FAULTS):
            raise ValueError(f"unknown fault {value!r}; one of {', '.join(sorted(FAULTS))} or null")
        if kind == "bool" and not isinstance(value, bool):
            raise ValueError(f"{name} must be true or false, not {value!r}")
        if kind == "int" and (isinstance(value, bool) or not isinstance(value, int)
                              or not 0 <= value <= MAX_MODELS_LOADED):
            raise ValueError(f"{name} must be a whole number from 0 to {MAX_MODELS_LOADED}, not {value!r}")
        if kind == "float" and (isinstance(value, bool) or not isinstance(value, int | float)
                                or not abs(value) <= MAX_CONTROL_NUMBER):  # NaN too
            raise ValueError(f"{name} must be a number from {-MAX_CONTROL_NUMBER:g} to {MAX_CONTROL_NUMBER:g}, "
                             f"not {value!r}")
    return body


async def _control(request: web.Request) -> web.Response:
    fake = request.app[_FAKE_KEY]
    try:
        changes = control_changes(await request.json())
    except ValueError as error:  # a body that is not JSON too
        return web.json_response({"error": str(error)}, status=400)
    if "fault" in changes or "fault_delay_s" in changes:
        fake.set_fault(changes.pop("fault", fake.fault), changes.pop("fault_delay_s", None))
    fake.update(**changes)
    return web.json_response({**dataclasses.asdict(fake.load), "fault": fake.fault})


def _metrics_handler(registry: CollectorRegistry) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    """ModelMesh's `/metrics`, broken in the way the fake's current fault says."""
    render = make_aiohttp_handler(registry, disable_compression=True)

    async def metrics(request: web.Request) -> web.StreamResponse:
        fake = request.app[_FAKE_KEY]
        fake.scrapes += 1
        fault = fake.fault
        if fault == "slow":
            # Sleep in steps, ending early once the client gave up, so shutting the fake down never waits.
            deadline = time.monotonic() + fake.fault_delay_s
            while time.monotonic() < deadline and request.transport is not None:
                await asyncio.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        if fault == "error":
            return web.Response(status=500, text="java.lang.IllegalStateException: not ready\n")
        if fault == "garbage":
            return web.Response(text="<html><body><h1>502 Bad Gateway</h1></body></html>\n",
                                content_type="text/html")
        if fault == "endless":
            stream = web.StreamResponse()
            stream.content_type = "text/plain"
            await stream.prepare(request)
            chunk = b"# a body that never ends\n" * 4096  # 100 KiB
            with contextlib.suppress(ConnectionError):
                # 1 GiB, more than any client reads, until the client hangs up. Each write yields to the loop:
                # an in-process client shares it, and a write to a TLS transport need not wait for anything.
                for _ in range(10 * 1024):
                    if request.transport is None or request.transport.is_closing():
                        break
                    await stream.write(chunk)
                    await asyncio.sleep(0)
            return stream
        response = await render(request)
        payload = response.body if isinstance(response, web.Response) else None
        body = bytes(payload) if isinstance(payload, bytes | bytearray) else b""
        if fault == "truncated":
            return web.Response(body=body[: len(body) // 2], content_type="text/plain")
        if fault == "cut":
            stream = web.StreamResponse()
            stream.content_type = "text/plain"
            stream.content_length = len(body)
            await stream.prepare(request)
            await stream.write(body[: len(body) // 2])
            if request.transport is not None:
                request.transport.close()
            return stream
        return response

    return metrics


async def _reset(request: web.Request) -> web.Response:
    request.app[_FAKE_KEY].reset_counters()
    return web.json_response({"restarts": request.app[_FAKE_KEY].restarts})


def build_app(fake: FakeModelMesh) -> web.Application:
    """The fake's HTTP surface: ModelMesh's `/metrics`, plus the controls the demo and tests use."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(fake)
    app = web.Application()
    app[_FAKE_KEY] = fake
    app.router.add_get("/metrics", _metrics_handler(registry))
    app.router.add_post("/control", _control)
    app.router.add_post("/reset", _reset)
    return app


CONTROL_HELP: Final = (
    "POST /control with a JSON object of any of these fields sets them from then on (counters so far are kept): "
    + ", ".join(f"{f.name} (default {json.dumps(f.default)})" for f in dataclasses.fields(ModelMeshLoad))
    + f"; fault, one of {', '.join(sorted(FAULTS))}, or null for good metrics again; fault_delay_s, the seconds a "
    "slow answer takes (default 5). An unknown field, or a value of the wrong kind or out of range, is a 400 that "
    "names it, and changes nothing. POST /reset starts every counter again, as a container restart does.")


def main(argv: list[str] | None = None) -> None:
    """Run one fake ModelMesh container as a process (https with a self-signed certificate by default)."""
    parser = argparse.ArgumentParser(
        prog="python -m autoscaler.demo.fake_modelmesh",
        description="Serve ModelMesh-shaped /metrics whose load is set with POST /control.",
        epilog=CONTROL_HELP,
    )
    parser.add_argument("--listen", default="127.0.0.1:2112", help="HOST:PORT (default %(default)s)")
    parser.add_argument("--http", action="store_true", help="serve plain http instead of ModelMesh's https")
    parser.add_argument("--cert-dir", type=Path, help="where to write the self-signed certificate (https)")
    parser.add_argument("--rps", type=float, default=0.0, help="initial requests per second")
    parser.add_argument("--no-per-model-metrics", action="store_true",
                        help="serve ModelMesh's default histograms, without the modelId and vModelId labels of "
                             "MM_METRICS=...;per_model_metrics=true")
    parser.add_argument("--model-prefix", help="the start of this pod's model ids (default: fake<port>, apart from "
                        "every other fake's on this machine); pods given the same prefix serve the same models")
    args = parser.parse_args(argv)
    host, _, port = args.listen.rpartition(":")
    fake = FakeModelMesh(ModelMeshLoad(requests_per_second=args.rps), per_model=not args.no_per_model_metrics,
                         model_prefix=args.model_prefix or f"fake{port}")
    ssl_context = None
    if not args.http:
        directory = args.cert_dir or Path(f"/tmp/fake-modelmesh-{port}")
        files = generate_self_signed(directory, "fake-modelmesh", [host, "localhost"])
        ssl_context = server_context(files.cert_file, files.key_file)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    web.run_app(build_app(fake), host=host, port=int(port), ssl_context=ssl_context, print=None,
                handle_signals=True)


async def serve(
    fake: FakeModelMesh, host: str, port: int, *, ssl_context: SSLContext | None = None
) -> web.AppRunner:
    """Start the fake in the running event loop (plain http, or https with `ssl_context`); the caller cleans
    up the runner. Port 0 picks a free port: read it from `runner.addresses`."""
    runner = web.AppRunner(build_app(fake), handle_signals=False, shutdown_timeout=1.0)
    await runner.setup()
    await web.TCPSite(runner, host, port, ssl_context=ssl_context).start()
    return runner


if __name__ == "__main__":
    main()
