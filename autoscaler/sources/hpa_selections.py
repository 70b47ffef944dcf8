"""What the HPAs' metric selectors get wrong, said where the operator looks: each runtime's /debug and the log line.

An HPA scales its `scaleTargetRef` on the value its metric selects. Where the selector names another runtime
(a copied HPA, an edit, a typo), the HPA scales its own runtime on that one's value, and the adapter, which reads
bounds by selector (`kube_hpas`), applies both HPAs' bounds to the runtime selected twice and none to the one
whose HPA looks elsewhere. An on-call reviewer saw `"warnings": []` in the /debug of both, a WARNING about the
other runtime in the log, and, with a typo, an INFO line saying the runtime had `no HPA any more` while its HPA
was there. So:
- `selection_warnings`: for the /debug `warnings` of each runtime the adapter serves, a runtime selected by
  several HPAs (their names, the bounds that apply, and which of them scales another runtime on its value), and
  a runtime whose RuntimeScale's HPA selects something else (what, whether that is a runtime the adapter knows,
  and what the namespace's HPAs select);
- `gone_reasons`: for the log line of changed bounds, why no HPA selects a runtime any more (its HPA selects
  something else now, selects no runtime, or was deleted).
Pure: the HPAs as `kube_hpas.parse_hpa` reads them in, words out.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping
from typing import TYPE_CHECKING, Final

from autoscaler.log_lists import few
from autoscaler.model import RuntimeKey
from autoscaler.names import SERVINGRUNTIME_DEPLOYMENT_PREFIX

if TYPE_CHECKING:  # (`kube_hpas` imports this module)
    from autoscaler.sources.kube_hpas import HpaBounds

HpaRef = tuple[str, str]
"""(namespace, name) of an HPA."""

NAMED: Final = 10
"""HPAs of a namespace named in one warning; the rest are counted."""


def owners_by_runtime(hpas: Iterable[HpaBounds]) -> dict[RuntimeKey, list[HpaBounds]]:
    """The HPAs whose metric (or target) selects each runtime, by name."""
    owners: dict[RuntimeKey, list[HpaBounds]] = {}
    for hpa in sorted(hpas, key=lambda h: (h.namespace, h.name)):
        for key in hpa.runtimes:
            owners.setdefault(key, []).append(hpa)
    return owners


def _runtime_scale(key: RuntimeKey) -> str:
    return key.deployment.removeprefix(SERVINGRUNTIME_DEPLOYMENT_PREFIX)


def _selected(hpa: HpaBounds, known: Collection[RuntimeKey]) -> str:
    return ", ".join(key.deployment if key in known else f"{key.deployment} (not a runtime the adapter knows)"
                     for key in hpa.runtimes)


def selection_warnings(astray: Iterable[HpaBounds], owners: Mapping[RuntimeKey, list[HpaBounds]],
                       every: Collection[HpaBounds], known: Collection[RuntimeKey],
                       ) -> dict[RuntimeKey, tuple[str, ...]]:
    """The /debug warnings of the `known` runtimes that several HPAs select, or whose RuntimeScale's HPA selects
    another; none for the others (a runtime nobody scales is no mistake). `astray`: the HPAs concerned (those
    selecting a runtime another selects too, and those with an `aimed` runtime); `owners`: every HPA selecting each
    runtime (`owners_by_runtime` of them all); `every`: all HPAs, read only to list a namespace's."""
    said: dict[RuntimeKey, list[str]] = {}
    astray = list(astray)
    for key in dict.fromkeys(key for hpa in astray for key in hpa.runtimes):
        selecting = owners.get(key, [])
        if len(selecting) < 2 or key not in known:
            continue
        low = max(h.min_replicas for h in selecting)
        high = min(h.max_replicas for h in selecting)
        elsewhere = "".join(f"; HPA {h.name} scales the RuntimeScale {_runtime_scale(h.aimed)} (runtime "
                            f"{h.aimed.deployment}) on this runtime's value" for h in selecting if h.aimed is not None)
        said.setdefault(key, []).append(
            f"scaled by {len(selecting)} HPAs ({', '.join(h.name for h in selecting)}), whose metrics select this "
            f"runtime; the tighter of their bounds apply ({low}, {high}){elsewhere}. Each HPA's metric should select "
            f"the runtime its scaleTargetRef scales")
    for hpa in astray:
        target = hpa.aimed
        if target is None or target not in known:
            continue
        instead = (f"HPA {hpa.name}, which scales this runtime's RuntimeScale {_runtime_scale(target)}, selects "
                   f"{_selected(hpa, known)} instead, so this runtime's replicas follow that value")
        if target in owners:
            said.setdefault(target, []).append(instead)
            continue
        neighbours = [f"{h.name} -> {', '.join(k.deployment for k in h.runtimes)}"  # (a scan of every HPA: rare)
                      for h in sorted(every, key=lambda h: h.name) if h.namespace == target.namespace]
        said.setdefault(target, []).append(
            f"no HPA selects this runtime: {instead}, and no HPA's bounds apply to it; the HPAs of namespace "
            f"{target.namespace} select: {few(neighbours, NAMED, more=' and {} more')}")
    return {key: tuple(lines) for key, lines in said.items()}


def gone_reasons(before: Mapping[RuntimeKey, list[HpaBounds]], now: Mapping[HpaRef, HpaBounds],
                 selecting_none: Collection[HpaRef], gone: Iterable[RuntimeKey]) -> dict[RuntimeKey, str]:
    """Why no HPA selects each runtime of `gone` any more, from the HPAs that selected it `before`: each selects
    something else `now`, selects no runtime (`selecting_none`: HPAs there that scale no runtime), or is deleted."""
    reasons = {}
    for key in gone:
        parts = []
        for hpa in before.get(key, ()):
            ref = (hpa.namespace, hpa.name)
            found = now.get(ref)
            if found is not None:
                parts.append(f"{hpa.name} now selects {', '.join(str(k) for k in found.runtimes)}")
            elif ref in selecting_none:
                parts.append(f"{hpa.name} selects no runtime now")
            else:
                parts.append(f"{hpa.name} deleted")
        if parts:
            reasons[key] = "; ".join(parts)
    return reasons
