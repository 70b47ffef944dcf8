"""--hpa-behavior's file: the behavior of the HPA in it, and its replica bounds, which a run compares with its own.

The file is what a user has at hand: an HPA manifest, `kubectl get hpa -o yaml`'s List, a file of several
manifests, a KEDA ScaledObject (the HPA KEDA makes), or a bare mapping with `behavior:`."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import yaml

from autoscaler.policies import strict_yaml
from autoscaler.policies.yaml_errors import yaml_error_text
from autoscaler.simulation.hpa_manifest import behavior_from_manifest, hpa_of_scaled_object
from autoscaler.simulation.hpa_spec import Behavior
from autoscaler.simulation.shipped import SHIPPED_BEHAVIOR

HPA_KINDS: Final = ("HorizontalPodAutoscaler", "ScaledObject")
"""The kinds whose HPA behavior `--hpa-behavior` reads: an HPA, or a KEDA ScaledObject (the HPA KEDA makes)."""


HPA_BOUNDS: Final = ("minReplicas", "maxReplicas")
KEDA_BOUNDS: Final = ("minReplicaCount", "maxReplicaCount")
"""A ScaledObject's names for the bounds of the HPA KEDA makes: what a warning about them says, as the file does."""


def read_hpa_file(path: Path | None) -> tuple[Behavior | None, dict[str, Any], tuple[str, str]]:
    """The behavior of the HPA in `path` (default: the shipped one), that HPA's spec ({} for a bare
    behavior), whose replica bounds the run compares with its own, and the file's names for those bounds."""
    if path is None:
        return SHIPPED_BEHAVIOR, {}, HPA_BOUNDS
    try:
        documents = [d for d in strict_yaml.safe_load_all(path.read_text(encoding="utf-8")) if d is not None]
    except OSError as exc:
        raise ValueError(f"{path}: cannot read: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc.reason})") from exc
    except yaml.YAMLError as exc:
        raise ValueError(yaml_error_text(path, exc)) from exc
    listed = len(documents) == 1 and isinstance(documents[0], dict) and documents[0].get("kind") == "List"
    if listed:  # `kubectl get hpa -o yaml` without a name prints its HPAs as the items of a List
        items = documents[0].get("items")
        documents = items if isinstance(items, list) else []
    if listed or len(documents) > 1:  # or a file of manifests (kustomize's output, a runtime's objects): its HPA
        among = f"the {len(documents)} items of its List" if listed else f"its {len(documents)} documents"
        hpas = [d for d in documents if isinstance(d, dict) and d.get("kind") in HPA_KINDS]
        if len(hpas) != 1:
            raise ValueError(f"{path}: {'no' if not hpas else len(hpas)} HorizontalPodAutoscaler"
                             f"{'s' if len(hpas) > 1 else ''} among {among}; "
                             f"give a file with the one to simulate (kubectl get hpa NAME -o yaml)")
        documents = hpas
    document = documents[0] if documents else None
    if not isinstance(document, dict):
        raise ValueError(f"{path}: expected an HPA manifest or a mapping with `behavior:`")
    bounds = KEDA_BOUNDS if document.get("kind") == "ScaledObject" else HPA_BOUNDS
    try:
        if bounds == KEDA_BOUNDS:  # KEDA's: read as the HPA it makes
            document = hpa_of_scaled_object(document)
        behavior = behavior_from_manifest(document)
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{path}: {exc}") from exc
    spec = document.get("spec", document if "behavior" in document else None)  # a spec pasted without `spec:`
    return behavior, spec if isinstance(spec, dict) else {}, bounds


def other_bounds(path: Path, spec: dict[str, Any], low: int, high: int,
                  bounds: tuple[str, str] = HPA_BOUNDS) -> str | None:
    """The HPA's own minReplicas/maxReplicas where they are not the run's: only its behavior is read, and a user
    giving the HPA copied from the cluster would take the report for a replay of that HPA. Said in the file's
    words (`bounds`): a ScaledObject's minReplicaCount/maxReplicaCount, which the user looks for in it."""
    minimum, maximum = spec.get("minReplicas", 1), spec.get("maxReplicas")
    if not isinstance(maximum, int) or not isinstance(minimum, int) or (minimum, maximum) == (low, high):
        return None
    return (f"{path}: its {bounds[0]} {minimum} and {bounds[1]} {maximum} are not this run's replicas {low}..{high}: "
            f"give --min-replicas {minimum} --max-replicas {maximum} to simulate them")

