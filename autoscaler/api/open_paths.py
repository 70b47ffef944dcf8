"""`--authorization-always-allow-paths`, read and matched as k8s.io/apiserver does
(`pkg/authorization/path/path.go`), whose flag of the same name it copies.

Why the same rules: users bring the values they use on kube-apiserver, metrics-server or prometheus-adapter.
Kept verbatim, `healthz` (kube's leading `/` is optional) matched no request and the kubelet's probes got 401;
`/read*yz` (kube refuses a `*` that is not last) silently matched nothing; and `/apis/*` opened every tenant's
metric values to anyone, where kube opens listed paths to non-resource requests only. So:

- an entry's leading `/` is optional (`healthz` is `/healthz`; an empty entry, or `/`, is `/` alone);
- an entry ending in `*` matches every path it is a prefix of; a `*` anywhere else is refused at start
  (`OpenPathError`, naming the flag);
- a listed path opens only non-resource requests: the external metric values, `/keda/...` and
  `/debug/runtimes/...` are resource requests (`autoscaler.api.identity`) and are always authorized.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from autoscaler.api.identity import NonResourceAttributes, request_attributes

FLAG = "--authorization-always-allow-paths"


class OpenPathError(ValueError):
    """An entry k8s.io/apiserver would refuse; the message names the flag and the entry."""


def _normalized(entry: str) -> str:
    """`entry` with its one optional leading `/` put back, so that it compares with a request's path."""
    return "/" + entry.removeprefix("/")


@dataclass(frozen=True, slots=True)
class AlwaysAllowPaths:
    entries: tuple[str, ...]
    """Every entry as matched (leading `/` added), in the order given: what the start-up log shows."""
    exact: frozenset[str]
    prefixes: tuple[str, ...]

    @classmethod
    def parse(cls, paths: Iterable[str]) -> AlwaysAllowPaths:
        """The flag's entries; `OpenPathError` for one with a `*` before its end."""
        given = tuple(paths)
        entries = tuple(_normalized(path) for path in given)
        for path, entry in zip(given, entries, strict=True):
            if "*" in entry[:-1]:
                raise OpenPathError(f'{FLAG}: only a trailing * is allowed (it matches a prefix), not "{path}"')
        return cls(entries, frozenset(e for e in entries if not e.endswith("*")),
                   tuple(e[:-1] for e in entries if e.endswith("*")))

    def __contains__(self, path: object) -> bool:
        """Whether the (decoded) `path` is listed, exactly or under a prefix; whether it is opened: `opens`."""
        return path in self.exact or (bool(self.prefixes) and isinstance(path, str) and path.startswith(self.prefixes))

    def opens(self, method: str, raw_path: str, path: str) -> bool:
        """Whether a request is served without authentication: its decoded `path` is listed and it is not a
        resource request (`raw_path`, as sent, decides that, as it decides what the handler serves)."""
        return path in self and is_non_resource(method, raw_path)


def is_non_resource(method: str, raw_path: str) -> bool:
    """True for a non-resource request (discovery, health, `/metrics`), the only kind a listed path opens."""
    return isinstance(request_attributes(method, raw_path), NonResourceAttributes)
