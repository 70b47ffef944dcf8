"""The exporter says which pod it runs in: `modelmesh_exporter_pod_info{namespace,pod,uid} 1` from the downward
API's variables (manifests/examples/exporter-sidecar-patch.yaml), and nothing when they are not set (a sidecar
patched before them: the adapter then reads it as before). Real exporter processes, their /metrics linted by
promtool as Prometheus would read it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from exporter import names
from exporter.pod_identity import PodIdentity
from tests.exporter.test_exporter_app import promtool_findings, samples
from tests.support.processes import free_port, http_get, running

POD = {"EXPORTER_POD_NAME": "modelmesh-serving-triton-7d9f8-x2x4q", "EXPORTER_POD_NAMESPACE": "modelmesh-serving",
       "EXPORTER_POD_UID": "0b3c2a4e-5f61-4c1d-9e7a-2f0d6b8c9a11"}


def served(tmp_path: Path, variables: dict[str, str]) -> tuple[str, str]:
    """(/metrics, the log) of a real exporter started with `variables` (and no other EXPORTER_* of this shell)."""
    port = free_port()
    inherited = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    env = {**inherited, "EXPORTER_LISTEN": f"127.0.0.1:{port}", "EXPORTER_NO_GPU": "true",
           "EXPORTER_MODELMESH_URL": "http://127.0.0.1:1/metrics", **variables}
    log = tmp_path / "exporter.log"
    with running(["exporter.cli"], f"http://127.0.0.1:{port}/healthz", log, env=env):
        status, body = http_get(f"http://127.0.0.1:{port}/metrics")
    assert status == 200, body
    return body, log.read_text()


def test_metrics_name_the_pod_the_downward_api_gives(tmp_path: Path) -> None:
    body, log = served(tmp_path, POD)
    assert promtool_findings(body) == (0, "")
    labels = (("namespace", "modelmesh-serving"), ("pod", "modelmesh-serving-triton-7d9f8-x2x4q"),
              ("uid", "0b3c2a4e-5f61-4c1d-9e7a-2f0d6b8c9a11"))
    assert samples(body)[(names.POD_INFO, labels)] == 1.0
    assert "is not a setting" not in log, log  # the variables are the exporter's own


def test_metrics_name_no_pod_without_the_variables(tmp_path: Path) -> None:
    body, _ = served(tmp_path, {})
    assert promtool_findings(body) == (0, "")
    assert names.POD_INFO not in body


def serving_line(log: str) -> str:
    [line] = [line for line in log.splitlines() if "serving on" in line]
    return line


def test_the_start_says_which_pod_the_exporter_names(tmp_path: Path) -> None:
    """Which pod an answer will name is what an operator checks first when the adapter refuses it (`other_pod`)."""
    _, log = served(tmp_path, POD)
    line = serving_line(log)
    assert (f"naming pod {POD['EXPORTER_POD_NAMESPACE']}/{POD['EXPORTER_POD_NAME']} (uid {POD['EXPORTER_POD_UID']}) "
            f"in {names.POD_INFO}") in line, line


def test_the_start_says_the_exporter_names_no_pod_and_what_that_means(tmp_path: Path) -> None:
    _, log = served(tmp_path, {})
    line = serving_line(log)
    assert "naming no pod" in line, line
    assert all(variable in line for variable in POD), line  # what to set
    assert "cannot tell" in line and "another pod" in line, line  # what it costs
    assert "mixed versions" in line, line  # and that it is not an error


def test_the_start_names_the_pod_settings_left_out(tmp_path: Path) -> None:
    """Name and namespace without the uid: a pod created again under the name is read as this one."""
    _, log = served(tmp_path, {k: v for k, v in POD.items() if k != "EXPORTER_POD_UID"})
    line = serving_line(log)
    assert f"naming pod {POD['EXPORTER_POD_NAMESPACE']}/{POD['EXPORTER_POD_NAME']} in" in line, line
    assert "without --pod-uid (EXPORTER_POD_UID)" in line, line
    assert "EXPORTER_POD_NAME)" not in line, line


@pytest.mark.parametrize(("variable", "value", "says"), [
    ("EXPORTER_POD_NAMESPACE", "Modelmesh_Serving", "EXPORTER_POD_NAMESPACE"),
    ("EXPORTER_POD_UID", "0b3c2a4e 5f61", "EXPORTER_POD_UID"),
])
def test_a_value_no_pod_could_have_is_refused_at_start_naming_the_variable(
    tmp_path: Path, variable: str, value: str, says: str,
) -> None:
    import subprocess

    from tests.exporter.test_exporter_process import exporter_command

    inherited = {k: v for k, v in os.environ.items() if not k.startswith("EXPORTER_")}
    done = subprocess.run([*exporter_command(), "--no-gpu"], capture_output=True, text=True, timeout=30,
                          check=False, env={**inherited, variable: value})
    assert done.returncode == 2, done.stderr
    assert "modelmesh-exporter: error:" in done.stderr and says in done.stderr, done.stderr
    assert "Traceback" not in done.stderr


_LABEL_TEXT = st.text(st.characters(codec="utf-8"), max_size=20)


@settings(max_examples=200, deadline=None)
@given(st.builds(PodIdentity, st.none() | _LABEL_TEXT, st.none() | _LABEL_TEXT, st.none() | _LABEL_TEXT))
def test_a_pod_read_back_from_its_labels_is_the_pod_published(pod: PodIdentity) -> None:
    """What the adapter reads (`from_labels`) is what the exporter published (`labels`), an empty value as none."""
    def given_or_none(value: str | None) -> str | None:
        return value or None

    assert PodIdentity.from_labels(pod.labels()) == PodIdentity(
        given_or_none(pod.namespace), given_or_none(pod.name), given_or_none(pod.uid))
