"""Whether this process runs in a Kubernetes pod: asked before anything imports the Kubernetes library, which
takes a third of a second or more, so a process that has no cluster to talk to never pays for it."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

_SERVICE_HOST_ENV: Final = "KUBERNETES_SERVICE_HOST"
SERVICE_ACCOUNT_NAMESPACE: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
"""Where the kubelet writes the pod's namespace, beside its service account's token."""


def in_cluster() -> bool:
    """True inside a pod: the kubelet sets the API server's address in every container's environment."""
    return bool(os.environ.get(_SERVICE_HOST_ENV))


def own_namespace() -> str | None:
    """The namespace this process runs in, in a cluster (its service account's); None outside one or where the
    file cannot be read. Without the library: what the serving certificate names is decided before any client is
    made, and a targets file outside a cluster never loads it."""
    if not in_cluster():
        return None
    try:
        return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or None
    except OSError:
        return None


def default_kubeconfig() -> str:
    """`$KUBECONFIG` (a path, or several joined by `:`), else `~/.kube/config`, read now. An empty `KUBECONFIG` is
    unset, as for kubectl: the library, which reads the variable once at import, took "" for the file."""
    return os.environ.get("KUBECONFIG") or str(Path.home() / ".kube" / "config")


def kubeconfig_found(paths: str) -> bool:
    """Whether any file of a kubeconfig path list (`$KUBECONFIG`'s `:`-joined form) is there, decided as the
    library decides it (each part, `~` expanded, `os.path.exists`): where none is, start-up is refused without
    importing the library, a third of a second of CPU, for the same answer."""
    return any(os.path.exists(os.path.expanduser(path)) for path in paths.split(os.pathsep) if path)
