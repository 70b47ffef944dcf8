"""An exporter behind https, as a targets file may name one: the exporter's own output (a request rate and a
fresh ModelMesh collector timestamp) served with a certificate from a test CA.

`python -m tests.hardening.https_exporter --port P --cert CERT --key KEY`.
"""

from __future__ import annotations

import argparse
import ssl
import time

from aiohttp import web

from exporter import names

REQUESTS_PER_SECOND = 42.0


async def metrics(_: web.Request) -> web.Response:
    text = (
        f"# TYPE {names.REQUESTS_PER_SECOND} gauge\n{names.REQUESTS_PER_SECOND} {REQUESTS_PER_SECOND}\n"
        f"# TYPE {names.LAST_SUCCESS_TIMESTAMP} gauge\n"
        f'{names.LAST_SUCCESS_TIMESTAMP}{{collector="{names.COLLECTOR_MODELMESH}"}} {time.time()}\n'
    )
    return web.Response(text=text, content_type="text/plain")


async def healthz(_: web.Request) -> web.Response:
    return web.Response(text="ok")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--cert", required=True)
    parser.add_argument("--key", required=True)
    args = parser.parse_args()
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(args.cert, args.key)
    app = web.Application()
    app.router.add_get("/metrics", metrics)
    app.router.add_get("/healthz", healthz)
    web.run_app(app, host="127.0.0.1", port=args.port, ssl_context=context, print=None, access_log=None)


if __name__ == "__main__":
    main()
