"""What /debug says of the HPAs' selectors, on any namespace of HPAs: the promise of `hpa_selections`.

Each runtime selected by two HPAs or more names them all; each runtime whose RuntimeScale's HPA selects another
says so, naming that HPA and what it selects; a runtime with one HPA selecting it, or none aimed at it, gets no
word (a runtime nobody scales is no mistake). The HPAs are read as the watch reads them (`parse_hpa`).
"""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.sources.hpa_selections import owners_by_runtime, selection_warnings
from autoscaler.sources.kube_hpas import HpaBounds, parse_hpa

NS = "ns"
RUNTIMES = ("rt0", "rt1", "rt2", "rt3")
KNOWN = {RuntimeKey(NS, f"modelmesh-serving-{name}") for name in RUNTIMES[:3]}  # rt3: no runtime the adapter knows


def hpa(index: int, target: str, selects: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"scaleTargetRef": {"apiVersion": "autoscaler.modelmesh.io/v1alpha1", "kind": "RuntimeScale",
                                               "name": target}, "maxReplicas": 10}
    if selects is not None:
        spec["metrics"] = [{"type": "External", "external": {"metric": {
            "name": "modelmesh_desired_replicas", "selector": {"matchLabels": {"servingruntime": selects}}}}}]
    return {"metadata": {"namespace": NS, "name": f"hpa-{index}"}, "spec": spec}


@given(st.lists(st.tuples(st.sampled_from(RUNTIMES), st.none() | st.sampled_from(RUNTIMES)), max_size=6))
def test_every_runtime_an_hpa_gets_wrong_is_told_and_no_other(shapes: list[tuple[str, str | None]]) -> None:
    hpas: list[HpaBounds] = [h for i, (t, s) in enumerate(shapes) if (h := parse_hpa(hpa(i, t, s))) is not None]
    owners = owners_by_runtime(hpas)
    said = selection_warnings(hpas, owners, hpas, KNOWN)
    for key in KNOWN:
        lines = " | ".join(said.get(key, ()))
        selecting = owners.get(key, [])
        aimed_here = [h for h in hpas if h.aimed == key]
        if len(selecting) > 1:
            assert f"scaled by {len(selecting)} HPAs" in lines and all(h.name in lines for h in selecting), lines
        for h in aimed_here:
            assert h.name in lines and all(k.deployment in lines for k in h.runtimes), lines
            assert ("no HPA selects this runtime" in lines) == (not selecting), lines
        if len(selecting) <= 1 and not aimed_here:
            assert key not in said, lines
    assert set(said) <= KNOWN  # nothing said of what the adapter does not serve
