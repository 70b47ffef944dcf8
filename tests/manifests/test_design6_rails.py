"""DESIGN §6, slow scale-down: "The shipped HPA's `behavior` is the main [rail] (scale-down stabilization and
a pods-per-period policy; scale-up at the HPA's default speed). The adapter adds a second". What a user
applies is the example HPA (`kubectl apply -k manifests/examples`): its `behavior` is checked here.

The shipped pair is one rail, the adapter's: §6 leaves the pair to the simulator ("chosen with the simulator so
that the pair is not slower than it needs to be"), and a second rail in the HPA cost 0.08-0.25x more pod-hours
for 0.03-0.07x off the delays (docs/simulation.md, "Settings tried"). `test_manifests` checks the HPA adds no
scale-down window; the scale-up half of the sentence is checked here."""

from __future__ import annotations

from tests.manifests.support import EXAMPLES, find, kustomize


def shipped_behavior() -> dict[str, dict[str, object]]:
    behavior = find(kustomize(EXAMPLES), "HorizontalPodAutoscaler")["spec"]["behavior"]
    return behavior  # type: ignore[no-any-return]


def test_the_shipped_hpa_scales_up_at_the_hpas_default_speed() -> None:
    """Kubernetes' default scale-up: no window; double, or 4 pods, every 15 s, whichever is more."""
    up = shipped_behavior()["scaleUp"]
    assert up.get("stabilizationWindowSeconds", 0) == 0
    assert up.get("selectPolicy", "Max") == "Max"
    assert sorted((p["type"], p["value"], p["periodSeconds"]) for p in up["policies"]) == [  # type: ignore[attr-defined]
        ("Percent", 100, 15), ("Pods", 4, 15)]
