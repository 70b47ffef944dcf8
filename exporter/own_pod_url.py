"""Whether `--modelmesh-url` reaches this pod's own ModelMesh: its host must be an address of this pod.

The exporter is a sidecar and follows one ModelMesh container's counters. ModelMesh exports nothing that names its
container (kserve/modelmesh `Metrics.java` registers no `process_start_time_seconds`), so a URL that reaches
several (the `modelmesh-serving` Service's `prometheus` port, 2112 over every runtime pod: an easy mistake) reads
a different pod at each read, and a read of a pod with lower counts looks like a ModelMesh restart that adds that
pod's whole lifetime count as load: thousands of requests a read from idle pods, said only as an INFO line.

So the URL's host must be an address of this pod, given as an IP literal (loopback, or one bound to one of its
interfaces: the pod's IP from the downward API; a proxy of the user's in another container of the pod), or exactly
`localhost`. A name is refused, whatever it resolves to at start: modelmesh-serving's default `modelmesh-serving`
Service is headless, its name resolving to the Ready runtime pods' IPs, so with only this pod Ready it resolves to
this pod, and with none (this pod not Ready yet when its exporter starts) to nothing; both passed a check of what
it resolved to, and once the HPA added pods the reads spread over them. A check at start of what never changes
after it is deterministic; one at each read would ask the DNS every read and still race the pods turning Ready.

Whether an address is this pod's is told without asking anything but the kernel: a socket bound to (address, 0)
fails with EADDRNOTAVAIL where the address is not one of this network namespace's (EAFNOSUPPORT where its family is
not there at all). A Service's ClusterIP is never bound in a pod's namespace (kube-proxy rewrites connections to it
on the node). A pod on the node's network (hostNetwork) shares the node's addresses, and under kube-proxy's IPVS
mode the node binds every ClusterIP: there a Service's address passes.
"""

from __future__ import annotations

import errno
import ipaddress
import re
import socket
import urllib.parse
from collections.abc import Sequence
from typing import Any, Final

from exporter.settings import ExporterSettings, setting

_NOT_OURS: Final = frozenset({errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT})
DEFAULT_URL: Final = ExporterSettings().modelmesh_url
_VARIABLE: Final = re.compile(r"\$\([A-Za-z_][A-Za-z0-9_]*\)")
"""A `$(VAR)` of the container's env, as Kubernetes leaves it where VAR is not defined before it."""
LOCALHOST: Final = "localhost"
"""The one name taken: every resolver gives it loopback (RFC 6761), never another pod."""


def system_resolve(host: str) -> Sequence[tuple[socket.AddressFamily, tuple[Any, ...]]]:
    """The host's addresses as the system resolves them: each address's family and socket address."""
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


def check_url(url: str) -> str | None:
    """Why `url` is refused (its host is a name, or an address not this pod's), or None: it is this pod's."""
    parts = urllib.parse.urlsplit(url)
    host = urllib.parse.unquote(parts.hostname or "")  # an IPv6 zone: [fe80::1%25eth0]
    if host == LOCALHOST:
        return None
    if (variable := _VARIABLE.search(parts.netloc)) is not None:  # hostname is lowercased: say it as written
        return unexpanded(variable.group())
    try:
        address = ipaddress.ip_address(host.partition("%")[0])
    except ValueError:
        return a_name(host)
    try:
        [(family, sockaddr)] = system_resolve(host)  # an IP literal: itself, without asking the DNS
    except OSError:  # a zone (interface) not here: `[fe80::1%25nosuch0]`
        return not_this_pod(host)
    return None if is_own_address(family, sockaddr) else not_this_pod(host if "%" in host else str(address))


def a_name(host: str) -> str:
    """Why a URL whose host is a name (other than `localhost`) is refused, and what to give instead."""
    return (f"{setting('--modelmesh-url')} names host {host}, a name: a name, such as the modelmesh-serving "
            "Service's (headless by default: the Ready runtime pods' IPs), may resolve to other pods, now or once "
            "the HPA adds some, and each read of another pod looks like a ModelMesh restart that counts that pod's "
            f"whole history as load. Give 127.0.0.1 (the default {DEFAULT_URL}: the mm container shares the "
            "pod's network), localhost, or the pod's IP (from the downward API: status.podIP in an env POD_IP, "
            "then https://$(POD_IP):2112/metrics)")


def unexpanded(variable: str) -> str:
    """Why a URL with a `$(VAR)` Kubernetes left as written is refused: the variable was not defined before it."""
    return (f"{setting('--modelmesh-url')} names host {variable}, a variable not expanded: Kubernetes expands "
            "$(VAR) only where VAR is defined before it in the container's env list: put POD_IP (valueFrom "
            f"fieldRef status.podIP) before EXPORTER_MODELMESH_URL, or give the default {DEFAULT_URL}")


def not_this_pod(host: str) -> str:
    """Why a URL whose host is an address not this pod's is refused, and what to give instead."""
    return (f"{setting('--modelmesh-url')} names host {host}, and {host} is not an address of this pod: the "
            "exporter is a sidecar and must read its own pod's ModelMesh. A Service (modelmesh-serving's "
            "prometheus port 2112) spreads the reads over every runtime pod, and each read of another pod looks "
            f"like a ModelMesh restart that counts that pod's whole history as load. Use the default {DEFAULT_URL} "
            "(the mm container shares the pod's network), localhost, or another address of this pod (loopback, "
            "or one of its own interfaces: the pod's IP, $(POD_IP) from the downward API)")
