"""Discovery's inventory finds each runtime's pods through indexes (`kube_objects.build_inventory`: by the
Deployment that controls a pod, and by the rarest label of the selector), not by testing every pod of the
namespace against every runtime: on any mix of selectors, labels, owners and namespaces it must find exactly
the pods the plain matching finds (`plain_inventory`), and a rebuild must read about as many labels as there
are pods and runtimes, whatever labels a tenant gives its runtimes."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget
from autoscaler.sources.kube_objects import PodRecord, RuntimeRecord, build_inventory
from tests.sources.plain_inventory import plain_inventory

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


DEPLOYMENTS = st.sampled_from(["rt-0", "rt-1", "rt-2"])
POD = st.tuples(
    NAMESPACES, LABELS,
    st.sampled_from(["orphan", "replicaset", "other controller"]), DEPLOYMENTS,
    st.booleans(), st.none() | st.sampled_from(["10.0.0.7", "fd00::7"]),
    st.none() | st.frozensets(st.sampled_from([8033, 9187])), st.frozensets(st.sampled_from([8033, 9187])),
)


@settings(max_examples=400, deadline=None)
@given(
    pods=st.lists(POD, max_size=25),
    runtimes=st.dictionaries(st.tuples(NAMESPACES, DEPLOYMENTS), LABELS, min_size=1, max_size=6),
    scheme=st.sampled_from(["auto", "http", "https"]),
)
def test_the_inventory_is_the_one_the_plain_matching_finds(
    pods: list[tuple[str, dict[str, str], str, str, bool, str | None, frozenset[int] | None, frozenset[int]]],
    runtimes: dict[tuple[str, str], dict[str, str]], scheme: str,
) -> None:
    """Owners included: a pod its runtime's ReplicaSet controls, one no controller owns (adopted where the
    selector matches), one another controller owns (never a runtime's), on runtimes whose selectors may be
    empty, share labels, or select another runtime's pods."""
    records = [PodRecord(f"pod-{i:02d}", namespace, labels, ready, ip, float(i),
                         deployment=deployment if owner == "replicaset" else None, declared_ports=ports,
                         controlled=owner != "orphan", uid=f"uid-{i}", https_ports=https & (ports or frozenset()))
               for i, (namespace, labels, owner, deployment, ready, ip, ports, https) in enumerate(pods)]
    records_by_key = {RuntimeKey(namespace, name): RuntimeRecord(RuntimeKey(namespace, name), selector, len(selector))
                      for (namespace, name), selector in runtimes.items()}

    assert build_inventory(records_by_key, records, 9187, scheme) == plain_inventory(
        records_by_key, records, 9187, scheme)


class CountedLabels(Mapping[str, str]):
    """A pod's labels that count every read of one, as the CPU a rebuild spends grows with them."""

    reads = 0

    def __init__(self, labels: dict[str, str]) -> None:
        self._labels = labels

    def __getitem__(self, key: str) -> str:
        CountedLabels.reads += 1
        return self._labels[key]

    def __iter__(self) -> Iterator[str]:
        CountedLabels.reads += len(self._labels)
        return iter(self._labels)

    def __len__(self) -> int:
        return len(self._labels)


N = 1_000
NS = "tenant-b"


def _shared_first_label() -> tuple[dict[RuntimeKey, RuntimeRecord], list[PodRecord]]:
    """A tenant's zero-replica Deployments all selecting `a: x` and their own `z`, and pods labelled `a: x` no
    controller owns: every pod has the selectors' first label, none is any runtime's."""
    keys = [RuntimeKey(NS, f"d{i}") for i in range(N)]
    return ({key: RuntimeRecord(key, {"a": "x", "z": str(i)}, 0) for i, key in enumerate(keys)},
            [PodRecord(f"p{j}", NS, CountedLabels({"a": "x", "z": "none"}), True, f"10.0.{j // 250}.{j % 250}", 1.0)
             for j in range(N)])


def _one_selector_for_all() -> tuple[dict[RuntimeKey, RuntimeRecord], list[PodRecord]]:
    """Deployments that all select `a: x`, each running one pod (its ReplicaSet's): every pod matches every
    selector, and each is one runtime's."""
    keys = [RuntimeKey(NS, f"d{i}") for i in range(N)]
    return ({key: RuntimeRecord(key, {"a": "x"}, 1) for key in keys},
            [PodRecord(f"{key.deployment}-7c9d-{i}", NS, CountedLabels({"a": "x", "pod-template-hash": "7c9d"}), True,
                       f"10.0.{i // 250}.{i % 250}", 1.0, deployment=key.deployment, controlled=True)
             for i, key in enumerate(keys)])


def _modelmesh() -> tuple[dict[RuntimeKey, RuntimeRecord], list[PodRecord]]:
    """modelmesh-serving's shape: `modelmesh-service` and each runtime's `name`, as `bench_discovery.py`."""
    keys = [RuntimeKey(NS, f"modelmesh-serving-rt{i}") for i in range(N)]
    selectors = {key: {"modelmesh-service": "modelmesh-serving", "name": key.deployment} for key in keys}
    return ({key: RuntimeRecord(key, selectors[key], 1) for key in keys},
            [PodRecord(f"{key.deployment}-0", NS, CountedLabels(selectors[key]), True, f"10.0.{i // 250}.{i % 250}",
                       1.0) for i, key in enumerate(keys)])


@pytest.mark.parametrize("fleet", [_shared_first_label, _one_selector_for_all, _modelmesh])
def test_a_rebuild_reads_about_as_many_labels_as_there_are_pods_whatever_the_selectors(
    fleet: Callable[[], tuple[dict[RuntimeKey, RuntimeRecord], list[PodRecord]]],
) -> None:
    """Testing the pods that share one label of a selector (its `name`, else its first key) against it read a
    tenant's 3,000 pods for each of its 3,000 Deployments, `{a: x, z: <i>}`: 5 s of CPU at every rebuild."""
    runtimes, pods = fleet()
    CountedLabels.reads = 0

    inventory = build_inventory(runtimes, pods, 9187)

    assert CountedLabels.reads <= 10 * (len(pods) + len(runtimes)), CountedLabels.reads
    assert sum(len(found.pods) for found in inventory.values()) == sum(r.replicas or 0 for r in runtimes.values())
