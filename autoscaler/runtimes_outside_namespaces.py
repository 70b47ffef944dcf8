"""The start-up warning for policy-file runtimes outside `--namespaces`: served by halves, said once.

`--namespaces` bounds discovery (which Deployments are found) and, with it, the HPA watch and the RuntimeScale
bridge; a `runtimes:` entry of the policy file is served wherever it is, even before its Deployment exists, so
discovery reads that Deployment by name and watches the pods of its namespace. A runtime named in a namespace
left out of `--namespaces` was therefore half-served without a word: its values answered, but its HPA's
minReplicas/maxReplicas were never read and the bridge never copied its RuntimeScale into its ServingRuntime,
so the HPA's decisions went nowhere. Under the namespaced RBAC overlay, which grants the adapter only the
namespaces in `--namespaces`, its pod list is refused (403) and its values are unknown (503) for good.

Warned, not widened: the HPA watch and the bridge are not extended to that namespace, since the bridge writes
ServingRuntimes there and `--namespaces` is where an operator says (and the namespaced overlay binds) where the
adapter may act. For the same reason no pod-deletion cost is written on its pods
(`autoscaler.actuation.writes_off.written_namespaces`): the leader wrote them, into a namespace nobody listed, or
had each patch refused (403) at every pass. Nor removed: those an earlier release wrote there stay, which
`autoscaler.costs_left_outside` names with the command that removes them. Warned, not refused (as
`autoscaler.unused_settings`): an adapter that starts today keeps starting after an upgrade, and its operator
learns what to add.
"""

from __future__ import annotations

from collections.abc import Iterable

from autoscaler.actuation.writes_off import bridges_replicas, written_namespaces
from autoscaler.model import RuntimeKey
from autoscaler.serve_args import given_as
from autoscaler.settings import ServeSettings


def runtimes_outside_namespaces(settings: ServeSettings, runtimes: Iterable[RuntimeKey]) -> str | None:
    """The warning for the policy file's `runtimes` whose namespace `--namespaces` leaves out; None when there are
    none, when every namespace is served (no `--namespaces`), or with a targets file (no Kubernetes discovery)."""
    served = written_namespaces(settings)
    if not served:
        return None
    outside = sorted({key for key in runtimes if key.namespace not in served})
    if not outside:
        return None
    flag = given_as(settings, "namespaces")
    setting = namespaces_as_given(settings)
    config = _as_given(given_as(settings, "config"), str(settings.config))
    missing = sorted({key.namespace for key in outside})
    one = len(outside) == 1
    its, hpa = ("its", "HPA's") if one else ("their", "HPAs'")
    lacks = f"{its} {hpa} minReplicas and maxReplicas are not read"
    if bridges_replicas(settings):
        lacks += (f" and {its} RuntimeScale{'' if one else 's'} {'is' if one else 'are'} not bridged to {its} "
                  f"ServingRuntime{'' if one else 's'} (the {hpa} replicas go nowhere)")
    if settings.deletion_cost:
        lacks += (f"; no pod-deletion cost is written on {its} pods: the adapter writes nothing outside "
                  f"{flag}; costs an earlier release's leader wrote there stay, and the ReplicaSet keeps removing "
                  f"pods by them: once the pod watch sees such costs, the log and /debug/runtimes name them "
                  f"with the command that removes them")
    named = (f"runtime {outside[0]}, whose namespace" if one
             else f"runtimes {', '.join(map(str, outside))}, whose namespaces")
    return (f"{config} names {named} {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} "
            f"not in {setting}: {its} pods are watched and {its} values served, but "
            f"{lacks}; under the namespaced RBAC overlay (manifests/examples/namespaced), with no RoleBinding in "
            f"{', '.join(missing)}, {its} pods are refused (403) and {its} values unknown (503), the HPA holding "
            f"{its} replicas (no scale-up, no scale-down). Add {','.join(missing)} to "
            f"{flag} (with a RoleBinding in each namespace added, under the namespaced overlay), or remove "
            f"{'the runtime' if one else 'these runtimes'} from {settings.config}")


def warnings_by_runtime(settings: ServeSettings, runtimes: Iterable[RuntimeKey]) -> dict[RuntimeKey, str]:
    """The same warning, one runtime's each, for its /debug `warnings`: whoever looks at the runtime held or
    unbounded reads why there, not only in a start log long rotated away."""
    said = {key: runtimes_outside_namespaces(settings, [key]) for key in runtimes}
    return {key: warning for key, warning in said.items() if warning is not None}


def namespaces_as_given(settings: ServeSettings) -> str:
    """`--namespaces team-a,team-b` (or `AUTOSCALER_NAMESPACES=...`): the setting as the user wrote it."""
    return _as_given(given_as(settings, "namespaces"), ",".join(written_namespaces(settings)))


def _as_given(name: str, value: str) -> str:
    """A setting as the user wrote it: `--namespaces team-a`, or `AUTOSCALER_NAMESPACES=team-a` in the pod spec."""
    return f"{name}={value}" if name.startswith("AUTOSCALER_") else f"{name} {value}"
