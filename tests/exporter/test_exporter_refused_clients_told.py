"""A client the exporter's HTTPS port refuses is told why, as Go's servers tell it, where it was told nothing.

Plain HTTP sent to the port (a ServiceMonitor without `scheme: https`, `curl http://`) got a closed connection:
curl said "Empty reply from server", Prometheus's target page "EOF". A client certificate of a CA the exporter
does not trust (`--tls-client-ca-file`) got the same EOF, where OpenSSL had written the alert naming the cause.
Checked with the real exporter process, curl and openssl s_client, as an operator checks a refused scrape."""

from __future__ import annotations

import json
import subprocess
import urllib.request
from pathlib import Path

import pytest
import trustme
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.exporter.test_exporter_client_certificates import client_certificate, exporter, to_exporter
from tests.exporter.test_exporter_serving_tls import Pki, curl, pki
from tests.fakes.prometheus import PrometheusServer
from tests.support.processes import poll
from tests.support.raw_http import read_until_closed
from tests.support.waiting import eventually

__all__ = ["exporter", "pki"]  # the fixtures, taken from their modules (an HTTPS exporter asking for certificates)


def test_plain_http_to_the_https_port_is_answered_400_saying_to_use_https(pki: Pki, exporter: str) -> None:
    port = exporter.rpartition(":")[2]
    answer = curl(f"http://127.0.0.1:{port}/metrics")
    assert answer.stdout.endswith("\n400"), answer
    assert "Client sent an HTTP request to an HTTPS server" in answer.stdout
    assert "https://" in answer.stdout
    assert "--tls-cert-file (EXPORTER_TLS_CERT_FILE)" in answer.stdout
    assert "modelmesh_" not in answer.stdout
    healthz = to_exporter(f"{exporter}/healthz", pki)  # the port goes on serving HTTPS
    assert healthz.stdout == "ok\n\n200", healthz


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(method=st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZ", min_size=3, max_size=10),
       path=st.text("abcdefghijklmnopqrstuvwxyz0123456789/-_.?=&", max_size=40))
def test_any_plain_http_request_line_is_answered_400(exporter: str, method: str, path: str) -> None:
    """Not only the methods OpenSSL recognises (GET, POST, HEAD, PUT): any request line gets the whole answer,
    then the close (`read_until_closed` reads to EOF)."""
    request = f"{method} /{path} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    answer = read_until_closed(int(exporter.rpartition(":")[2]), request)
    assert answer.startswith(b"HTTP/1.0 400 Bad Request\r\n"), answer
    head, _, body = answer.partition(b"\r\n\r\n")
    assert body.startswith(b"Client sent an HTTP request to an HTTPS server.\n"), answer
    assert f"Content-Length: {len(body)}".encode() in head, answer


async def test_prometheus_scraping_http_is_told_400_not_eof(exporter: str) -> None:
    port = exporter.rpartition(":")[2]
    async with PrometheusServer([f"127.0.0.1:{port}"]) as prometheus:  # scheme http, as a ServiceMonitor's default

        def last_error() -> str:
            with urllib.request.urlopen(f"{prometheus.url}/api/v1/targets", timeout=10) as answer:
                targets = json.load(answer)["data"]["activeTargets"]
            return str(targets[0]["lastError"]) if targets else ""

        await eventually(lambda: last_error() != "")
        assert "400 Bad Request" in last_error(), last_error()  # where its target page said "EOF"


@pytest.mark.parametrize("version", [["--tlsv1.3"], ["--tlsv1.2", "--tls-max", "1.2"]], ids=["tls1.3", "tls1.2"])
def test_a_certificate_of_another_ca_gets_the_alert_naming_it(tmp_path: Path, pki: Pki, exporter: str,
                                                              version: list[str]) -> None:
    answer = to_exporter(f"{exporter}/metrics", pki, *version,
                         *client_certificate(tmp_path, trustme.CA(), "stranger"))
    assert answer.returncode != 0, answer
    assert "alert unknown ca" in answer.stderr, answer.stderr  # not "Empty reply from server" nor a bare EOF


