"""What fails for each scraped pod now (`ScrapeProblems`): for /debug, for the snapshots' `read_failures`, and
for the log when it starts or changes.

A pod's problem is recorded when its scrape fails (counted by reason, backed off by `scrape_retry`), when it answers
without usable load data (`garbage`, counted), when its address is taken by a newer pod (`address_reused`), when it
runs no exporter sidecar (`no_exporter`) or was still queued at the refresh's deadline (`not_scraped`); the last
three are no error. A problem is failing since its first of the spell (`ongoing_problem`) and said once, when it
starts or its reason changes (`scrape_news` words and groups the lines), never at every refresh. So are a pod's
exporter clock found off ours and a sample whose per-model use is unread.
"""

from __future__ import annotations

import logging
from collections import Counter
from dataclasses import replace
from typing import Final, TypeVar

from autoscaler.log_lists import NAMED, few
from autoscaler.model import RuntimeKey, RuntimeSnapshot
from autoscaler.source_problems import REASON_GARBAGE
from autoscaler.sources.base import PodTarget, SourceProblem, ongoing_problem
from autoscaler.sources.scrape_news import ScrapeNews
from autoscaler.sources.scrape_retry import ScrapeRetries
from autoscaler.sources.shared_addresses import REASON_ADDRESS_REUSED, superseded
from exporter import names
from exporter.flag_values import without_password

log = logging.getLogger("autoscaler.sources.scrape")  # the source's logger: operators filter on one name

_Pod = TypeVar("_Pod")
PodKey = tuple[RuntimeKey, str]
"""A pod by its runtime and name."""

REASON_NO_EXPORTER: Final = "no_exporter"
"""A `SourceProblem`'s reason, not an error: a Ready pod runs no exporter sidecar
(`PodTarget.undeclared_exporter_port`)."""


REASON_NOT_SCRAPED: Final = "not_scraped"
"""A `SourceProblem`'s reason, not an error: the pod's scrape was still queued behind --scrape-concurrency when
the refresh's deadline passed, so it was never sent."""
_ANSWERED_OR_UNSENT: Final = frozenset({REASON_GARBAGE, REASON_NO_EXPORTER, REASON_NOT_SCRAPED, REASON_ADDRESS_REUSED})
"""Problems that are no failed scrape (`RuntimeSnapshot.read_failures`): an answer without usable load data (said in the
runtime's own words: its signals are held), no sidecar, a scrape never sent."""
_MODELS_UNREAD: Final = (f"every {names.MODEL_LAST_SERVED_TIMESTAMP} it published was garbage (NaN, negative or "
                         "+Inf): its per-model use is unread, no sign that ModelMesh stopped reporting it, so the "
                         "runtime's memory of per-model use does not age while its sample is that reading's (check "
                         "the pod's exporter)")


