"""`--listen :PORT` (no host) serves every address of both families, as the shipped Deployment asks.

In an IPv6 single-stack cluster, or a dual-stack one with IPv6 first, the kubelet's probes and the aggregator
reach the adapter at its pod's IPv6 address. The adapter bound IPv4 alone for `0.0.0.0:6443` and for `:6443`
(`[::]` is IPv6's alone: asyncio sets IPV6_V6ONLY), so no value of `--listen` served both, and the shipped
Deployment's pod was never Ready there. Go's servers (kube-apiserver, metrics-server) serve both on a wildcard.
"""

from __future__ import annotations

import argparse
import asyncio
import ssl

from aiohttp import web

from autoscaler.api.app import build_api_app
from autoscaler.api.connections import ConnectionLimits, GuardedSite
from autoscaler.serve_args import settings_from_args
from autoscaler.settings import ServeSettings
from tests.api.builders import KEY, Pki, refresher_with, runtime_view
from tests.support.ports import machine_has_ipv6
from tests.support.processes import free_port


async def status_of(host: str, port: int, client: ssl.SSLContext) -> bytes:
    reader, writer = await asyncio.open_connection(host, port, ssl=client, server_hostname="localhost")
    writer.write(b"GET /healthz HTTP/1.1\r\nHost: adapter\r\nConnection: close\r\n\r\n")
    await writer.drain()
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer.split(b"\r\n", 1)[0]


async def test_no_host_serves_ipv4_and_ipv6(pki: Pki) -> None:
    refresher = refresher_with(runtime_view(KEY))
    runner = web.AppRunner(build_api_app(refresher, refresher.metrics), access_log=None)
    await runner.setup()
    port = free_port()
    site = GuardedSite(runner, "", port, tls=pki.server_context(), limits=ConnectionLimits())
    try:
        await site.start()
        assert await status_of("127.0.0.1", port, pki.client_context()) == b"HTTP/1.1 200 OK"
        if machine_has_ipv6():
            assert await status_of("::1", port, pki.client_context()) == b"HTTP/1.1 200 OK"
    finally:
        await runner.cleanup()


def test_the_default_listen_is_every_address_of_both_families() -> None:
    settings = settings_from_args(_serve_args([]))
    assert (settings.listen_host, settings.listen_port) == ("", 6443)
    assert settings.serving_url == "https://*:6443"


def test_an_explicit_ipv4_wildcard_stays_what_it_says() -> None:
    settings: ServeSettings = settings_from_args(_serve_args(["--listen", "0.0.0.0:6443"]))
    assert settings.listen_host == "0.0.0.0" and settings.serving_url == "https://0.0.0.0:6443"


def _serve_args(argv: list[str]) -> argparse.Namespace:
    from autoscaler.cli import build_parser

    return build_parser().parse_args(["serve", *argv])
