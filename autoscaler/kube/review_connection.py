"""What the TokenReview and SubjectAccessReview client needs to reach the Kubernetes API, as plain data.

`serve --workers N` loads the connection settings once, in the refresh process, with the Kubernetes library
(`autoscaler.kube.config`: kubeconfig or in-cluster, exactly as every other client of the adapter), and hands
each serving worker the facts its reviews need: the API server's address, the CA to trust, the client
certificate, the bearer token or the file to read it from. A worker then never imports the library, which
holds about 20 MiB of memory in every process that loads it (`bench/bench_memory.py`: four workers, 80 MiB
of a 1Gi limit).

The token file (the service account's in a pod, a kubeconfig user's `tokenFile`) is read again whenever it
changes (`autoscaler.kube.token_file`), so the kubelet's hourly rotation of a bound token needs no restart.
A token that an exec plugin hands out (`aws eks get-token`, `kubelogin`) can only be had through the library:
then `from_plugin` is set, and the review client loads the kubeconfig itself (`autoscaler.kube.reviews`).

No Kubernetes library here (a test runs a worker and checks that it never loads it).
"""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autoscaler.kube.config import KubeSettings


@dataclass(frozen=True, slots=True)
class ReviewConnection:
    """The API server and the adapter's credentials; picklable, for a spawned worker's start-up arguments."""

    host: str
    """`https://HOST:PORT` (or `http://` for a local test server), without a trailing slash."""
    ca_file: str | None = None
    ca_data: str | None = None
    verify_tls: bool = True
    tls_server_name: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    authorization: str | None = None
    """The `Authorization` header of a token given once (`Bearer ...`)."""
    token_file: Path | None = None
    """A token read again whenever the file changes; it wins over `authorization`."""
    from_plugin: bool = False
    """The token comes from the kubeconfig user's exec plugin: only the library can run it."""
    kubeconfig: Path | None = None
    """Where the settings were loaded from (`--kubeconfig`; None: in a cluster, or the default kubeconfig), for
    loading them again where `from_plugin`."""

    @classmethod
    def of(cls, settings: KubeSettings, kubeconfig: Path | None = None) -> ReviewConnection:
        """The facts of the library's loaded `settings` (from `kubeconfig`): what its own clients would use."""
        configuration = settings.configuration
        ca_data = getattr(configuration, "ca_cert_data", None)
        bearer = configuration.api_key.get("BearerToken")
        return cls(
            host=str(configuration.host).rstrip("/"),
            ca_file=configuration.ssl_ca_cert,
            ca_data=ca_data.decode() if isinstance(ca_data, bytes) else ca_data,
            verify_tls=bool(configuration.verify_ssl),
            tls_server_name=getattr(configuration, "tls_server_name", None),
            cert_file=configuration.cert_file,
            key_file=configuration.key_file,
            authorization=str(bearer) if bearer else None,
            token_file=settings.token_refresh.file,
            from_plugin=settings.token_refresh.plugin,
            kubeconfig=kubeconfig,
        )

    def tls_context(self) -> ssl.SSLContext | None:
        """The trust and client certificate the library's clients use; None for plain http."""
        if not self.host.startswith("https"):
            return None
        context = ssl.create_default_context(cafile=self.ca_file, cadata=self.ca_data)
        if self.cert_file:
            context.load_cert_chain(self.cert_file, keyfile=self.key_file)
        if not self.verify_tls:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context