class ScrapeProblems:
    """Each pod's problem now, by runtime, and the log lines when one starts or changes."""

    def __init__(self, errors: Counter[str], news: ScrapeNews, retries: ScrapeRetries) -> None:
        """`errors`: the source's failures by reason, counted here; `news`: its log lines, flushed by the source
        once a refresh's scrapes are done; `retries`: its failure streaks."""
        self._errors = errors
        self._news = news
        self._retries = retries
        self._superseded: set[PodKey] = set()  # pods whose address a newer pod is listed at, as last said
        self._clock_offsets: dict[PodKey, float] = {}  # pods whose exporter clock is off, as last logged
        self._failing: dict[RuntimeKey, dict[str, SourceProblem]] = {}  # pods whose last scrape failed, by runtime
        self._without_exporter: dict[RuntimeKey, dict[str, SourceProblem]] = {}  # Ready pods with no sidecar
        # Pods whose last good sample came from a reading whose every model last-served time was garbage
        # (`ExporterReading.models_unread`), by runtime, for /debug; their runtimes' snapshots say `models_unread`
        # while that sample is theirs, read this refresh or held (`note_models_unread`).
        self._models_unread: dict[RuntimeKey, dict[tuple[str, str | None], SourceProblem]] = {}

    def models_unread(self, key: RuntimeKey) -> bool:
        """Whether a pod of runtime `key` holds a sample whose per-model use is unread."""
        return key in self._models_unread

    def ended(self, key: RuntimeKey, pod: PodTarget) -> SourceProblem | None:
        """The pod answered with a good reading: its problem, if it had one, ends (and is returned)."""
        failing = self._failing.get(key)
        return failing.pop(pod.name, None) if failing is not None else None

    def problems(self, key: RuntimeKey) -> tuple[SourceProblem, ...]:
        """Each of the runtime's pods whose last scrape failed, with its error and the time its run of failures
        began (a pod waiting out its backoff included), the pods whose sample, read or held, has per-model use
        unread (`note_models_unread`), and its Ready pods that run no exporter."""
        return (tuple(self._failing.get(key, {}).values()) + tuple(self._models_unread.get(key, {}).values())
                + tuple(self._without_exporter.get(key, {}).values()))

    def forget(self, pods: list[tuple[RuntimeKey, PodTarget]]) -> None:
        """Drop what is kept of pods no longer listed (`pods`, the inventory's) or no longer scraped."""
        known = {(key, pod.name) for key, pod in pods}
        for entry in [entry for entry in self._clock_offsets if entry not in known]:
            del self._clock_offsets[entry]
        # A pod gone, or no longer scraped (not Ready): its failure, and the unread-ness of a sample no longer read.
        # Most refreshes have neither to keep: the set of every scraped pod (41 M instructions at 10,000 pods,
        # docs/performance.md) is built only when there is.
        if self._failing or self._models_unread:
            scraped = {(key, pod.name, pod.uid) for key, pod in pods if pod.ready and pod.url is not None}
            _keep_only(self._failing, {(key, name) for key, name, _ in scraped})
            _keep_only(self._models_unread, {(key, (name, uid)) for key, name, uid in scraped})

    def with_failures(self, snapshot: RuntimeSnapshot) -> RuntimeSnapshot:
        """`snapshot` with why its pods' last scrapes failed (`RuntimeSnapshot.read_failures`), where they did:
        a pod waiting out its backoff too."""
        failing = self._failing.get(snapshot.key)
        if not failing:
            return snapshot
        failures = {pod: f"scrape failed ({problem.reason})" for pod, problem in failing.items()
                    if problem.reason not in _ANSWERED_OR_UNSENT}
        return replace(snapshot, read_failures=failures) if failures else snapshot

    def note_models_unread(self, key: RuntimeKey, pod: PodTarget, unread: bool, now: float) -> None:
        """Keep whether the pod's new last good sample has per-model use unread (`unread`: its exporter published
        last-served times, every one garbage; rare), since the first such reading. A failed or garbled scrape
        leaves it: the sample held is that reading's, and its runtime's snapshot says `models_unread` until a
        good reading replaces it. Noted only per refresh, a pod whose scrapes failed after such a reading read as
        one whose ModelMesh reports no per-model use, and /debug said nothing of either."""
        unread_pods = self._models_unread.get(key, {})
        held = pod.name, pod.uid  # the pod's own sample, as `ScrapeSource` holds it
        if not unread:
            if unread_pods.pop(held, None) is not None and not unread_pods:
                del self._models_unread[key]
            return
        self._models_unread.setdefault(key, {})[held] = unread_pods.get(held) or SourceProblem(
            REASON_GARBAGE, f"{shown(pod)}: {_MODELS_UNREAD}", now, pod.name)

    def count_garbled(self, key: RuntimeKey, pod: PodTarget, now: float, detail: str) -> None:
        """Count an answer without new load data as `garbage`, show it in /debug, and say it when it starts (or
        its reason changes): once an outage, not at every refresh."""
        self._errors[REASON_GARBAGE] += 1
        before = self.problem(key, pod, REASON_GARBAGE, detail, now)
        if before is None or before.reason != REASON_GARBAGE:
            self._news.failed(f"{key}/{pod.name}", REASON_GARBAGE, detail)

    def note_superseded(self, pods: list[tuple[RuntimeKey, PodTarget]], now: float) -> dict[PodKey, str]:
        """The pods whose address a newer pod is listed at too (`shared_addresses`): not scraped this refresh,
        shown in /debug, and said when it starts (an error nowhere: the pod is gone, its object not yet)."""
        taken = superseded(pods)
        noted: set[PodKey] = set()
        started = []
        for key, pod in pods:
            holder = taken.get((key, pod.name))
            if holder is None or not pod.ready:  # one not Ready is not scraped anyway
                continue
            noted.add((key, pod.name))
            detail = (f"{pod.url} is also the address of {holder}: its IP was given again, so what answers there "
                      f"is not this pod; not scraped, it holds its last good sample until it turns stale (a pod "
                      f"whose node is lost, not yet marked NotReady, or a pod watch behind)")
            self.problem(key, pod, REASON_ADDRESS_REUSED, detail, now)
            if (key, pod.name) not in self._superseded:
                started.append(f"{key}/{pod.name}: {detail}")
        if started:
            log.warning("%d pod(s) not scraped, their address taken by a newer pod: %s", len(started),
                        few(started, sep="; ", more="; and {} more"))
        self._superseded = noted
        return taken

    def note_without_exporter(self, pods: list[tuple[RuntimeKey, PodTarget]], now: float) -> None:
        """Keep, for /debug, the Ready pods that run no exporter, and say once when a runtime first has one:
        its values stay unknown (503) until the sidecar is added, which is right for a runtime nobody scales."""
        before = self._without_exporter
        found: dict[RuntimeKey, dict[str, SourceProblem]] = {}
        for key, pod in pods:
            port = pod.undeclared_exporter_port
            if port is None or not pod.ready:
                continue
            known = before.get(key, {}).get(pod.name)
            found.setdefault(key, {})[pod.name] = known or SourceProblem(
                REASON_NO_EXPORTER,
                f"pod {pod.name} declares container ports but not the exporter's {port}: it runs no "
                f"modelmesh-exporter sidecar, so it is not scraped (add the sidecar to scale this runtime: "
                f"manifests/examples/exporter-sidecar-patch.yaml)", now, pod.name)
        new = {key: problems for key, problems in found.items() if key not in before}
        if len(new) <= NAMED:
            for key, problems in new.items():
                log.warning("%s: %d Ready pod(s) run no exporter sidecar (%s): not scraped, so the runtime's values "
                            "stay unknown until it is added; fine for a runtime no HPA scales", key, len(problems),
                            _one_detail(problems))
        else:  # a fleet where few runtimes are scaled: one line, not one a runtime (500 at the first refresh)
            log.warning("%d runtimes have Ready pods that run no exporter sidecar (%d pods): %s; not scraped, so "
                        "their values stay unknown until it is added; fine for a runtime no HPA scales (e.g. %s)",
                        len(new), sum(map(len, new.values())), few(list(new)), _one_detail(next(iter(new.values()))))
        self._without_exporter = found

    def problem(self, key: RuntimeKey, pod: PodTarget, reason: str, detail: str,
                 now: float) -> SourceProblem | None:
        """Record what fails for the pod now (for /debug), failing since its first problem of this spell;
        returns the problem it had before, if any."""
        failing = self._failing.setdefault(key, {})
        before = failing.get(pod.name)
        failing[pod.name] = ongoing_problem(before, reason, detail, now, pod.name)
        return before

    def failed(self, key: RuntimeKey, pod: PodTarget, reason: str, detail: str, now: float, cost_s: float,
                told: str | None = None) -> None:
        """Count and record a failed scrape that took `cost_s` (`ScrapeRetries`: only a slow one is backed off);
        said when its streak starts and when its reason changes (a lost pod's exporter refusing, then its IP
        answering for another pod: `other_pod` is news of its own). `told`: what /debug says where it is not the
        log's `detail` (`FetchError.told`)."""
        self._errors[reason] += 1
        before = self.problem(key, pod, reason, detail if told is None else told, now)
        started = self._retries.failed(streak(key, pod), now, reason, cost_s) == 1
        if started or (before is not None and before.reason != reason):
            self._news.failed(f"{key}/{pod.name}", reason, detail)

    def note_clock(self, pod: PodKey, offset: float) -> None:
        """Log when a pod's exporter clock is found off (and by how much, when that moves by a second or more),
        and when it agrees again: its times are read on its own clock meanwhile (`read_exporter_text`)."""
        logged = self._clock_offsets.get(pod)
        if offset == 0.0:
            if logged is not None:
                del self._clock_offsets[pod]
                self._news.clock_ok(f"{pod[0]}/{pod[1]}")
            return
        if logged is None or abs(offset - logged) >= 1.0:
            self._clock_offsets[pod] = offset
            self._news.clock_off(f"{pod[0]}/{pod[1]}", offset)


def _keep_only(by_runtime: dict[RuntimeKey, dict[_Pod, SourceProblem]], kept: set[tuple[RuntimeKey, _Pod]]) -> None:
    """Drop the problems of pods not `kept` (by runtime and pod) from `by_runtime`, and the runtimes left without."""
    for runtime, problems in list(by_runtime.items()):
        for pod in [pod for pod in problems if (runtime, pod) not in kept]:
            del problems[pod]
        if not problems:
            del by_runtime[runtime]


def shown(pod: PodTarget) -> str | None:
    """The pod's URL as the log and /debug say it: a targets file's URL may carry credentials
    (`https://user:password@host/metrics`), whose password no line shows."""
    return pod.url and without_password(pod.url)


def streak(key: RuntimeKey, pod: PodTarget) -> tuple[RuntimeKey, str, str | None]:
    """A pod's failure streak is its URL's too: a URL fixed in the targets file (or a pod's new IP) is a new
    address, tried at once, not after the old one's backoff (up to a minute with no fresh reading)."""
    return key, pod.name, pod.url


def _one_detail(problems: dict[str, SourceProblem]) -> str:
    """One pod's words, for a log line about all of a runtime's pods without the sidecar."""
    return next(iter(problems.values())).detail
