"""Which answers the scrape source refuses as another pod's (`answered_pod`): those whose exporter names a pod that
is not the one scraped for, and no others (an exporter that names none is read as always, and so is any answer
for a targets file's pods, whose names are the file's own)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.sources.answered_pod import names_another_pod
from autoscaler.sources.base import PodTarget
from exporter.pod_identity import PodIdentity

NAMES = st.sampled_from(["triton-a", "triton-b", "onnx-new"])
NAMESPACES = st.sampled_from(["modelmesh-serving", "team-b"])
UIDS = st.sampled_from(["0b3c2a4e-5f61-4c1d-9e7a-2f0d6b8c9a11", "5d1e7c3a-1111-4c1d-9e7a-2f0d6b8c9a22"])
ANSWERS = st.none() | st.builds(PodIdentity, st.none() | NAMESPACES, st.none() | NAMES, st.none() | UIDS)


@given(ANSWERS, NAMESPACES, NAMES, UIDS)
def test_an_answer_is_refused_exactly_when_what_it_names_is_not_the_pod(
    answered: PodIdentity | None, namespace: str, name: str, uid: str,
) -> None:
    pod = PodTarget(name=name, ready=True, url="http://10.0.0.7:9187/metrics", uid=uid)
    if answered is None or answered.labels() == {}:
        expected = False  # an exporter that names no pod: read as always
    elif answered.uid is not None:
        expected = answered.uid != uid  # the uid decides: a pod created again under the name is another pod
    else:
        expected = answered.name not in (None, name) or answered.namespace not in (None, namespace)
    assert names_another_pod(answered, namespace, pod) is expected


@given(ANSWERS, NAMESPACES, NAMES)
def test_a_targets_files_pods_are_never_refused(answered: PodIdentity | None, namespace: str, name: str) -> None:
    assert not names_another_pod(answered, namespace, PodTarget(name=name, ready=True, url="http://h:9187/metrics"))
