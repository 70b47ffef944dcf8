"""Which pod an exporter address answers for, when discovery lists more than one pod at it.

A pod IP is given out again once its pod is gone, and discovery can still list the old pod when that happens:
its node was lost and the node controller has not marked it NotReady yet (40 s or more) while a cloud CNI has
already handed the terminated instance's IPs to a new pod on another node; or one namespace's pod watch lags
another's. Scraping the old pod's URL then reads the new pod's exporter, and the new pod's load (another
runtime's, maybe) was counted as the old pod's, twice over in all. An exporter does not say which pod it runs
in, so the address is read as the newest pod listed at it (the IP was given to it last); the older ones are
superseded: not scraped, they hold their last good samples and turn stale, as a lost pod's do. When the
newest cannot be told (the same creation second, or no creation time), the answer is no one's: none of them
is scraped. Only pods the Kubernetes API lists (they have a uid) are weighed: a targets file's URLs are the
user's own, and two of its entries at one URL are meant.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget

REASON_ADDRESS_REUSED: Final = "address_reused"
"""A `SourceProblem`'s reason, not an error: the pod's exporter address is listed for a newer pod too."""

ScrapedPod = tuple[RuntimeKey, PodTarget]
_Pod = tuple[str, str, str | None]  # namespace, name, uid: one pod, however many runtimes select it


def superseded(pods: Iterable[ScrapedPod]) -> dict[tuple[RuntimeKey, str], str]:
    """The pods whose exporter URL a newer pod is listed at too, each with who the address now answers for, in
    words ("pod NAMESPACE/NAME, created later", or the pods it cannot be told between). One pod selected by two
    runtimes is one pod."""
    at: dict[str, dict[_Pod, list[ScrapedPod]]] = {}
    for key, pod in pods:
        if pod.url is not None and pod.uid is not None:
            at.setdefault(pod.url, {}).setdefault((key.namespace, pod.name, pod.uid), []).append((key, pod))
    found: dict[tuple[RuntimeKey, str], str] = {}
    for listed in at.values():
        if len(listed) < 2:
            continue
        newest = max(listed.values(), key=_created)
        ties = [entries for entries in listed.values() if _created(entries) == _created(newest)]
        holder = f"{newest[0][0].namespace}/{newest[0][1].name}" if len(ties) == 1 and _created(newest) > 0 \
            else None
        for entries in listed.values():
            if entries is newest and holder is not None:
                continue
            for key, pod in entries:
                found[key, pod.name] = f"pod {holder}, created later" if holder is not None else (
                    "pods " + ", ".join(sorted(f"{namespace}/{name}" for namespace, name, _ in listed))
                    + ", created in the same second: which one answers there cannot be told")
    return found


def _created(entries: list[ScrapedPod]) -> float:
    created = entries[0][1].created_at
    return created if created is not None else 0.0
