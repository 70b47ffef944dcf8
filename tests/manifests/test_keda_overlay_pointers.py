"""What the KEDA overlay's comments tell a KEDA user to apply. KEDA owns the cluster's one
`v1beta1.external.metrics.k8s.io` APIService; an overlay that holds that APIService replaces KEDA's on
`kubectl apply` and stops every ScaledObject in the cluster. So a comment in manifests/examples/keda (its component
included) may name such an overlay only to say not to apply it; how a KEDA user combines one with KEDA is
tests/manifests/test_keda_combinations.py's."""

from __future__ import annotations

import re
from pathlib import Path

from tests.manifests.support import KEDA, MANIFESTS, kustomize, load_yaml

OVERLAY = re.compile(r"(?:manifests/)?(examples/[\w-]+(?:/[\w-]+)*)/?")
WARNING = re.compile(r"\b(?:do not|never|not) apply\b", re.I)


def comment_sentences(path: Path) -> list[str]:
    """The comments of a manifest file, joined and split into sentences."""
    text = " ".join(line.split("#", 1)[1].strip() for line in path.read_text().splitlines() if "#" in line)
    return [s for s in re.split(r"(?<=[.:;])\s+(?=[A-Z(])", text) if s]


def registers_the_api_service(directory: Path) -> bool:
    """A kustomize Component (examples/keda/component) is never applied alone: it registers nothing itself."""
    if load_yaml(directory / "kustomization.yaml")["kind"] == "Component":
        return False
    return any(obj["kind"] == "APIService" for obj in kustomize(directory))


def test_the_keda_overlay_never_sends_a_keda_user_to_apply_an_overlay_with_the_api_service() -> None:
    offending = []
    for path in sorted(KEDA.rglob("*.yaml")):
        for sentence in comment_sentences(path):
            for match in OVERLAY.finditer(sentence):
                directory = MANIFESTS / match.group(1)
                if not (directory / "kustomization.yaml").exists() or directory == KEDA:
                    continue
                if registers_the_api_service(directory) and not WARNING.search(sentence):
                    offending.append(f"{path.name}: {sentence}")
    assert not offending, "points a KEDA user at an overlay holding the APIService:\n" + "\n".join(offending)
