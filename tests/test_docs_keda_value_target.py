"""The recommendation is read with an `AverageValue` target of 1, never `Value`. operations.md's KEDA section said
"`Value` would divide it by the pods": backwards. For an External `Value` target the HPA proposes the value over
the target times the ready pods (Kubernetes' `GetExternalMetricReplicas`, `autoscaler/simulation/hpa_metrics.py`),
so a KEDA trigger of `metricType: Value` multiplies the recommendation by the pods and runs the runtime to
`maxReplicaCount`. The words are checked against the project's model of the HPA, and every example that reads
`modelmesh_desired_replicas` (docs and manifests) against `AverageValue`."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from autoscaler.names import ServedMetric
from autoscaler.simulation.hpa_metrics import propose
from autoscaler.simulation.hpa_spec import HpaPod, MetricSpec
from tests.manifests.support import EXAMPLES, KEDA_SCALED_OBJECT, kustomize, load_yaml

REPO = Path(__file__).resolve().parent.parent
OPERATIONS = (REPO / "docs" / "operations.md").read_text()
DOCS = (REPO / "README.md", REPO / "manifests" / "README.md", *sorted((REPO / "docs").glob("*.md")))
METRIC = ServedMetric.DESIRED_REPLICAS


def metric_type_bullet() -> str:
    """The KEDA section's bullet on `metricType`."""
    section = OPERATIONS[OPERATIONS.index("### KEDA: what to set"):]
    section = section[:section.index("\n### ")]
    [bullet] = re.findall(r"^- \*\*`metricType.*?(?=^- |\Z)", section, flags=re.M | re.S)
    return " ".join(bullet.split())


def hpa_proposes(target_type: str, recommendation: float, pods: int) -> int:
    """What the HPA KEDA makes proposes for the trigger's `targetValue: "1"` (the project's HPA model)."""
    spec = MetricSpec(f"s0-metric-api-{METRIC}", "External", target_type, 1.0)  # type: ignore[arg-type]
    proposal = propose(spec, recommendation, pods, [HpaPod(f"p{i}", True) for i in range(pods)])
    assert proposal is not None
    return proposal


def test_the_metric_type_bullet_says_what_value_does_as_the_hpa_computes_it() -> None:
    bullet = metric_type_bullet()
    assert not re.search(r"`Value`[^.]*\bdivides?\b", bullet), f"`Value` said to divide: {bullet}"
    example = re.search(r"recommendation of (\d+) at (\d+) pods? (?:asks for|proposes) (\d+)", bullet)
    assert example, f"the bullet gives no worked example of `Value`: {bullet}"
    recommendation, pods, proposed = map(int, example.groups())
    assert hpa_proposes("Value", recommendation, pods) == proposed
    assert hpa_proposes("AverageValue", recommendation, pods) == recommendation


def test_value_runs_the_shipped_scaled_object_to_its_max_replica_count_as_the_bullet_says() -> None:
    scaled = load_yaml(KEDA_SCALED_OBJECT)["spec"]
    replicas, recommendation = scaled["minReplicaCount"] + 1, scaled["minReplicaCount"] + 3
    for _ in range(20):
        replicas = min(scaled["maxReplicaCount"], hpa_proposes("Value", recommendation, replicas))
    assert replicas == scaled["maxReplicaCount"] > recommendation
    assert "`maxReplicaCount`" in metric_type_bullet()


def yaml_blocks(text: str) -> list[Any]:
    documents = []
    for block in re.findall(r"```ya?ml\n(.*?)```", text, flags=re.S):
        try:
            documents += [d for d in yaml.safe_load_all(block) if isinstance(d, dict)]
        except yaml.YAMLError:
            continue  # an excerpt with `...`, not an object
    return documents


def desired_replicas_targets(obj: dict[str, Any]) -> list[str]:
    """The target types an HPA or ScaledObject reads `modelmesh_desired_replicas` with."""
    if obj.get("kind") == "HorizontalPodAutoscaler":
        return [m["external"]["target"]["type"] for m in obj["spec"].get("metrics", [])
                if m.get("type") == "External" and m["external"]["metric"]["name"] == METRIC]
    if obj.get("kind") == "ScaledObject":
        return [t.get("metricType", "AverageValue") for t in obj["spec"].get("triggers", [])
                if t["metadata"].get("valueLocation") == METRIC]
    return []


def test_every_example_reads_the_recommendation_with_an_average_value_target() -> None:
    examples = [*kustomize(EXAMPLES), load_yaml(KEDA_SCALED_OBJECT)]
    for doc in DOCS:
        examples += yaml_blocks(doc.read_text())
    targets = [t for obj in examples for t in desired_replicas_targets(obj)]
    assert len(targets) >= 3  # the example HPA, the ScaledObject, operations.md's HPA
    assert set(targets) == {"AverageValue"}
