"""The names a generated serving certificate carries: every name a client may reach the adapter by.

Without `--tls-cert-file` the adapter serves a self-signed certificate. The aggregator reaches it through its
Service (`manifests/base/service.yaml`, `api-service.yaml`), as `NAME.NAMESPACE.svc`; a certificate that named
only 127.0.0.1, localhost and the pod's host name could not be pinned with an APIService `caBundle`, so the only
choice was `insecureSkipTLSVerify: true`. The Service's DNS names make pinning possible (a user copies the
served certificate into `caBundle`); the default install still skips verification, as metrics-server's does.
"""

from __future__ import annotations

import socket
from typing import Final

from autoscaler.kube.where import own_namespace
from autoscaler.settings import ServeSettings

SHIPPED_SERVICE_NAME: Final = "modelmesh-autoscaler"
"""The Service's name and, outside a cluster, its namespace, as `manifests/base` ships them."""


def service_dns_names(service: str) -> list[str]:
    """The DNS names a client in the cluster reaches Service `NAME.NAMESPACE` by."""
    return [service, f"{service}.svc", f"{service}.svc.cluster.local"]


def self_signed_hosts(settings: ServeSettings) -> list[str]:
    """What a generated certificate names: the bound host (where one is given), localhost, this host's name,
    and the Service's DNS names (`--tls-service`, else the shipped Service in the adapter's own namespace)."""
    service = settings.tls_service or f"{SHIPPED_SERVICE_NAME}.{own_namespace() or SHIPPED_SERVICE_NAME}"
    hosts = [settings.bound_host, "localhost", socket.gethostname(), *service_dns_names(service)]
    return list(dict.fromkeys(host for host in hosts if host))
