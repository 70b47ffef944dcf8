"""docs/operations.md's account of what `manifests/base` grants is the base's RBAC: an operator reviewing the
install for least privilege reads the list there."""

from __future__ import annotations

import re
from pathlib import Path

from tests.manifests.support import BASE, find, kustomize

REPO = Path(__file__).resolve().parent.parent
OPERATIONS = (REPO / "docs" / "operations.md").read_text()

# How the page names a resource: its kind, in words.
IN_WORDS = {"pods": "pods", "deployments": "Deployments", "runtimescales": "RuntimeScales",
            "servingruntimes": "ServingRuntimes", "clusterservingruntimes": "ClusterServingRuntimes",
            "horizontalpodautoscalers": "HorizontalPodAutoscalers", "tokenreviews": "TokenReview",
            "subjectaccessreviews": "SubjectAccessReview"}


def test_the_cluster_role_the_guide_describes_is_the_one_shipped() -> None:
    """The guide listed pods, Deployments, RuntimeScales and ServingRuntimes, leaving out the HPAs (read for
    their bounds) and ClusterServingRuntimes (read to say a runtime is one)."""
    sentence = re.search(r"a ClusterRole that only reads: (.*?);", OPERATIONS, flags=re.S)
    assert sentence, "operations.md no longer describes the ClusterRole: update this test"
    said = " ".join(sentence.group(1).split())
    role = find(kustomize(BASE), "ClusterRole", "modelmesh-autoscaler")
    resources = {r for rule in role["rules"] for r in rule["resources"]}
    missing = sorted(IN_WORDS.get(r, r) for r in resources if IN_WORDS.get(r, r) not in said)
    assert not missing, f"operations.md's ClusterRole sentence leaves out {missing}: {said}"
    reads = {verb for rule in role["rules"] for verb in rule["verbs"]} - {"create"}
    assert reads <= {"get", "list", "watch"}, "the sentence says it only reads"
