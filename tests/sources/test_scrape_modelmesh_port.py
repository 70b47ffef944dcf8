"""An adapter whose --exporter-port names ModelMesh's own metrics port (2112) instead of the exporter sidecar's, as
the on-call engineer reads it in /debug and the log. A real (fake) ModelMesh process on a real socket, in both of
its modes: https (ModelMesh's default) and plain http.

Was: the runbook said this shows as `failed (http)`, `HTTP 404`, but ModelMesh's port serves /metrics: over https
the adapter said `failed (connect): ... Server disconnected` with the hint for an *exporter* serving HTTPS (while
the runbook sent `connect` to a missing sidecar or a NetworkPolicy), and over http `failed (parse): no modelmesh
exporter metrics in the response`, a reason the runbook did not list, with nothing naming ModelMesh or the port.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.sources.test_scrape_hints import said
from tests.support.processes import free_port, running


@pytest.mark.parametrize("mode", ["https", "http"])
async def test_modelmesh_own_port_scraped_names_modelmesh_and_the_exporter_port(tmp_path: Path, mode: str) -> None:
    port = free_port()
    tls = ["--cert-dir", str(tmp_path / "tls")] if mode == "https" else ["--http"]
    with running(["autoscaler.demo.fake_modelmesh", "--listen", f"127.0.0.1:{port}", "--rps", "10", *tls],
                 f"{mode}://127.0.0.1:{port}/metrics", tmp_path / "modelmesh.log"):
        reason, detail = await said(f"http://127.0.0.1:{port}/metrics")  # the adapter's plain-http default
    if mode == "https":
        assert reason == "connect", detail
        assert "Server disconnected" in detail and "--exporter-scheme" in detail, detail
        assert "ModelMesh" in detail and f"{port}" in detail and "--exporter-port" in detail, detail
    else:
        assert reason == "parse", detail
        assert "ModelMesh's own metrics" in detail and "not the exporter's" in detail, detail
        assert "--exporter-port" in detail and "9187" in detail, detail  # the sidecar's port, unless set
