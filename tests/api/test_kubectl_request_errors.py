"""Malformed requests as an operator debugging an HPA sees them: the real `kubectl get --raw` against the API
behind its guarded TLS listener. Each answer is a Kubernetes `Status` whose reason is one of metav1's
StatusReasons (kubectl prints it as `Error from server (REASON): MESSAGE`, and client-go's `IsBadRequest` and
friends test it), and whose message says what to write instead.

Before: a URL over the request-line limit was `Error from server (RequestHeaderFieldsTooLarge): request line or
header fields too large`, a reason no Kubernetes client knows, and a message that named no limit and no cause;
a path one segment short (no namespace, no deployment) was a bare "could not find the requested resource".
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.api import handlers
from autoscaler.api.app import build_api_app
from autoscaler.api.status import REASONS, status_body
from autoscaler.model import RuntimeKey
from exporter.log_limit import LogLimiter
from tests.api.builders import DEPLOYMENT, NAMESPACE, Pki, refresher_with, runtime_view
from tests.api.conftest import listening
from tests.support.kubectl import get_raw, kubectl_error, write_kubeconfig

GROUP_VERSION = "/apis/external.metrics.k8s.io/v1beta1"
METRIC = f"{GROUP_VERSION}/namespaces/{NAMESPACE}/modelmesh_desired_replicas"

METAV1_REASONS = frozenset({
    "Unauthorized", "Forbidden", "NotFound", "AlreadyExists", "Conflict", "Gone", "Invalid", "ServerTimeout",
    "Timeout", "TooManyRequests", "BadRequest", "MethodNotAllowed", "NotAcceptable", "RequestEntityTooLarge",
    "UnsupportedMediaType", "InternalError", "Expired", "ServiceUnavailable",
})
"""The `StatusReason` constants of k8s.io/apimachinery/pkg/apis/meta/v1/types.go (plus `StatusReasonUnknown`,
the empty string, which a Status leaves out)."""


def test_every_reason_the_api_gives_is_a_kubernetes_status_reason() -> None:
    assert set(REASONS.values()) <= METAV1_REASONS
    for code in (*REASONS, 413, 418, 431, 502, 504):
        reason = status_body(code, "m").get("reason")
        assert reason is None or reason in METAV1_REASONS, (code, reason)
    assert status_body(431, "m")["code"] == 431  # the reason clarifies the code; it does not replace it


@given(st.integers(400, 599))
def test_any_error_code_keeps_its_code_and_has_a_kubernetes_reason_or_none(code: int) -> None:
    body = status_body(code, "m")
    assert (body["kind"], body["status"], body["code"]) == ("Status", "Failure", code)
    assert body.get("reason", "") in METAV1_REASONS | {""}
    assert body.get("reason") != "" and (code < 500 or body["reason"] in METAV1_REASONS)


def test_codes_kubernetes_has_no_reason_for_are_said_as_kubernetes_says_them() -> None:
    """apimachinery's `NewGenericServerResponse`: no reason (StatusReasonUnknown) for an unknown 4xx,
    InternalError for an unknown 5xx, Timeout for 504."""
    assert "reason" not in status_body(418, "m")
    assert status_body(502, "m")["reason"] == "InternalError"
    assert status_body(504, "m")["reason"] == "Timeout"


async def test_a_selector_over_the_line_limit_is_a_bad_request_that_names_the_limit(kubeconfig: Path) -> None:
    said = await kubectl_error(kubeconfig, f"{METRIC}?labelSelector=deployment%3D{'a' * 9000}")
    assert said.startswith("Error from server (BadRequest): "), said
    assert "8190 bytes" in said and "labelSelector" in said, said


async def test_a_metric_path_without_a_namespace_says_where_metrics_are(kubeconfig: Path) -> None:
    said = await kubectl_error(kubeconfig, f"{GROUP_VERSION}/modelmesh_desired_replicas")
    assert said.startswith("Error from server (NotFound): "), said
    assert f"{GROUP_VERSION}/namespaces/<namespace>/<metric>?labelSelector=deployment=<Deployment name>" in said, said


async def test_another_version_of_the_group_names_the_one_served(kubeconfig: Path) -> None:
    said = await kubectl_error(kubeconfig, "/apis/external.metrics.k8s.io/v1beta2/namespaces/ml/modelmesh_gpu_busy")
    assert said.startswith("Error from server (NotFound): "), said
    assert "external.metrics.k8s.io/v1beta1" in said, said


async def test_a_debug_path_without_a_deployment_says_what_it_takes(kubeconfig: Path) -> None:
    said = await kubectl_error(kubeconfig, f"/debug/runtimes/{NAMESPACE}")
    assert said.startswith("Error from server (NotFound): "), said
    assert "/debug/runtimes/<namespace>/<deployment>" in said, said


@pytest.mark.parametrize(("query", "reason", "says"), [
    ("", "BadRequest", "missing labelSelector"),
    ("?labelSelector=app%3Dtriton", "BadRequest", "unknown label 'app'"),
    ("?labelSelector=servingRuntime%3Dtriton", "BadRequest", "unknown label 'servingRuntime' (did you mean "
                                                             "'servingruntime'?)"),
    ("?labelSelector=deployments%3Dtriton", "BadRequest", "(did you mean 'deployment'?)"),
    ("?labelSelector=deployment%21%3Dtriton", "BadRequest", "labelSelector 'deployment!=triton' names no runtime: "
                                                           "'!=', 'notin'"),
    ("?labelSelector=deployment%3Etriton", "BadRequest", "unsupported requirement 'deployment>triton'"),
    ("?labelSelector=deployment%3D-triton-", "BadRequest", "invalid label value '-triton-' for 'deployment' in "
                                                          "labelSelector: must consist of alphanumeric"),
    (f"?labelSelector=deployment%3D{'t' * 64}", "BadRequest", "must be no more than 63 characters, not 64"),
    (f"?labelSelector=deployment%3D{DEPLOYMENT},deployment%3Dother", "BadRequest",
     f"labelSelector 'deployment={DEPLOYMENT},deployment=other' selects no runtime"),
    ("?labelSelector=deployment%20in%20(a,b)", "BadRequest", "labelSelector 'deployment in (a,b)' names 2 different "
                                                            "runtimes"),
    ("?labelSelector=deployment%3Dnope", "NotFound", f"runtime {NAMESPACE}/nope is not known"),
])
async def test_bad_selectors_say_what_to_write(kubeconfig: Path, query: str, reason: str, says: str) -> None:
    said = await kubectl_error(kubeconfig, METRIC + query)
    assert said.startswith(f"Error from server ({reason}): "), said
    assert says in said, said
    if reason == "BadRequest":
        assert "'deployment=<Deployment name>' or 'servingruntime=<ServingRuntime name>'" in said, said


@pytest.mark.parametrize(("query", "says"), [
    ("&fieldSelector=spec.nodeName%3Dnode-1",
     '"spec.nodeName" is not a known field selector: only "metadata.name", "metadata.namespace"'),
    ("&fieldSelector=nodeName", "invalid selector: 'nodeName'; can't understand 'nodeName'"),
])
async def test_a_field_selector_kube_apiserver_refuses_is_refused_in_its_words(kubeconfig: Path, query: str,
                                                                              says: str) -> None:
    """A `fieldSelector` was ignored and the metric served as if it had selected something; kube-apiserver's
    list handler answers 400 with `fields.ParseSelector`'s or the field conversion's error."""
    said = await kubectl_error(kubeconfig, f"{METRIC}?labelSelector=deployment%3D{DEPLOYMENT}{query}")
    assert said == f"Error from server (BadRequest): {says}"


async def test_selector_requirements_hold_together_as_kubernetes_ands_them(kubeconfig: Path) -> None:
    """`deployment in (a,b),deployment=a` selects `a` in Kubernetes (every requirement must hold); it was refused
    as naming 2 different runtimes."""
    code, said = await asyncio.to_thread(
        get_raw, kubeconfig, f"{METRIC}?labelSelector=deployment%20in%20(other,{DEPLOYMENT}),deployment%3D{DEPLOYMENT}")
    assert code == 0, said
    assert said["items"][0]["metricLabels"]["deployment"] == DEPLOYMENT


async def test_an_unknown_metric_lists_the_served_ones(kubeconfig: Path) -> None:
    said = await kubectl_error(kubeconfig, f"{GROUP_VERSION}/namespaces/{NAMESPACE}/modelmesh_gpu?labelSelector="
                                           f"deployment%3D{DEPLOYMENT}")
    assert said.startswith("Error from server (NotFound): "), said
    assert "available: modelmesh_desired_replicas, modelmesh_gpu_busy" in said, said


async def test_a_runtime_asked_in_the_wrong_namespace_is_placed_in_the_log_not_the_answer(
    kubeconfig: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator learns where the runtime is; the client (a tenant allowed in one namespace) learns nothing
    of the others. Asked twice, the log says it once."""
    caplog.set_level(logging.INFO, logger="autoscaler.api.handlers")
    monkeypatch.setattr(handlers, "_ELSEWHERE_LOG", LogLimiter(600.0))  # another test may have asked it
    for _ in range(2):
        said = await kubectl_error(kubeconfig, f"{GROUP_VERSION}/namespaces/default/modelmesh_desired_replicas"
                                               f"?labelSelector=deployment%3D{DEPLOYMENT}")
        assert said.startswith("Error from server (NotFound): "), said
        # the same answer as for a name known nowhere: nothing tells that it exists elsewhere
        unknown = await kubectl_error(kubeconfig, f"{GROUP_VERSION}/namespaces/default/modelmesh_desired_replicas"
                                                  "?labelSelector=deployment%3Dnope")
        assert said == unknown.replace("nope", DEPLOYMENT), (said, unknown)
    placed = [r.getMessage() for r in caplog.records if "the adapter knows" in r.getMessage()]
    assert placed == [f"404 for runtime '{DEPLOYMENT}' in namespace 'default': the adapter knows '{DEPLOYMENT}' "
                      f"in namespace {NAMESPACE}"], placed


