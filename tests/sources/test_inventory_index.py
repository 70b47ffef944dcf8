"""Discovery's inventory finds each runtime's pods through an index on one label of its selector
(`kube_objects.build_inventory`), not by testing every pod of the namespace against every runtime: on any mix
of selectors, labels and namespaces it must find exactly the pods a label selector selects."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget
from autoscaler.sources.kube_objects import PodRecord, RuntimeRecord, build_inventory

NAMESPACES = st.sampled_from(["modelmesh-serving", "team-b"])
LABELS = st.dictionaries(st.sampled_from(["name", "modelmesh-service", "app", "tier"]),
                         st.sampled_from(["a", "b", "c"]), max_size=4)


@settings(max_examples=300, deadline=None)
@given(
    pods=st.lists(st.tuples(NAMESPACES, LABELS), max_size=25),
    selectors=st.lists(st.tuples(NAMESPACES, LABELS), min_size=1, max_size=8),
)
def test_each_runtime_gets_exactly_the_pods_its_selector_selects(
    pods: list[tuple[str, dict[str, str]]], selectors: list[tuple[str, dict[str, str]]],
) -> None:
    records = [PodRecord(f"pod-{i:02d}", namespace, labels, True, f"10.0.0.{i}", None)
               for i, (namespace, labels) in enumerate(pods)]
    runtimes = {RuntimeKey(namespace, f"rt-{i}"): RuntimeRecord(RuntimeKey(namespace, f"rt-{i}"), selector)
                for i, (namespace, selector) in enumerate(selectors)}

    inventory = build_inventory(runtimes, records, 9187)

    for key, runtime in runtimes.items():
        # A label selector (matchLabels) selects a pod of its namespace that has every one of its labels.
        expected = [pod.name for pod in records if pod.namespace == key.namespace
                    and runtime.selector.items() <= pod.labels.items()]
        assert [target.name for target in inventory[key].pods] == expected, (key, runtime.selector)


OPTIONAL_TEXT = st.none() | st.text(alphabet="0123456789abcdef-", min_size=1, max_size=12)


@settings(max_examples=200, deadline=None)
@given(
    pods=st.lists(st.tuples(st.booleans(), st.none() | st.sampled_from(["10.0.0.7", "fd00::7"]),
                            st.none() | st.floats(0, 2e9), st.none() | st.frozensets(st.sampled_from([8033, 9187])),
                            OPTIONAL_TEXT), max_size=6),
)
def test_each_target_carries_its_pods_own_facts(
    pods: list[tuple[bool, str | None, float | None, frozenset[int] | None, str | None]],
) -> None:
    """What the scrape source reads of a pod (its readiness, exporter URL, creation time, uid, or the exporter
    port it does not declare) is the pod's own: the targets are built field by field at every rebuild
    (`kube_objects._pod_target`), not through `PodTarget`'s constructor, which names each field."""
    key = RuntimeKey("modelmesh-serving", "rt")
    records = [PodRecord(f"pod-{i}", key.namespace, {"name": "rt"}, ready, ip, created, declared_ports=ports,
                         uid=uid) for i, (ready, ip, created, ports, uid) in enumerate(pods)]

    inventory = build_inventory({key: RuntimeRecord(key, {"name": "rt"})}, records, 9187)

    expected = []
    for pod in records:
        if pod.declared_ports is not None and 9187 not in pod.declared_ports:
            expected.append(PodTarget(name=pod.name, ready=pod.ready, url=None, created_at=pod.created_at,
                                      undeclared_exporter_port=9187, uid=pod.uid))
            continue
        host = None if pod.ip is None else f"[{pod.ip}]" if ":" in pod.ip else pod.ip
        url = None if host is None else f"http://{host}:9187/metrics"
        expected.append(PodTarget(name=pod.name, ready=pod.ready, url=url, created_at=pod.created_at, uid=pod.uid))
    assert list(inventory[key].pods) == expected