def test_openssl_s_client_is_told_unknown_ca(tmp_path: Path, pki: Pki, exporter: str) -> None:
    port = exporter.rpartition(":")[2]
    stranger = client_certificate(tmp_path, trustme.CA(), "stranger")
    shown = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_2",
                            "-CAfile", str(pki.ca_file), "-cert", stranger[1], "-key", stranger[3]],
                           input="", capture_output=True, text=True, timeout=20, check=False)
    assert "alert unknown ca" in shown.stdout + shown.stderr, shown.stderr


def test_a_plain_http_client_that_does_not_close_reads_the_answer_then_eof(exporter: str) -> None:
    """As Go does: the 400, then the close, where the connection stayed open until the client went or the
    handshake timed out a minute later."""
    received = read_until_closed(int(exporter.rpartition(":")[2]), b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    assert received.startswith(b"HTTP/1.0 400 Bad Request\r\n"), received
    head, _, body = received.partition(b"\r\n\r\n")
    assert f"Content-Length: {len(body)}".encode() in head, received  # the whole answer, then EOF


def warnings_in(log: Path) -> list[str]:
    """The exporter's WARNING lines about the clients its HTTPS port refused."""
    return [line for line in log.read_text().splitlines() if "WARNING exporter.metrics_tls:" in line]


def refusals_said(log: Path, words: str) -> list[str]:
    """The exporter's WARNING lines naming the peer and containing `words`, once there are any."""
    return poll(lambda: [line for line in warnings_in(log) if "127.0.0.1" in line and words in line], 20)


def test_plain_http_is_one_warning_naming_the_peer_and_https(tmp_path: Path, exporter: str) -> None:
    port = int(exporter.rpartition(":")[2])
    for _ in range(5):
        read_until_closed(port, b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
    lines = refusals_said(tmp_path / "exporter.log", "plain HTTP")
    assert len(lines) == 1, lines  # a scraper retrying every few seconds is one line a minute, not one a try
    assert "https://" in lines[0] and "--tls-cert-file" in lines[0], lines


def test_a_certificate_of_another_ca_is_a_warning_naming_the_client_ca_file(tmp_path: Path, pki: Pki,
                                                                            exporter: str) -> None:
    to_exporter(f"{exporter}/metrics", pki, *client_certificate(tmp_path, trustme.CA(), "stranger"))
    lines = refusals_said(tmp_path / "exporter.log", "certificate verify failed")
    assert "--tls-client-ca-file" in lines[0], lines


def test_no_client_certificate_for_metrics_is_a_warning_naming_the_client_options(tmp_path: Path, pki: Pki,
                                                                                 exporter: str) -> None:
    assert to_exporter(f"{exporter}/metrics", pki).stdout.endswith("\n401")
    lines = refusals_said(tmp_path / "exporter.log", "no client certificate")
    assert "--tls-client-ca-file" in lines[0] and "cert_file" in lines[0], lines


def test_the_kubelets_probe_without_a_certificate_is_no_warning(tmp_path: Path, pki: Pki, exporter: str) -> None:
    """/healthz answers a client with no certificate: nothing was refused."""
    for _ in range(3):
        assert to_exporter(f"{exporter}/healthz", pki).stdout.endswith("\n200")
    assert [line for line in warnings_in(tmp_path / "exporter.log") if "127.0.0.1" in line] == []


def test_a_protocol_the_exporter_does_not_speak_is_a_warning(tmp_path: Path, pki: Pki, exporter: str) -> None:
    """TLS 1.1 (an old client): refused, and said as such, with what the exporter accepts."""
    port = exporter.rpartition(":")[2]
    subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", "-tls1_1", "-cipher", "DEFAULT@SECLEVEL=0"],
                   input="", capture_output=True, text=True, timeout=20, check=False)
    lines = refusals_said(tmp_path / "exporter.log", "TLS 1.2")
    assert lines, lines
