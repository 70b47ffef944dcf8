"""Discovery's inventory finds each runtime's pods through an index on one label of its selector
(`kube_objects.build_inventory`), not by testing every pod of the namespace against every runtime: on any mix
of selectors, labels and namespaces it must find exactly the pods a label selector selects."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
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
