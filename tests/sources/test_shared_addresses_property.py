"""The promise of `shared_addresses.superseded`, for any inventory: an exporter address is read for one pod at
most, the newest listed there when it can be told; a pod alone at its address, however many runtimes select it,
is always read."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.sources.base import PodTarget
from autoscaler.sources.shared_addresses import ScrapedPod, superseded

DEPLOYMENTS = ("x", "y")

pod = st.builds(
    PodTarget,
    name=st.sampled_from(["p0", "p1", "p2"]),
    ready=st.booleans(),
    url=st.sampled_from([None, "http://10.0.0.1:9187/metrics", "http://10.0.0.2:9187/metrics"]),
    created_at=st.sampled_from([None, 100.0, 101.0, 102.0]),
    uid=st.sampled_from([None, "u0", "u1", "u2", "u3"]),
)


@st.composite
def inventories(draw: st.DrawFn) -> list[ScrapedPod]:
    """Pods of namespaces a and b, each name once per namespace, each selected by one or both runtimes there."""
    pods = draw(st.lists(st.tuples(st.sampled_from(["a", "b"]), pod), max_size=6,
                         unique_by=lambda entry: (entry[0], entry[1].name)))
    return [(RuntimeKey(namespace, deployment), target) for namespace, target in pods
            for deployment in draw(st.sampled_from([("x",), ("y",), DEPLOYMENTS]))]


def _rivals(pods: list[ScrapedPod], entry: ScrapedPod) -> list[ScrapedPod]:
    """The other pods (not the same pod in another runtime) listed at `entry`'s address, as discovery lists them."""
    key, target = entry
    return [(other_key, other) for other_key, other in pods if other.url == target.url and other.uid is not None
            and (other_key.namespace, other.name) != (key.namespace, target.name)]


@settings(max_examples=300, deadline=None)
@given(inventories())
def test_an_address_is_read_for_one_pod_at_most_and_a_pod_alone_there_always(pods: list[ScrapedPod]) -> None:
    taken = superseded(pods)
    read: dict[str, set[tuple[str, str]]] = {}
    for key, target in pods:
        if (key, target.name) not in taken and target.url is not None and target.uid is not None:
            read.setdefault(target.url, set()).add((key.namespace, target.name))
    assert all(len(listed) == 1 for listed in read.values()), (taken, read)
    for key, target in pods:
        if target.url is None or target.uid is None or not _rivals(pods, (key, target)):
            assert (key, target.name) not in taken


@settings(max_examples=300, deadline=None)
@given(inventories())
def test_the_newest_pod_at_an_address_is_the_one_read(pods: list[ScrapedPod]) -> None:
    taken = superseded(pods)
    for key, target in pods:
        if target.url is None or target.uid is None or target.created_at is None:
            continue
        if all(other.created_at is None or other.created_at < target.created_at
               for _, other in _rivals(pods, (key, target))):
            assert (key, target.name) not in taken
