"""Whether this process runs in a Kubernetes pod: asked before anything imports the Kubernetes library, which
takes a third of a second or more, so a process that has no cluster to talk to never pays for it."""

from __future__ import annotations

import os
from typing import Final

_SERVICE_HOST_ENV: Final = "KUBERNETES_SERVICE_HOST"


def in_cluster() -> bool:
    """True inside a pod: the kubelet sets the API server's address in every container's environment."""
    return bool(os.environ.get(_SERVICE_HOST_ENV))
