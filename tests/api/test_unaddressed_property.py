"""A 503's message tells a backend's words without the addresses in them (`autoscaler.api.unaddressed`): whatever
form an address takes in them, none is left, and words that hold none are told as they are."""

from __future__ import annotations

import ipaddress

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.api.unaddressed import without_addresses

PROPERTIES = settings(max_examples=300, deadline=None)
words = st.lists(st.sampled_from(["connect", "failed", "Prometheus", "certificate", "port 9187", "[Errno 111]",
                                  "HTTP 404", "the", "pod", "is"]), max_size=4).map(" ".join)
after = st.sampled_from(["", "; hint", ": more", ", and", ". ", " (hint)", ") end"])


def forms(address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int) -> list[str]:
    """How backends write an address: bare, quoted, with a port, in a URL, as Python's socket address."""
    host = str(address) if address.version == 4 else f"[{address}]"
    return [str(address), f"'{address}'", f"{host}:{port}", f"http://{host}:{port}/metrics",
            f"https://{host}/api/v1/query?query=up", f"('{address}', {port})", f"'http://{host}:{port}/x'"]


@PROPERTIES
@given(address=st.ip_addresses(), port=st.integers(1, 65535), before=words, rest=words, end=after,
       form=st.integers(0, 6), lead=st.sampled_from(["", " at", " from", " to"]))
def test_no_address_is_left_in_any_form(address: ipaddress.IPv4Address | ipaddress.IPv6Address, port: int,
                                        before: str, rest: str, end: str, form: int, lead: str) -> None:
    said = without_addresses(f"{before}{lead} {forms(address, port)[form]}{end} {rest}")
    assert str(address) not in said and address.exploded not in said and "://" not in said, said


@pytest.mark.parametrize(("words", "told"), [
    ("http://10.2.0.8:9187/metrics: [Errno 111] Connect call failed ('10.2.0.8', 9187); is port 9187 the "
     "exporter's?", "[Errno 111] Connect call failed; is port 9187 the exporter's?"),
    ("Prometheus at https://prometheus-k8s.monitoring.svc:9090 has no series", "Prometheus has no series"),
    ("HTTP 404 from http://10.0.0.1:9187/metrics; no /metrics at that address",
     "HTTP 404; no /metrics at that address"),
    ("certificate is not valid for 'fd00::7'.", "certificate is not valid for its address."),
    ("http://[fd00::7]:9187/metrics sent more than 4194304 bytes", "sent more than 4194304 bytes"),
    ("http://10.0.0.5:9187/metrics is also the address of triton-3", "is also the address of triton-3"),
])
def test_the_words_around_an_address_read_on(words: str, told: str) -> None:
    assert without_addresses(words) == told


@pytest.mark.parametrize("words", [
    "since 04:40:32, 3 of 4 ready pods fresh", "exporter 1.2.3 answered HTTP 503", "ratio 0.5; port 9187",
    "cafe:beef is a label", "{…} cut: the adapter's log has the whole text", "pod triton-0.ns (a name)",
    "no answer in 2.5 s: a NetworkPolicy?", "modelmesh_pod_requests_per_second{pod=\"a\"} 1.5e3",
])
def test_words_without_an_address_are_told_as_they_are(words: str) -> None:
    assert without_addresses(words) == words
