"""Where the adapter's Kubernetes connection settings come from, decided once for every client it builds.

Order, as kubectl and client-go's in-cluster convention have it: `--kubeconfig` when given; else the pod's
service account when running in a cluster; else the default kubeconfig (`$KUBECONFIG`, `~/.kube/config`).
Authentication, pod discovery and the deletion-cost writer all load their settings here, so they cannot
disagree about which cluster they talk to. A failure is a `KubeConfigError` (a `ValueError`: the CLI reports
it in one line at start-up); the library's exception is chained. A kubeconfig token read from a file or an
exec plugin, and an exec plugin's client certificate, are kept current (`credentials`); in a cluster the
library reads the service-account token again.
"""

from __future__ import annotations

from dataclasses import dataclass
from os import PathLike, fspath
from pathlib import Path
from typing import Final

from kubernetes.aio import client, config
from kubernetes.aio.config import incluster_config
from kubernetes.aio.config.config_exception import ConfigException

from autoscaler.kube.credentials import TokenRefresh, watch_credentials
from autoscaler.kube.errors import KubeConfigError
from autoscaler.kube.where import SERVICE_ACCOUNT_NAMESPACE, default_kubeconfig, in_cluster

_SERVICE_ACCOUNT_NAMESPACE: Final = SERVICE_ACCOUNT_NAMESPACE


@dataclass(frozen=True, slots=True)
class KubeSettings:
    configuration: client.Configuration
    namespace: str
    """This process's namespace (in a cluster) or its kubeconfig context's: where its own objects go."""
    token_refresh: TokenRefresh
    """Where the bearer token is read again from: the service account's token file in a cluster, a kubeconfig
    user's `tokenFile` or exec plugin; for clients that do without the library (`review_connection`)."""


async def load_kube_settings(
    kubeconfig: str | PathLike[str] | None = None, context: str | None = None
) -> KubeSettings:
    configuration = client.Configuration()
    try:
        if kubeconfig is None and in_cluster():
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            namespace = _read_text(_SERVICE_ACCOUNT_NAMESPACE) or "default"
            refresh = TokenRefresh(file=Path(incluster_config.SERVICE_TOKEN_FILENAME))  # the file it just read
        else:
            path = fspath(kubeconfig) if kubeconfig is not None else default_kubeconfig()
            loader = await config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=path, context=context, client_configuration=configuration, persist_config=False
            )
            refresh = watch_credentials(loader, configuration)  # tokens from a file or a plugin fetched again
            namespace = _context_namespace(path, context)
    except (ConfigException, OSError, ValueError, TypeError, KeyError) as error:
        where = fspath(kubeconfig) if kubeconfig is not None else "the in-cluster settings or the default kubeconfig"
        if isinstance(error, TypeError | KeyError | UnicodeDecodeError):
            # The library's own words for a file that is no kubeconfig at all (empty, a list, binary) are
            # about its internals: "'NoneType' object does not support item assignment".
            error = ValueError("not a kubeconfig (a YAML mapping with clusters, users, contexts and "
                               "current-context)")
        raise KubeConfigError(f"cannot load Kubernetes connection settings from {where}: {error}") from error
    return KubeSettings(configuration, namespace, refresh)


def _read_text(path: Path) -> str | None:
    try:
        return path.read_text().strip() or None
    except OSError:
        return None


def _context_namespace(path: str | None, context: str | None) -> str:
    """The namespace of the kubeconfig's chosen context, as kubectl would use it."""
    contexts, active = config.list_kube_config_contexts(config_file=path)  # type: ignore[no-untyped-call]
    chosen = next((c for c in contexts or [] if c.get("name") == context), active) if context else active
    namespace = ((chosen or {}).get("context") or {}).get("namespace")
    return namespace if isinstance(namespace, str) and namespace else "default"
