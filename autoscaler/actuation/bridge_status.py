"""What the replica bridge writes, decided without I/O (docs/design.md): the RuntimeScale's `status` (replicas,
selector, conditions) from what was read, and which ServingRuntime replicas to ask for.

The HPA reads a RuntimeScale through its `scale` subresource: `spec.replicas` is what the HPA sets,
`status.replicas` is the current size it divides metrics by, and `status.selector` (a label selector *string*,
as `autoscaling/v1` `Scale.status.selector` is) finds the pods; without a selector the HPA refuses to act
("selector is required"). So the status mirrors the runtime Deployment: its `status.replicas` (pods that exist,
as the Deployment's own scale subresource reports) and its `spec.selector` written out.

`Ready` explains, in the words a user reads in `kubectl describe runtimescale`, why the bridge does or does not
move the runtime. Conditions keep their `lastTransitionTime` while their status stays the same, as
`meta.SetStatusCondition` does, so a status that did not change is not written again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from autoscaler.kube.client import CustomResource
from autoscaler.names import POLICY_ANNOTATION_PREFIX, SERVINGRUNTIME_DEPLOYMENT_PREFIX

JSON = dict[str, Any]

RUNTIME_SCALES: Final = CustomResource("autoscaler.modelmesh.io", "v1alpha1", "runtimescales")
SERVING_RUNTIMES: Final = CustomResource("serving.kserve.io", "v1alpha1", "servingruntimes")
CLUSTER_SERVING_RUNTIMES: Final = CustomResource("serving.kserve.io", "v1alpha1", "clusterservingruntimes")
AUTOSCALER_CLASS_ANNOTATION: Final = "serving.kserve.io/autoscalerClass"
CLASS_NONE: Final = "none"
"""The only class that leaves replicas to `spec.replicas` (modelmesh-serving's `AutoscalerClassNone`)."""

READY: Final = "Ready"
UNTIL_ADOPTED: Final = (
    "; until it is, the scale subresource cannot be read (the API server answers 500, the spec replicas field "
    "does not exist), so the HPA shows FailedGetScale and a KEDA ScaledObject ScaledObjectCheckFailed, and "
    "neither changes the runtime")
"""Why nothing scales a RuntimeScale without replicas: the API server's `ScaleREST.Get` refuses to read it, and
the HPA and KEDA read the scale before every write (they PUT back the version they read)."""


@dataclass(frozen=True, slots=True)
class Verdict:
    """The `Ready` condition's status, reason and message."""

    ready: bool
    reason: str
    message: str


def deployment_name(scale: Mapping[str, Any]) -> str:
    """The runtime Deployment: `spec.deployment` when set, else modelmesh-serving's `modelmesh-serving-<name>`."""
    spec = scale.get("spec") or {}
    named = spec.get("deployment")
    if isinstance(named, str) and named:
        return named
    return SERVINGRUNTIME_DEPLOYMENT_PREFIX + str(spec.get("servingRuntime") or "")


def selector_string(selector: Mapping[str, Any] | None) -> str:
    """A `metav1.LabelSelector` written as the string `labels.Parse` reads (what `Scale.status.selector` holds):
    `a=b,c in (d,e),!f`. Keys sorted, as `metav1.LabelSelectorAsSelector` sorts them."""
    if not selector:
        return ""
    parts = [(key, f"{key}={value}") for key, value in (selector.get("matchLabels") or {}).items()]
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key", ""), expression.get("operator", "")
        values = ",".join(sorted(str(v) for v in expression.get("values") or []))
        text = {"In": f"{key} in ({values})", "NotIn": f"{key} notin ({values})", "Exists": key,
                "DoesNotExist": f"!{key}"}.get(operator)
        if text is not None:
            parts.append((key, text))
    return ",".join(text for _, text in sorted(parts))


def autoscaler_class(runtime: Mapping[str, Any]) -> str | None:
    """The ServingRuntime's `serving.kserve.io/autoscalerClass`, or None when it has none (or `none`)."""
    value = ((runtime.get("metadata") or {}).get("annotations") or {}).get(AUTOSCALER_CLASS_ANNOTATION)
    return None if value is None or value == CLASS_NONE else str(value)


def misplaced_policy_annotations(runtime: Mapping[str, Any], deployment: Mapping[str, Any] | None) -> dict[str, str]:
    """The ServingRuntime's `autoscaler.modelmesh.io/` annotations that its Deployment does not carry with the
    same value: the adapter reads policy annotations on the Deployment only, so these apply to nothing."""
    def annotations(obj: Mapping[str, Any] | None) -> Mapping[str, Any]:
        found = ((obj or {}).get("metadata") or {}).get("annotations")
        return found if isinstance(found, Mapping) else {}

    on_deployment = annotations(deployment)
    return {str(k): str(v) for k, v in annotations(runtime).items()
            if str(k).startswith(POLICY_ANNOTATION_PREFIX) and on_deployment.get(k) != v}


def replicas_of(obj: Mapping[str, Any] | None, part: str = "spec") -> int | None:
    """`<part>.replicas` when it is a non-negative integer."""
    value = ((obj or {}).get(part) or {}).get("replicas")
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def verdict(
    scale: Mapping[str, Any],
    runtime: Mapping[str, Any] | None,
    deployment: Mapping[str, Any] | None,
    *,
    cluster_runtime: bool = False,
) -> Verdict:
    """Why the bridge can or cannot scale the RuntimeScale's runtime."""
    spec = scale.get("spec") or {}
    name = spec.get("servingRuntime")
    namespace = (scale.get("metadata") or {}).get("namespace", "")
    if not isinstance(name, str) or not name:
        return Verdict(False, "InvalidSpec", "spec.servingRuntime must name a ServingRuntime in this namespace")
    if runtime is None and cluster_runtime:
        return Verdict(False, "ClusterServingRuntime",
                       f"{name} is a ClusterServingRuntime: one spec.replicas is shared by the Deployments of every "
                       "namespace, so it cannot be scaled per namespace; create a namespaced ServingRuntime")
    if runtime is None:
        return Verdict(False, "ServingRuntimeNotFound", f"ServingRuntime {namespace}/{name} does not exist")
    klass = autoscaler_class(runtime)
    if klass is not None:
        return Verdict(False, "AutoscalerClassConflict", class_conflict(scale, klass, deployment))
    wanted = replicas_of(scale)
    if wanted is None and replicas_of(runtime) is None and replicas_of(deployment) == 0:
        return Verdict(False, "NoReplicas",
                       f"spec.replicas is not set yet: ServingRuntime {name} sets none and Deployment "
                       f"{deployment_name(scale)} is scaled to zero (no InferenceService uses the runtime); it is "
                       f"adopted from the Deployment when modelmesh-serving starts it{UNTIL_ADOPTED}")
    if deployment is None:  # with or without spec.replicas, not a runtime scaled to zero: nothing runs it (alerted)
        if wanted is None:
            return Verdict(False, "DeploymentNotFound",
                           f"Deployment {deployment_name(scale)} of ServingRuntime {name} does not exist, and no "
                           "spec.replicas is set to adopt: is the modelmesh-serving controller running and the "
                           f"runtime enabled?{UNTIL_ADOPTED}")
        return Verdict(False, "DeploymentNotFound",
                       f"ServingRuntime {name} has spec.replicas {wanted}, but Deployment {deployment_name(scale)} "
                       "does not exist (yet): is the modelmesh-serving controller running and the runtime enabled?")
    if wanted is None:
        return Verdict(False, "NoReplicas", f"spec.replicas is not set yet{UNTIL_ADOPTED}")
    message = (f"ServingRuntime {name} spec.replicas follows this RuntimeScale ({wanted}); Deployment "
               f"{deployment_name(scale)} has {replicas_of(deployment, 'status') or 0} replicas")
    if replicas_of(deployment) == 0 and wanted > 0:
        # modelmesh-serving's scaleToZero (on by default) wins over spec.replicas while nothing uses the runtime.
        message += (f"; modelmesh-serving scaled it to zero (no InferenceService uses the runtime) and starts "
                    f"it at {wanted} when one does")
    return Verdict(True, "Bridged", message)


def class_conflict(scale: Mapping[str, Any], klass: str, deployment: Mapping[str, Any] | None) -> str:
    """The `AutoscalerClassConflict` message: why the runtime is left to its class, and the one step that hands it
    to this RuntimeScale without removing a pod.

    The annotation removed alone, modelmesh-serving (which reconciles on every ServingRuntime change) sets the
    Deployment to `spec.replicas`, else to its global `podsPerRuntime` (2 by default), at once, before the bridge
    can adopt anything: a runtime its CPU HPA had at 5 lost 3 pods. So the step is one merge patch that removes the
    annotation and sets `spec.replicas` to the replicas the Deployment runs; its webhook, which refuses class `hpa`
    with `spec.replicas`, judges the new object only, so it admits it. The exact command where the Deployment's
    replicas are known; a Deployment at 0 is modelmesh-serving's scale to zero, whose 0 would keep the runtime at 0
    once used: there the annotation alone removes nothing."""
    spec = scale.get("spec") or {}
    name = str(spec.get("servingRuntime"))
    namespace = (scale.get("metadata") or {}).get("namespace", "")
    wanted, running = replicas_of(scale), replicas_of(deployment)
    message = (f"ServingRuntime {name} has {AUTOSCALER_CLASS_ANNOTATION}={klass}: modelmesh-serving then ignores "
               "spec.replicas (class hpa adds its own CPU HPA; other classes are rejected), so this RuntimeScale "
               "publishes no pod selector and its HPA stops (InvalidSelector), leaving the runtime to its class. "
               "To hand the runtime to this RuntimeScale")
    carried = "" if wanted is None else f", then the bridge carries this RuntimeScale's spec.replicas ({wanted})"
    if running == 0:
        starts = ("at spec.replicas, else podsPerRuntime, which this RuntimeScale adopts" if wanted is None
                  else f"at this RuntimeScale's spec.replicas ({wanted}), which the bridge carries")
        return (f"{message}, remove the annotation: Deployment {deployment_name(scale)} is scaled to zero (no "
                f"InferenceService uses the runtime), so no pod goes, and it starts {starts} when one does: "
                f"kubectl -n {namespace} annotate servingruntime {name} {AUTOSCALER_CLASS_ANNOTATION}-")
    runs = "N" if running is None else str(running)
    message += (f", remove the annotation and set spec.replicas to the replicas Deployment {deployment_name(scale)} "
                f"runs ({runs}) in one patch (the annotation removed alone, modelmesh-serving sets the Deployment to "
                f"podsPerRuntime at once, and the pods above it go){carried}")
    if running is None:
        message += (f"; N is its spec.replicas (kubectl -n {namespace} get deployment {deployment_name(scale)} -o "
                    "jsonpath='{.spec.replicas}')")
    patch = '{"metadata":{"annotations":{"' + AUTOSCALER_CLASS_ANNOTATION + '":null}},"spec":{"replicas":' + runs + "}}"
    return f"{message}: kubectl -n {namespace} patch servingruntime {name} --type merge -p '{patch}'"


def duplicate(scale: Mapping[str, Any], owner: str, owner_created: str) -> Verdict:
    """The `Ready` condition of a RuntimeScale that names a ServingRuntime another, older RuntimeScale owns
    (`bridge_owners`): its `spec.replicas` (its HPA's decisions) is not carried, nor adopted from the runtime."""
    spec = scale.get("spec") or {}
    name = spec.get("servingRuntime")
    since = f"created {owner_created}, " if owner_created else ""
    return Verdict(False, "DuplicateRuntimeScale",
                   f"ServingRuntime {name} is scaled by RuntimeScale {owner} ({since}the oldest that names it): one "
                   "RuntimeScale per ServingRuntime, so this one's spec.replicas is not carried and its HPA changes "
                   "nothing; delete this one or point spec.servingRuntime at another runtime")


def not_written(scale: Mapping[str, Any], found: int | None, error: object, *, forbidden: bool, retried: bool,
                resync_s: float) -> Verdict:
    """The `Ready` condition while the RuntimeScale's `spec.replicas` cannot be written to its ServingRuntime:
    the runtime does not follow it, whatever an earlier `Bridged` said. `retried`: the failure is retried with
    backoff (no answer, 409, 429, 5xx); else it waits for the next resync, every `resync_s` (a refusal: RBAC,
    an admission webhook or policy), and says so rather than promise a retry that does not come."""
    spec = scale.get("spec") or {}
    name, wanted = spec.get("servingRuntime"), replicas_of(scale)
    namespace = (scale.get("metadata") or {}).get("namespace", "")
    message = (f"spec.replicas {wanted} cannot be written to ServingRuntime {name} (it has "
               f"{'none' if found is None else found}), so the runtime does not follow this RuntimeScale: {error}")
    if forbidden:
        message += (f"; grant the adapter patch on servingruntimes in namespace {namespace} (copy "
                    "manifests/base/role-runtimes.yaml and role-binding-runtimes.yaml there)")
    else:
        message += _tried_again(retried, resync_s)
    return Verdict(False, "ServingRuntimeNotWritten", message)


def not_read(scale: Mapping[str, Any], error: object, *, forbidden: bool, retried: bool, resync_s: float) -> Verdict:
    """The `Ready` condition while the RuntimeScale's ServingRuntime cannot be read: the bridge writes
    `spec.replicas` only to a runtime it has read (it compares first), so the HPA's replicas reach nothing, whatever
    an earlier `Bridged` said. `forbidden` (403): a ClusterRole without `get`/`list` on ServingRuntimes, an
    upgrade that kept the one from before the bridge; `retried` as in `not_written`."""
    spec = scale.get("spec") or {}
    name, wanted = spec.get("servingRuntime"), replicas_of(scale)
    message = (f"ServingRuntime {name} could not be read, so spec.replicas {wanted} is not carried to it and the "
               f"runtime does not follow this RuntimeScale: {error}")
    if forbidden:
        message += ("; grant the adapter get and list on servingruntimes (ClusterRole modelmesh-autoscaler, "
                    "manifests/base/cluster-role.yaml)")
    else:
        message += _tried_again(retried, resync_s)
    return Verdict(False, "ServingRuntimeNotRead", message)


def _tried_again(retried: bool, resync_s: float) -> str:
    """When a failure is tried again, as a condition's message ends: with backoff, or at the next resync (a
    refusal, said rather than promising a retry that does not come)."""
    return "; retried with backoff" if retried else f"; tried again at the next resync (every {resync_s:g} s)"


def bridged_spec(scale: Mapping[str, Any]) -> tuple[str, int] | None:
    """The ServingRuntime and `spec.replicas` the status says a leader carried: `Ready` True, `Bridged`, for the
    current spec (the condition's `observedGeneration` is `metadata.generation`, which every change of
    `spec.servingRuntime` or `spec.replicas` raises). Bridged is written only once the runtime holds that value,
    so a new leader (or a restarted adapter) that finds the runtime at another one meets an outside change, as
    the leader that carried it would. None when the status says nothing of the kind."""
    generation = (scale.get("metadata") or {}).get("generation")
    condition = _find((scale.get("status") or {}).get("conditions") or [], READY)
    spec = scale.get("spec") or {}
    runtime, replicas = spec.get("servingRuntime"), replicas_of(scale)
    if (condition is None or (condition.get("status"), condition.get("reason")) != ("True", "Bridged")
            or not isinstance(generation, int) or condition.get("observedGeneration") != generation
            or not isinstance(runtime, str) or replicas is None):
        return None
    return runtime, replicas


def status_stale(scale: Mapping[str, Any]) -> bool:
    """Whether the RuntimeScale's `Ready` condition was written for an older spec than the one it has (its
    `observedGeneration` below `metadata.generation`, which the HPA's every write of `spec.replicas` raises), or
    not at all: no leader has answered the HPA's last ask, whatever READY says. A leader answers within a round
    trip (the status carries the generation it was written for, so a new spec always writes it); only the
    leader writes it, so with no leader, or one whose bridge does not run, it stays as it was, READY True
    included, and this is what the other replicas can tell from the object alone. A RuntimeScale without a
    generation (none is served without one) is not judged."""
    generation = (scale.get("metadata") or {}).get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool):
        return False
    condition = _find((scale.get("status") or {}).get("conditions") or [], READY)
    observed = None if condition is None else condition.get("observedGeneration")
    return not isinstance(observed, int) or observed < generation


