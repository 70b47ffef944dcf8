"""A forced `--exporter-scheme` warns about exactly the pods whose exporter port's name says the other scheme, once
for each pod while it lives, and never with `auto`."""

from __future__ import annotations

import logging

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.sources.forced_scheme import ForcedSchemeWarning
from autoscaler.sources.kube_objects import PodRecord, parse_pod

PORT = 9187
NAMES = st.sampled_from(["exporter", "https-exporter", "https", "metrics", "httpsx", None])
"""The exporter port's name; None: the pod declares no ports. At most 10 pods: a log line names 10."""


def pod(index: int, port_name: str | None) -> PodRecord:
    spec = {"containers": [{"name": "x"} if port_name is None else
                           {"name": "x", "ports": [{"name": port_name, "containerPort": PORT}]}]}
    record = parse_pod({"metadata": {"name": f"pod-{index}", "namespace": "ns"}, "spec": spec, "status": {}})
    assert record is not None
    return record


def warned(caplog: pytest.LogCaptureFixture, check: ForcedSchemeWarning, pods: list[PodRecord]) -> list[str]:
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        check.check(pods)
    return [record.getMessage() for record in caplog.records]


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(NAMES, max_size=10), forced=st.sampled_from(["http", "https"]))
def test_the_pods_whose_port_name_says_the_other_scheme_are_named_once(
        caplog: pytest.LogCaptureFixture, names: list[str | None], forced: str) -> None:
    pods = [pod(index, name) for index, name in enumerate(names)]
    check = ForcedSchemeWarning(PORT, forced)
    says_https = {"https-exporter", "https"}
    against = {f"ns/pod-{index}" for index, name in enumerate(names)
               if name is not None and (name in says_https) != (forced == "https")}
    lines = warned(caplog, check, pods)
    if not against:
        assert lines == []
        return
    (line,) = lines
    named = set(line.split(": ", 1)[1].split("; ")[0].split(", "))
    assert named == against, line
    assert f"--exporter-scheme {forced}" in line and "Leave --exporter-scheme at auto" in line
    assert warned(caplog, check, pods) == []  # said once
    assert warned(caplog, check, []) == [] and warned(caplog, check, pods) == lines  # gone, then made again


@settings(suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(NAMES, max_size=10))
def test_auto_never_warns(caplog: pytest.LogCaptureFixture, names: list[str | None]) -> None:
    pods = [pod(index, name) for index, name in enumerate(names)]
    assert warned(caplog, ForcedSchemeWarning(PORT, "auto"), pods) == []
