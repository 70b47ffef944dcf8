"""The sidecar as shipped answers on the pod's IPv6 address too.

In an IPv6 (single-stack, or dual-stack with IPv6 first) cluster a pod's address is IPv6: the kubelet's liveness
probe and the adapter's scrape go to `[podIP]:9187`. The shipped sidecar listened on `0.0.0.0:9187`, IPv4 only,
so neither reached it: the probe restarted the sidecar every 90 s and the runtime never had a fresh pod. The
adapter already scrapes `http://[podIP]:9187/metrics`; the sidecar must answer there.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import yaml

from tests.manifests.support import EXAMPLES
from tests.support.ports import machine_has_ipv6
from tests.support.processes import free_port, http_get, running, start, stop, wait_until_logged


def shipped_listen() -> str:
    """EXPORTER_LISTEN as the sidecar patch sets it."""
    [patch] = yaml.safe_load((EXAMPLES / "exporter-sidecar-patch.yaml").read_text())
    [value] = [e["value"] for e in patch["value"]["env"] if e["name"] == "EXPORTER_LISTEN"]
    assert isinstance(value, str)
    return value


def test_the_shipped_sidecar_answers_on_ipv6_and_ipv4(tmp_path: Path) -> None:
    """On a machine with IPv6 both families answer; on one without it (a pod or container with IPv6 turned off)
    the same setting still starts the sidecar, on IPv4 alone, instead of failing to bind."""
    ipv6 = machine_has_ipv6()
    port = free_port()
    host = shipped_listen().rpartition(":")[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    env.update(EXPORTER_LISTEN=f"{host}:{port}", EXPORTER_NO_GPU="true",
               EXPORTER_MODELMESH_URL="http://127.0.0.1:1/metrics")
    log = tmp_path / "exporter.log"
    with running(["exporter.cli"], f"http://127.0.0.1:{port}/healthz", log, env=env):
        if ipv6:
            assert http_get(f"http://[::1]:{port}/healthz") == (200, "ok\n"), "the probe to [podIP]:9187"
        assert http_get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
    serving = next(line for line in log.read_text().splitlines() if "serving on" in line)
    expected = f"0.0.0.0:{port} and [::]:{port}" if ipv6 else f"serving on 0.0.0.0:{port}"
    assert expected in serving, serving


def test_an_explicit_ipv4_address_stays_ipv4(tmp_path: Path) -> None:
    """0.0.0.0 still means IPv4's every address, as it does for every server."""
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    env.update(EXPORTER_LISTEN=f"0.0.0.0:{port}", EXPORTER_NO_GPU="true",
               EXPORTER_MODELMESH_URL="http://127.0.0.1:1/metrics")
    log = tmp_path / "exporter.log"
    with running(["exporter.cli"], f"http://127.0.0.1:{port}/healthz", log, env=env):
        pass
    assert f"serving on 0.0.0.0:{port};" in log.read_text()


def test_port_0_is_one_port_for_both_families(tmp_path: Path) -> None:
    """`--listen :0` ("any free port", as `modelmesh-autoscaler serve --listen :0` takes it) listened on two
    different ports, one per family (`serving on 0.0.0.0:39719 and [::]:34515`): a client reached the exporter, or
    another process, depending on whether `localhost` resolved to IPv4 or IPv6. Both families share the port the
    first one got, and the log names it once for both."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    env.update(EXPORTER_LISTEN=":0", EXPORTER_NO_GPU="true", EXPORTER_MODELMESH_URL="http://127.0.0.1:1/metrics")
    log = tmp_path / "exporter.log"
    process = start(["exporter.cli"], log, env)
    try:
        wait_until_logged(process, log, "serving on", timeout=60)
        serving = next(line for line in log.read_text().splitlines() if "serving on" in line)
        ports = {int(port) for port in re.findall(r":(\d+)(?: and|;)", serving)}
        assert len(ports) == 1, serving
        [port] = ports
        assert http_get(f"http://127.0.0.1:{port}/healthz") == (200, "ok\n")
        if machine_has_ipv6():
            assert f"serving on 0.0.0.0:{port} and [::]:{port};" in serving
            assert http_get(f"http://[::1]:{port}/healthz") == (200, "ok\n")
        else:
            assert f"serving on 0.0.0.0:{port};" in serving
    finally:
        stop(process)