def desired_status(
    scale: Mapping[str, Any], deployment: Mapping[str, Any] | None, outcome: Verdict, now: str, *,
    selects_pods: bool = True,
) -> JSON:
    """The RuntimeScale's whole `status` as it should be; `now` is an RFC 3339 time for a changed condition.

    `selects_pods` False (a duplicate, whose runtime another RuntimeScale owns; or a runtime with an autoscaler
    class, whose class `hpa` has the controller's own CPU HPA on the Deployment): no `selector`, removed if one was
    written. The HPA controller refuses to act for any HPA whose pods another HPA's scale also selects
    (`AmbiguousSelector`), so a RuntimeScale advertising the runtime's selector stopped the other HPA too (the
    owner's, or the controller's, whose runtime the conflict says is left alone); without one only its own HPA
    stops ("selector is required")."""
    old = scale.get("status") or {}
    condition: JSON = {"type": READY, "status": "True" if outcome.ready else "False", "reason": outcome.reason,
                 "message": outcome.message, "lastTransitionTime": now}
    generation = (scale.get("metadata") or {}).get("generation")
    if isinstance(generation, int):
        condition["observedGeneration"] = generation
    previous = _find(old.get("conditions") or [], READY)
    if previous is not None and previous.get("status") == condition["status"] and previous.get("lastTransitionTime"):
        condition["lastTransitionTime"] = previous["lastTransitionTime"]
    status: JSON = {
        "replicas": replicas_of(deployment, "status") or 0,
        "selector": selector_string((deployment or {}).get("spec", {}).get("selector")),
        "conditions": [condition, *(c for c in old.get("conditions") or [] if c.get("type") != READY)],
    }
    if isinstance(generation, int):
        status["observedGeneration"] = generation
    if deployment is None and isinstance(old.get("selector"), str) and old["selector"]:
        status["selector"] = old["selector"]  # a Deployment gone for a moment does not blind the HPA
    if not selects_pods:
        status["selector"] = None  # a merge patch's null: removed
    return status


def _find(conditions: Sequence[Mapping[str, Any]], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == kind), None)
