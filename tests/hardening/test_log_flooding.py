"""Malformed requests cannot flood the adapter's log: a client error is logged once per interval, at
WARNING, in one truncated line with no traceback; and a selector with a trailing newline reads as without it."""

from __future__ import annotations

import ssl
from collections.abc import Iterator

import pytest

from tests.hardening.adapter import DEPLOYMENT, Adapter, adapter_running
from tests.support.processes import http_get, poll

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def adapter(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Adapter]:
    with adapter_running(tmp_path_factory.mktemp("log-flood"), ["http://127.0.0.1:1/metrics"]) as adapter:
        yield adapter


def send_junk_after_good_request(adapter: Adapter, junk: bytes) -> bytes:
    """A valid request, then junk on the same keep-alive connection: the HTTP layer answers 400."""
    with adapter.tls_socket() as sock:
        sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        first = sock.recv(4096)
        assert first.startswith(b"HTTP/1.1 200")
        answer = b""
        try:
            sock.sendall(junk)
            while chunk := sock.recv(65536):
                answer += chunk
        except (ssl.SSLError, ConnectionError):
            pass  # the server answers 400 and closes, maybe before all was sent, maybe without close_notify
        return answer


def test_sixty_kilobyte_junk_requests_log_one_short_warning(adapter: Adapter) -> None:
    before = len(adapter.log_text())
    answers = [send_junk_after_good_request(adapter, b"Z" * 60_000) for _ in range(20)]
    assert any(answer.startswith(b"HTTP/1.1 400") for answer in answers)
    poll(lambda: "from 127.0.0.1" in adapter.log_text()[before:], timeout=30)  # each line is written before its 400
    added = adapter.log_text()[before:]
    assert "Traceback" not in added
    assert " ERROR " not in added
    lines = [line for line in added.splitlines() if "from 127.0.0.1" in line]
    assert len(lines) == 1, added[:2000]
    assert " WARNING " in lines[0]
    assert len(lines[0]) < 400
    assert len(added) < 2000
    assert http_get(f"{adapter.url}/healthz")[0] == 200


def test_selector_with_trailing_newline_reads_as_without_it_and_a_vertical_tab_is_a_bad_request(
        adapter: Adapter) -> None:
    """A line break is whitespace to kube-apiserver's selector lexer (it was refused here); a vertical tab is
    not: it is refused, and the message shows it escaped."""
    base = f"{adapter.url}/apis/external.metrics.k8s.io/v1beta1/namespaces/default/modelmesh_desired_replicas"
    code, _ = http_get(f"{base}?labelSelector=deployment%3D{DEPLOYMENT}")
    assert code == 503  # the runtime is known; its only exporter is down
    code, _ = http_get(f"{base}?labelSelector=deployment%3D{DEPLOYMENT}%0A")
    assert code == 503
    code, body = http_get(f"{base}?labelSelector=deployment%3D{DEPLOYMENT}%0B")
    assert code == 400, body
    assert '"reason": "BadRequest"' in body or '"reason":"BadRequest"' in body
    assert "\\\\x0b" in body, body  # the message's `\\x0b`, in JSON
