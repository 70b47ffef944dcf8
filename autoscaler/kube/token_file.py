"""A bearer token read from a file, again whenever the file changes: the service account's in a pod (the kubelet
rewrites the projected token well before its hour is up) or a kubeconfig user's `tokenFile`.

No Kubernetes library here: a serving worker of `serve --workers N` reads the adapter's token for its
TokenReviews and SubjectAccessReviews with this alone (`autoscaler.kube.review_connection`), and the library
costs each process about 20 MiB of memory. The kubeconfig clients of the refresh process use it through the
library's refresh hook (`autoscaler.kube.credentials`).

The file is read again when its modification time or size changed (a `stat` per request; the kubelet swaps the
file with a rename, so a change is always a new inode). When it cannot be read, or is empty, requests go on with
the last token (it may still be valid) and the reason is logged once per change, as a WARNING.
"""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger("autoscaler.kube")

_FileState = tuple[int, int] | None
"""(st_mtime_ns, st_size) of a token file; None when it cannot be read."""


class RefreshWarnings:
    """One WARNING per new reason a credential cannot be refreshed, one INFO when it can again."""

    def __init__(self, what: str) -> None:
        self._what = what
        self._failing: str | None = None

    def failed(self, reason: str) -> None:
        if reason != self._failing:
            log.warning("Kubernetes credentials: cannot refresh the %s, using the last token: %s", self._what, reason)
        self._failing = reason

    def recovered(self) -> None:
        if self._failing is not None:
            log.info("Kubernetes credentials: the %s is read again", self._what)
        self._failing = None


class TokenFile:
    """The token in `path`, read at the first `token()` and again whenever the file changed."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._state: _FileState = None
        self._token: str | None = None
        self._warnings = RefreshWarnings(f"token from {path}")

    def _stat(self) -> _FileState:
        try:
            stat = self.path.stat()
        except OSError:
            return None
        return stat.st_mtime_ns, stat.st_size

    def token(self) -> str | None:
        """The file's token as last read well (None until one was)."""
        state = self._stat()
        if state is None:
            self._warnings.failed(f"{self.path} cannot be read")
            return self._token
        if state == self._state:
            return self._token
        try:
            token = self.path.read_text().strip()
        except (OSError, UnicodeDecodeError) as error:
            self._warnings.failed(f"{type(error).__name__}: {error}")
            return self._token
        if not token:
            self._warnings.failed(f"{self.path} is empty")
            return self._token
        self._state, self._token = state, token
        self._warnings.recovered()
        return token
