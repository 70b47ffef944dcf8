"""What a metric source says fails right now, per runtime: what /debug shows beside a runtime answered 503.

The log says a failure once, when it starts; an operator looking at a runtime an hour later should not need that
line. So a source may offer `problems(key)` (`SourceProblem`s: the reason, the backend's words, since when, the
pod where it is one pod's), and `source_problems` asks it. Plain data, no I/O: the sources write it
(`autoscaler.sources`), the API reads it (`autoscaler.api.render`, `autoscaler.api.debug_document`), and neither
package may import the other.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final, Protocol

from autoscaler.model import RuntimeKey

REASON_DISCOVERY: Final = "discovery"
"""A `SourceProblem`'s reason while pod discovery is out of date for the runtime's namespace: its snapshot is
`source_ok=False`."""
REASON_GARBAGE: Final = "garbage"
"""A value or an answer that is no usable reading (NaN, infinite, negative, or a ModelMesh reading missing from an
exporter's answer): counted by both sources under this reason; the exporter answered, so nothing backs off."""
HPA_HOLDS: Final = "holding their replicas (no scale-up, no scale-down)"
"""What the HPA does while a runtime's values are unknown (503), as discovery's lines say it."""
DISCOVERY_OUTCOME: Final = ("every value of the runtime is unknown (503) until it recovers, so the HPA holds its "
                            "replicas (no scale-up, no scale-down)")
"""What an out-of-date discovery does to a runtime, as /debug and the log lines say it: its snapshots are
`source_ok=False`, which the decision serves as unknown. It said "values cannot fall until it recovers", as if
values were served held and could still rise: every value was 503, scale-ups blocked too."""
DISCOVERY_DETAIL: Final = ("pod discovery is out of date (the Kubernetes API unreachable, or this namespace's pod "
                           f"watch or Deployment read failing, e.g. refused by RBAC); {DISCOVERY_OUTCOME}: the "
                           "adapter's log has its error ('Kubernetes discovery: ...')")


PODS_UNKNOWN: Final = "the pods of {scope} are unknown: "
"""How a pod watch's error (`DiscoveryErrors`) starts while no list of it ever worked: there is no inventory to be
out of date and no value to keep, so `DiscoveryOutage` says it as it is, not as `pod discovery is out of date
(...); every value of the runtime is unknown (503) until it recovers`."""


def pods_unknown(detail: str) -> bool:
    """Whether a discovery error says a namespace's pods are unknown (`PODS_UNKNOWN`)."""
    head, _, tail = PODS_UNKNOWN.partition("{scope}")
    return detail.startswith(head) and tail in detail


CUT: Final = "{…}"
"""What stands in a source-wide problem's words for each label set (or other braced group) cut out of them."""
CUT_NOTE: Final = " (label sets cut out as {…}: the adapter's log has the whole text)"
"""How a source-wide problem's words end where something was cut: where the whole text is."""


def for_every_runtime(detail: str) -> str:
    """A source-wide problem's words as any runtime's /debug and 503 may say them: every braced group cut out.

    A backend that fails as a whole (Prometheus) says so in the same words to every runtime, and its words name
    the series they are about: Prometheus's `found duplicate series for the match group {namespace="team-b",
    pod="..."} ... [{model_id="..."}]`, or a garbled item's labels. A runtime's /debug is read by whoever may read
    its namespace, so another tenant's pod and model names must not reach it; Prometheus writes label sets, and
    the PromQL the adapter sends writes its matchers, between braces, so those go and the words around them (what
    failed, the URL, the hint) stay. Quoted text inside a group is skipped whole (a `}` in a label value ends
    nothing); a group left open (text cut short) is cut to the end."""
    out: list[str] = []
    depth, quote, escaped, cut = 0, "", False, False
    for char in detail:
        if depth == 0:
            if char == "{":
                depth, cut = 1, True
                out.append(CUT)
            else:
                out.append(char)
        elif quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
        elif char in "\"'":
            quote = char
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
    return "".join(out) + CUT_NOTE if cut else detail


@dataclass(frozen=True, slots=True)
class SourceProblem:
    """A read that fails right now, as /debug shows it for the runtimes it affects."""

    reason: str
    """The `modelmesh_autoscaler_source_errors_total` reason (`connect`, `timeout`, `tls`, `http`, `parse`,
    `empty`), or `discovery`; or, not errors but why pods lack data, Prometheus's `unseen` and `partial` and
    the scrape source's `no_exporter` (a pod that runs no exporter sidecar)."""
    detail: str
    """The backend's own words, as the log has them (credentials left out); a source-wide problem's with their
    label sets cut out (`for_every_runtime`), since every runtime's readers see them."""
    since: float
    """Clock time of the first failure of this run of failures (the reason may have changed since)."""
    pod: str | None = None
    """The pod whose exporter fails (the scrape source); None when the source fails as a whole."""


class ProblemSource(Protocol):
    """What /debug needs of a metric source to say what fails: every `MetricSource` is one (a source with no
    problems to tell says none through `SourceDefaults`)."""

    name: str

    def problems(self, key: RuntimeKey) -> tuple[SourceProblem, ...]: ...


DiscoveryErrors = tuple[tuple[str | None, str], ...]
"""A discovery's errors, each with the namespace it is about (None: one about no single namespace)."""


def discovery_problems(discovery: object) -> DiscoveryErrors:
    """What a discovery says keeps its inventory out of date (`KubePodDiscovery.problems`); () when it does
    not say (a targets file never fails after start)."""
    problems = getattr(discovery, "problems", ())
    return problems if isinstance(problems, tuple) else ()


def source_problems(source: ProblemSource, key: RuntimeKey) -> tuple[SourceProblem, ...]:
    """What `source` says fails now for runtime `key`."""
    return source.problems(key)


class DiscoveryOutage:
    """Since when discovery has been out of date for each namespace's runtimes, for the sources' `source_ok` and
    `problems` (noted once per refresh).

    Health is per namespace (`PodDiscovery.healthy_for`): one tenant's namespace refused holds its own runtimes,
    not the fleet; a failing read of all namespaces holds every runtime. Discovery's errors name namespaces and
    carry their API errors, and a runtime's /debug is read by whoever may read that namespace's: each runtime is
    told only the errors of its own namespace and those about none (a read of all namespaces)."""

    def __init__(self) -> None:
        self._since: dict[str, float] = {}
        self._errors: DiscoveryErrors = ()

    def note(self, healthy_for: Callable[[str], bool], namespaces: Iterable[str], now: float,
             errors: DiscoveryErrors = ()) -> None:
        """Record at `now` whether discovery is up to date for each of `namespaces` (the inventory's), with its own
        words for what fails when it has them (the Kubernetes API's errors: an operator at /debug should not need
        to find the log line). Each namespace is asked once, however many runtimes it has."""
        self._since = {namespace: self._since.get(namespace, now)
                       for namespace in set(namespaces) if not healthy_for(namespace)}
        self._errors = errors

    def healthy(self, namespace: str) -> bool:
        """Whether the runtimes of `namespace` were up to date at the last `note`: their `source_ok`."""
        return namespace not in self._since

    def problems(self, namespace: str) -> tuple[SourceProblem, ...]:
        """The outage as runtimes of `namespace` may see it; () while their namespace is up to date."""
        since = self._since.get(namespace)
        if since is None:
            return ()
        errors = [error for where, error in self._errors if where is None or where == namespace]
        mine = "; ".join(errors)
        if errors and all(pods_unknown(error) for error in errors):
            detail = mine  # nothing listed yet: nothing is out of date, no value kept
        else:
            detail = f"pod discovery is out of date ({mine}); {DISCOVERY_OUTCOME}" if mine else DISCOVERY_DETAIL
        return (SourceProblem(REASON_DISCOVERY, detail, since),)
