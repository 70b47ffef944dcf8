"""What the adapter says when `--prometheus-url`'s scheme or host does not fit Prometheus's TLS, through the real
CLI flags: each of these was logged as "give the CA that signs Prometheus's certificate: --prometheus-ca-file",
which sends the operator after a CA that was never the problem.

- `https://` to a Prometheus that serves plain http (the default): OpenSSL's "wrong version number".
- the right CA, but a URL host the certificate is not issued for (an IP address, another Service's name): the
  reason was cut at its first quote ("certificate is not valid for ; give the CA ...").
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trustme

from tests.fakes.prometheus import PrometheusServer
from tests.sources.test_prometheus_probe_backends import collect, empty_prometheus_over_tls, warnings
from tests.support.certificates import issue_cert


@pytest.fixture
async def plain_prometheus(tmp_path: Path) -> AsyncIterator[PrometheusServer]:
    """A real Prometheus, plain http as it serves by default (no web config)."""
    async with PrometheusServer(workdir=tmp_path / "prometheus") as prom:
        yield prom


async def test_https_to_a_plain_http_prometheus_says_to_use_http_not_a_ca(
    plain_prometheus: PrometheusServer, caplog: pytest.LogCaptureFixture
) -> None:
    url = plain_prometheus.url.replace("http://", "https://")
    with caplog.at_level(logging.WARNING):
        snapshots, errors = await collect(url)

    assert all(not s.source_ok for s in snapshots)
    assert errors == {"tls": 1}
    (line,) = warnings(caplog)
    assert "http://" in line and "--prometheus-url" in line, line
    assert "--prometheus-ca-file" not in line, line


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost"])
async def test_a_url_host_the_certificate_does_not_name_is_said_with_the_host_not_as_a_missing_ca(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, host: str
) -> None:
    """Thanos Querier's certificate names `thanos-querier.openshift-monitoring.svc`; the adapter is pointed at its
    IP address, or another name, with the right CA."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.crt"))
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    issue_cert(ca, "thanos-querier.openshift-monitoring.svc").configure_cert(context)
    async with empty_prometheus_over_tls(context) as port:
        with caplog.at_level(logging.WARNING):
            snapshots, errors = await collect(f"https://{host}:{port}", "--prometheus-ca-file",
                                              str(tmp_path / "ca.crt"))

    assert all(not s.source_ok for s in snapshots)
    assert errors == {"tls": 1}
    (line,) = warnings(caplog)
    assert f"not valid for '{host}'" in line, line
    assert "--prometheus-ca-file" not in line, line
    assert "--prometheus-url" in line, line
