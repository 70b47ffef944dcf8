"""Whether `--modelmesh-url` reaches this pod's own ModelMesh: its host must be an address of this pod.

The exporter is a sidecar and follows one ModelMesh container's counters. ModelMesh exports nothing that names its
container (kserve/modelmesh `Metrics.java` registers no `process_start_time_seconds`), so a URL that reaches
several (the `modelmesh-serving` Service's `prometheus` port, 2112 over every runtime pod: an easy mistake) reads
a different pod at each read, and a read of a pod with lower counts looks like a ModelMesh restart that adds that
pod's whole lifetime count as load: thousands of requests a read from idle pods, said only as an INFO line.

So the URL's host must resolve to addresses of this pod only: loopback, or one bound to one of its interfaces (the
pod's IP from the downward API; a proxy of the user's in another container of the pod). That is told without
asking anything but the kernel: a socket bound to (address, 0) fails with EADDRNOTAVAIL where the address is not
one of this network namespace's (EAFNOSUPPORT where its family is not there at all). A Service's ClusterIP is
never bound in a pod's namespace (kube-proxy rewrites connections to it on the node). A pod on the node's network
(hostNetwork) shares the node's addresses, and under kube-proxy's IPVS mode the node binds every ClusterIP: there a
Service's address passes.
"""

from __future__ import annotations

import errno
import ipaddress
import socket
import urllib.parse
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final

from exporter.settings import ExporterSettings, setting

Resolved = Sequence[tuple[socket.AddressFamily, tuple[Any, ...]]]
"""What a host resolves to: each address's family and socket address (`socket.getaddrinfo`'s)."""
Resolve = Callable[[str], Resolved]
"""Resolves a host; raises `socket.gaierror` (or `UnicodeError` for a name no resolver takes) where it does not."""

_NOT_OURS: Final = frozenset({errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT})
DEFAULT_URL: Final = ExporterSettings().modelmesh_url


def system_resolve(host: str) -> Resolved:
    """The host's addresses as the system resolves them (the pod's DNS)."""
    return [(info[0], info[4]) for info in socket.getaddrinfo(host, None, type=socket.SOCK_STREAM)]


def is_own_address(family: socket.AddressFamily, sockaddr: tuple[Any, ...]) -> bool:
    """Whether the address is this pod's: loopback, or bound to one of its interfaces. An error of the trial bind
    other than the address not being here (`_NOT_OURS`) tells nothing, and is taken as ours: the rule is there to
    refuse a URL that reaches other pods, not a pod whose kernel will not say."""
    address = ipaddress.ip_address(str(sockaddr[0]).partition("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)
    if address.is_loopback or (mapped is not None and mapped.is_loopback):
        return True  # a pod without IPv6 still reaches its ModelMesh at 127.0.0.1 through ::ffff:127.0.0.1
    try:
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            probe.bind((sockaddr[0], 0, *sockaddr[2:]))
    except OSError as error:
        return error.errno not in _NOT_OURS
    return True


@dataclass(frozen=True, slots=True)
class UrlHost:
    """What `--modelmesh-url`'s host is: `problem` says why the URL is refused; `unresolved` why it could not be
    told yet (the name does not resolve: the pod's DNS may not be up yet); neither: it is this pod's."""

    host: str
    problem: str | None = None
    unresolved: str | None = None


def check_url(url: str, resolve: Resolve = system_resolve) -> UrlHost:
    """Whether `url`'s host is this pod's (`UrlHost`)."""
    host = urllib.parse.unquote(urllib.parse.urlsplit(url).hostname or "")  # an IPv6 zone: [fe80::1%25eth0]
    try:
        resolved = resolve(host)
    except (OSError, UnicodeError) as error:
        return UrlHost(host, unresolved=f"{host} does not resolve ({error})")
    addresses = list(dict.fromkeys(str(sockaddr[0]) for _, sockaddr in resolved))
    foreign = list(dict.fromkeys(str(sockaddr[0]) for family, sockaddr in resolved
                                 if not is_own_address(family, sockaddr)))
    if not addresses:
        return UrlHost(host, unresolved=f"{host} resolves to no address")
    if not foreign:
        return UrlHost(host)
    return UrlHost(host, problem=not_this_pod(host, addresses, foreign))


def not_this_pod(host: str, addresses: Sequence[str], foreign: Sequence[str]) -> str:
    """Why a URL whose host resolves to `foreign` addresses (not this pod's) is refused, and what to give instead."""
    named = f"host {host}" if list(addresses) == [host] else f"host {host} ({', '.join(addresses)})"
    are = "is not an address" if len(foreign) == 1 else "are not addresses"
    return (f"{setting('--modelmesh-url')} names {named}, and {', '.join(foreign)} {are} of this pod: the "
            "exporter is a sidecar and must read its own pod's ModelMesh. A Service (modelmesh-serving's "
            "prometheus port 2112) spreads the reads over every runtime pod, and each read of another pod looks "
            "like a ModelMesh restart that counts that pod's whole history as load. Use the default "
            f"{DEFAULT_URL} (the mm container shares the pod's network), or another address of this pod (loopback, "
            "or one of its own interfaces)")