async def test_a_runtime_known_in_many_namespaces_is_placed_in_the_first_three_and_a_count(
    pki: Pki, tmp_path: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The line named three namespaces and then "...": how many more, the operator could not tell."""
    caplog.set_level(logging.INFO, logger="autoscaler.api.handlers")
    monkeypatch.setattr(handlers, "_ELSEWHERE_LOG", LogLimiter(600.0))
    refresher = refresher_with(*(runtime_view(RuntimeKey(f"team-{n}", DEPLOYMENT)) for n in range(5)))
    async with listening(build_api_app(refresher, refresher.metrics), pki.server_context()) as port:
        kubeconfig = write_kubeconfig(tmp_path / "teams.kubeconfig", f"https://127.0.0.1:{port}")
        said = await kubectl_error(kubeconfig, f"{METRIC}?labelSelector=deployment%3D{DEPLOYMENT}")
    assert said.startswith("Error from server (NotFound): "), said
    placed = [r.getMessage() for r in caplog.records if "the adapter knows" in r.getMessage()]
    assert placed == [f"404 for runtime '{DEPLOYMENT}' in namespace '{NAMESPACE}': the adapter knows '{DEPLOYMENT}' "
                      "in namespaces team-0, team-1, team-2 and 2 more"], placed


async def test_a_runtime_asked_in_many_made_up_namespaces_is_one_log_line(
    kubeconfig: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reader allowed everywhere, guessing namespaces, wrote a line per namespace name it made up."""
    caplog.set_level(logging.INFO, logger="autoscaler.api.handlers")
    monkeypatch.setattr(handlers, "_ELSEWHERE_LOG", LogLimiter(600.0))
    for guess in range(12):
        said = await kubectl_error(kubeconfig, f"{GROUP_VERSION}/namespaces/guess-{guess}/modelmesh_desired_replicas"
                                               f"?labelSelector=deployment%3D{DEPLOYMENT}")
        assert said.startswith("Error from server (NotFound): "), said
    placed = [r.getMessage() for r in caplog.records if "the adapter knows" in r.getMessage()]
    assert len(placed) == 1 and "namespace 'guess-0'" in placed[0], placed


async def test_a_404_from_an_adapter_that_knows_no_runtime_says_so(pki: Pki, tmp_path: Path) -> None:
    """Discovery that finds nothing (labels that do not match, RBAC that lists nothing) looked, to the HPA, like
    one runtime missing."""
    refresher = refresher_with()  # refreshed, nothing found
    async with listening(build_api_app(refresher, refresher.metrics), pki.server_context()) as port:
        kubeconfig = write_kubeconfig(tmp_path / "empty.kubeconfig", f"https://127.0.0.1:{port}")
        said = await kubectl_error(kubeconfig, f"{METRIC}?labelSelector=deployment%3D{DEPLOYMENT}")
    assert said.startswith("Error from server (NotFound): "), said
    assert "the adapter knows no runtime at all" in said, said
