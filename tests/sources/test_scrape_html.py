"""An HTML page where the exporter's /metrics should be (a login proxy, an ingress's error page, another
service on the port) was said as a parse error of an exposition: `truncated exposition (no final newline)`
without a final newline, `invalid metric name:<!DOCTYPE html>` with one. Both say it is an HTML page, with
its title, and what may have answered. Real servers on real sockets.
"""

from __future__ import annotations

import pytest
from aiohttp import web
from pytest_aiohttp import AiohttpServer

from tests.sources.test_scrape_hints import said, serve


@pytest.mark.parametrize("page", [
    "<!DOCTYPE html>\n<html><head><title>Sign in</title></head>\n<body>sso</body></html>\n",
    "<html><head><title>Sign in</title></head><body>sso</body></html>",
    "\n  <!doctype html><html><head><title>Sign in</title></head></html>",
], ids=["doctype-newline", "no-final-newline", "leading-space"])
async def test_an_html_page_is_said_to_be_one(aiohttp_server: AiohttpServer, page: str) -> None:
    async def login(request: web.Request) -> web.Response:
        return web.Response(text=page, content_type="text/html")

    port = await serve(aiohttp_server, login)
    reason, detail = await said(f"http://127.0.0.1:{port}/metrics")
    assert reason == "parse", detail
    assert 'an HTML page titled "Sign in"' in detail, detail
    assert "not the exporter's metrics" in detail and "proxy" in detail, detail
    assert "truncated" not in detail and "invalid metric name" not in detail, detail
