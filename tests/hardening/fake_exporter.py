"""A hostile exporter for the hardening tests: `/metrics` streams a huge body (64 MiB by default), the way
any pod matching a runtime's selector could. `python -m tests.hardening.fake_exporter --port P`."""

from __future__ import annotations

import argparse

from aiohttp import web

MEGABYTES = web.AppKey("megabytes", int)
CHUNK = (b"# " + b"x" * 1021 + b"\n") * 64  # 64 KiB of comment lines, cheap for any parser that reads them


async def huge(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/plain; version=0.0.4"})
    await response.prepare(request)
    try:
        for _ in range(request.app[MEGABYTES] * 16):
            await response.write(CHUNK)
        await response.write_eof()
    except (ConnectionError, RuntimeError):
        pass  # the reader hung up: what a capped reader does
    return response


async def healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--megabytes", type=int, default=64)
    args = parser.parse_args()
    app = web.Application()
    app[MEGABYTES] = args.megabytes
    app.router.add_get("/metrics", huge)
    app.router.add_get("/healthz", healthz)
    web.run_app(app, host="127.0.0.1", port=args.port, print=None, access_log=None)


if __name__ == "__main__":
    main()
