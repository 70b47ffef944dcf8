"""Whether an exporter's answer is from the pod the adapter scraped it for, by the pod the exporter names.

The scrape source reaches each pod's exporter at the pod's IP, and an IP is given to another pod once its pod is
gone. When discovery still lists both pods, `shared_addresses` reads the address as the newest one's; but discovery
can list the old pod alone (its node lost, not yet marked NotReady; the new pod's namespace's watch behind, or a
namespace the adapter does not read), and only the exporter can then tell. It names its pod
(`modelmesh_exporter_pod_info`, `exporter.pod_identity`): an answer naming another pod is refused, as a failed
scrape is, and the pod scraped for holds its last good sample. An answer that names no pod (an exporter from before
the series, or a sidecar without the downward API's variables) is taken as always, so a rollout of mixed versions
keeps working. Only pods the Kubernetes API lists (they have a uid) are checked: a targets file's names are the
file's own, not necessarily the pods'.

The pod an exporter claims may be another tenant's (an IP goes to any namespace's next pod), and a runtime's /debug
and 503 are read by whoever may read that runtime's namespace: they name it only when it is of that namespace
(`claimed_pod`); the log names it whole.
"""

from __future__ import annotations

from typing import Final

from autoscaler.backend_said import quoted
from autoscaler.sources.base import PodTarget
from exporter.pod_identity import PodIdentity

REASON_OTHER_POD: Final = "other_pod"
"""A failed scrape's reason (`source_errors_total`, /debug): the exporter that answered names another pod."""
OTHER_NAMESPACE_POD: Final = "a pod of another namespace (the adapter's log names it)"
"""What a runtime's /debug and 503 say of a claimed pod of another namespace."""
UNPLACED_POD: Final = "a pod it names without its namespace (the adapter's log names it)"
"""What a runtime's /debug and 503 say of a claimed pod the exporter gives no namespace of: it may be any one's."""


def names_another_pod(answered: PodIdentity | None, namespace: str, pod: PodTarget) -> bool:
    """Whether `answered` (what the exporter said) is not `pod` of `namespace`: by uid when the exporter gives one
    (a pod created again under the name is another pod), else by namespace and name, each where given."""
    if answered is None or pod.uid is None:
        return False
    if answered.uid is not None:
        return answered.uid != pod.uid
    return answered.name not in (None, pod.name) or answered.namespace not in (None, namespace)


def claimed_pod(answered: PodIdentity, namespace: str | None = None) -> str:
    """The pod an exporter says it runs in, as the adapter says it: `pod 'NS/NAME (uid UID)'`, quoted and cut short
    (`backend_said`: a tenant's words). `namespace`: said to that namespace's runtimes (/debug, a 503 message),
    which name only a pod of that namespace; None: said in the log, which names any."""
    if namespace is None or answered.namespace == namespace:
        return f"pod {quoted(str(answered))}"
    return OTHER_NAMESPACE_POD if answered.namespace else UNPLACED_POD


def another_pod_said(url: str, answered: PodIdentity, namespace: str, pod: PodTarget, *, told: bool = False) -> str:
    """What the log (`told` false) and the runtime's /debug (`told`: the claimed pod named only where it is of
    `namespace`, `claimed_pod`) say of a refused answer: both pods, by what an operator looks them up with."""
    scraped = PodIdentity(namespace, pod.name, pod.uid)
    return (f"{url} answered for {claimed_pod(answered, namespace if told else None)}, not {scraped}: this pod's "
            f"IP was given to another pod, so what answers there is not this pod (its node lost and it not yet marked "
            f"NotReady, or a pod watch behind); not counted, it holds its last good sample until it turns stale")
