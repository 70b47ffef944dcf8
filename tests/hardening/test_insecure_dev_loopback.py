"""`--insecure-dev` serves without authentication, so it must never listen beyond this machine: asked for a
non-loopback `--listen`, it binds 127.0.0.1 and says so in the log, in both serving modes. Where it listens is
read from the kernel's socket table, as `ss -ltn` would show it."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hardening.adapter import write_targets
from tests.support.processes import free_port, running


def listening_addresses(port: int) -> set[str]:
    """The local addresses of every socket listening on `port` (IPv4 and IPv6), from /proc/net/tcp*."""
    addresses: set[str] = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            local, state = fields[1], fields[3]
            address, port_hex = local.split(":")
            if state == "0A" and int(port_hex, 16) == port:  # 0A: LISTEN
                if width == 8:
                    addresses.add(".".join(str(int(address[i:i + 2], 16)) for i in (6, 4, 2, 0)))
                else:
                    addresses.add("::" if int(address, 16) == 0 else f"ipv6:{address}")
    return addresses


@pytest.mark.parametrize(("mode", "host", "said"), [
    pytest.param([], "0.0.0.0", "0.0.0.0", id="workers-default"),
    pytest.param(["--workers", "0"], "0.0.0.0", "0.0.0.0", id="workers-0"),
    pytest.param([], "", "'' (every address)", id="no-host"),  # `--listen :PORT` said "ignoring host ,"
])
def test_insecure_dev_binds_loopback_when_asked_for_every_interface(tmp_path: Path, mode: list[str], host: str,
                                                                    said: str) -> None:
    port = free_port()
    targets = write_targets(tmp_path / "targets.yaml", ["http://127.0.0.1:1/metrics"])
    log = tmp_path / "adapter.log"
    with running(["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"{host}:{port}",
                  "--targets", str(targets), "--deletion-cost", "off", *mode],
                 f"https://127.0.0.1:{port}/healthz", log):
        assert listening_addresses(port) == {"127.0.0.1"}
    text = log.read_text()
    assert f"--insecure-dev binds loopback only: ignoring host {said}, listening on 127.0.0.1" in text, text
    assert f"on https://127.0.0.1:{port}" in text, text


def test_insecure_dev_listens_on_the_ipv6_loopback_it_is_given(tmp_path: Path) -> None:
    """`::1` is loopback too: it was bound as 127.0.0.1, without a word, so a client of `[::1]` was refused."""
    port = free_port()
    targets = write_targets(tmp_path / "targets.yaml", ["http://127.0.0.1:1/metrics"])
    log = tmp_path / "adapter.log"
    with running(["autoscaler.cli", "serve", "--insecure-dev", "--listen", f"[::1]:{port}",
                  "--targets", str(targets), "--deletion-cost", "off"],
                 f"https://[::1]:{port}/healthz", log):
        assert listening_addresses(port) == {"ipv6:00000000000000000000000001000000"}  # ::1, as /proc shows it
    text = log.read_text()
    assert "ignoring host" not in text, text
    assert f"on https://[::1]:{port}" in text, text
