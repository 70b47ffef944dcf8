"""The exporter process at start with a `--modelmesh-url` whose host is not this pod's: one line and status 2.

A host of another machine (the `modelmesh-serving` Service's ClusterIP, another pod's IP) read a different ModelMesh
at each read through the Service, each taken for a restart of this pod's that counted its whole history as load. A
name is refused too, whatever it resolves to at start (the headless `modelmesh-serving` Service's resolves to this
pod alone until the HPA adds pods). Loopback, `localhost` and an address of the machine's own interfaces start as
before."""

from __future__ import annotations

import os
import socket
import subprocess

import pytest

from exporter.own_pod_url import is_own_address, system_resolve
from tests.exporter.test_exporter_process import exporter_command
from tests.exporter.test_exporter_startup import start_on_busy_port

NOT_HERE_V4 = "203.0.113.7"
"""TEST-NET-3: no machine's interface has it."""
NOT_HERE_V6 = "2001:db8::7"
"""The IPv6 documentation prefix: no machine's interface has it."""
HEADLESS_SERVICE = "modelmesh-serving.modelmesh-serving.svc.cluster.local"
"""modelmesh-serving's default Service (`headlessService: true`): its name resolves to the Ready runtime pods."""


def own_interface_address() -> str:
    """An IPv4 address of one of this machine's interfaces, not loopback: the source of a route out (a UDP
    socket's connect sends nothing)."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect((NOT_HERE_V4, 9))
        except OSError as error:
            pytest.skip(f"this machine has no route out, so no address but loopback to try: {error}")
        address = str(probe.getsockname()[0])
    assert not address.startswith("127."), address
    return address


def lines(result: subprocess.CompletedProcess[str]) -> list[str]:
    return [line for line in result.stderr.splitlines() if line.strip()]


@pytest.mark.parametrize("host", [NOT_HERE_V4, f"[{NOT_HERE_V6}]"], ids=["ipv4", "ipv6"])
def test_a_host_of_another_machine_stops_the_start_with_one_line_that_says_why_and_what_to_give(host: str) -> None:
    result = start_on_busy_port("--modelmesh-url", f"https://{host}:2112/metrics")
    assert result.returncode == 2, result.stderr
    [line] = lines(result)  # nothing served, nothing collected, before the port is tried
    assert "ERROR exporter: cannot start: --modelmesh-url (EXPORTER_MODELMESH_URL) names host" in line, line
    assert host.strip("[]") in line and "not an address of this pod" in line, line
    assert "Service" in line and "whole history" in line and "https://127.0.0.1:2112/metrics" in line, line
    assert "Traceback" not in result.stderr


def test_help_says_the_host_must_be_this_pods() -> None:
    done = subprocess.run([*exporter_command(), "--help"], capture_output=True, text=True, timeout=30, check=False)
    text = " ".join(done.stdout.split())  # argparse wraps lines
    assert "Its host must be an address of this pod (loopback, or one of its interfaces)" in text, text
    assert "Service (modelmesh-serving's port 2112)" in text, text


def test_the_variable_is_checked_as_the_flag() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    done = subprocess.run([*exporter_command(), "--no-gpu", "--listen", "127.0.0.1:0"], capture_output=True,
                          text=True, timeout=30,
                          env=env | {"EXPORTER_MODELMESH_URL": f"http://{NOT_HERE_V4}:2112/metrics"})
    assert done.returncode == 2, done.stderr
    [line] = lines(done)
    assert f"cannot start: --modelmesh-url (EXPORTER_MODELMESH_URL) names host {NOT_HERE_V4}," in line, line


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "[::1]", "own"], ids=lambda host: host.strip("[]"))
def test_an_address_of_this_pod_starts_as_before(host: str) -> None:
    """Up to the port, which `start_on_busy_port` holds: the one line is the busy port's."""
    if host == "own":
        host = own_interface_address()
    result = start_on_busy_port("--modelmesh-url", f"http://{host}:2112/metrics")
    assert result.returncode == 2
    [line] = lines(result)
    assert "cannot start: cannot listen on" in line, line


@pytest.mark.parametrize("name", [HEADLESS_SERVICE, "machine"], ids=["not-resolving-yet", "resolving-to-this-pod"])
def test_a_name_stops_the_start_whatever_it_resolves_to_now(name: str) -> None:
    """modelmesh-serving's default `modelmesh-serving` Service is headless: its name resolves to the Ready runtime
    pods' IPs, so with only this pod Ready it resolves to this pod's address, and with none (the pod not Ready yet
    at its exporter's start) not at all. Either passed, and the name was never checked again: once the HPA added
    pods the reads spread over them, `requests_total` going from 40 to 99870 in 16 reads. Here the machine's own
    name (resolving to its loopback or its own address) stands for the first, the Service's for the second."""
    if name == "machine":
        name = socket.gethostname()
        if not all(is_own_address(family, sockaddr) for family, sockaddr in system_resolve(name)):
            pytest.skip(f"this machine's name {name} does not resolve to its own addresses")
    result = start_on_busy_port("--modelmesh-url", f"https://{name}:2112/metrics")
    assert result.returncode == 2, result.stderr
    [line] = lines(result)
    assert f"ERROR exporter: cannot start: --modelmesh-url (EXPORTER_MODELMESH_URL) names host {name}," in line, line
    for said in ("may resolve to other pods", "127.0.0.1", "localhost", "$(POD_IP)"):
        assert said in line, (said, line)
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize(("address", "own"), [
    ("127.0.0.1", True), ("127.0.0.53", True), ("::1", True), ("::ffff:127.0.0.1", True),
    (NOT_HERE_V4, False), (NOT_HERE_V6, False), ("own", True),
])
def test_an_address_is_this_pods_where_the_kernel_binds_it(address: str, own: bool) -> None:
    if address == "own":
        address = own_interface_address()
    [(family, sockaddr)] = system_resolve(address)
    assert is_own_address(family, sockaddr) is own


def test_a_pod_ip_variable_kubernetes_left_unexpanded_is_named_as_such() -> None:
    """`$(POD_IP)` is expanded only where POD_IP is defined earlier in the container's env list; left as written,
    it was refused as "names host $(pod_ip), a name" with the advice to give `$(POD_IP)`: what was given."""
    result = start_on_busy_port("--modelmesh-url", "https://$(POD_IP):2112/metrics")
    assert result.returncode == 2, result.stderr
    [line] = lines(result)
    assert "$(POD_IP)" in line and "not expanded" in line and "before" in line, line


def test_an_ipv6_zone_this_pod_lacks_stops_the_start_with_one_line() -> None:
    """A link-local address with a zone (interface) that is not here: the resolver's error ended the start with a
    traceback and status 1."""
    result = start_on_busy_port("--modelmesh-url", "https://[fe80::1%25nosuch0]:2112/metrics")
    assert result.returncode == 2, result.stderr
    assert "Traceback" not in result.stderr
    [line] = lines(result)
    assert "names host fe80::1%nosuch0" in line and "not an address of this pod" in line, line

