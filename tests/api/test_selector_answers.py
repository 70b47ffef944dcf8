"""The labelSelector as a client sends it, read as `k8s.io/apimachinery/pkg/labels` reads it: its lexer's
whitespace is blank, tab, CR and LF, and `in (...)` is a set. A selector that still names one runtime is
served; one that does not is a 400 whose message shows what was sent, escaped as a Python literal, so that a
line break in it is seen (`'deployment=x\\n'`), not stripped away from the message that refuses it."""

from __future__ import annotations

import pytest

from tests.api.builders import KEY
from tests.api.test_request_options import Client, answer, client

__all__ = ["client"]

METRIC = f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{KEY.namespace}/modelmesh_desired_replicas"
NAME = KEY.deployment


@pytest.mark.parametrize("selector", [
    f"deployment%3D{NAME}%0A", f"%0Adeployment%3D{NAME}", f"deployment%3D{NAME}%0D", f"deployment%3D{NAME}%0D%0A",
    f"deployment%0A%3D%0D{NAME}", f"deployment%0Ain%0A({NAME}%0D)", f"deployment%3D{NAME}%0A,%0D%0Adeployment%3D{NAME}",
])
async def test_a_line_break_between_tokens_is_whitespace_as_kube_apiserver_reads_it(client: Client,
                                                                                    selector: str) -> None:
    """apimachinery's lexer skips ' ', '\\t', '\\r' and '\\n' alike: `deployment=x\\n` selects what
    `deployment=x` does. They were refused with a message quoting the requirement stripped of them, so that
    it read "unsupported requirement 'deployment=x'" for exactly what the user meant."""
    status, _, body = await answer(client, f"{METRIC}?labelSelector={selector}")
    assert (status, body["kind"]) == (200, "ExternalMetricValueList"), body


@pytest.mark.parametrize(("selector", "says"), [
    # Inside a value a line break is no whitespace but a character no label value holds.
    (f"deployment%3D{NAME}%0Bx", f"invalid label value '{NAME}\\x0bx' for 'deployment' in labelSelector"),
    (f"deployment%3D{NAME}%0Cx", f"invalid label value '{NAME}\\x0cx' for 'deployment' in labelSelector"),
    (f"deployment%3D{NAME}%0Ax", f"invalid label value '{NAME}\\nx' for 'deployment' in labelSelector"),
    (f"deployment%21%3D{NAME}%0A", f"unsupported requirement 'deployment!={NAME}\\n' in labelSelector"),
    (f"%0Bdeployment%3D{NAME}", f"unsupported requirement '\\x0bdeployment={NAME}' in labelSelector"),
    (f"deployment%3D{NAME},%0Bapp", "unsupported requirement '\\x0bapp' in labelSelector"),
    ("%0B", "unsupported requirement '\\x0b' in labelSelector"),
])
async def test_a_refusal_shows_the_requirement_as_sent_with_its_control_characters_escaped(
        client: Client, selector: str, says: str) -> None:
    status, _, body = await answer(client, f"{METRIC}?labelSelector={selector}")
    assert (status, body["kind"], body.get("reason")) == (400, "Status", "BadRequest"), body
    assert body["message"].startswith(says), body["message"]


@pytest.mark.parametrize("selector", [
    f"deployment%20in%20({NAME}%2C{NAME})", f"deployment%20in%20({NAME}%2C%20{NAME}%2C{NAME})",
    f"deployment%20in%20({NAME}),deployment%3D{NAME}",
])
async def test_a_set_that_repeats_one_runtime_names_that_runtime(client: Client, selector: str) -> None:
    """apimachinery reads `in (x,x)` as the set {x}: one runtime. It was refused as an unsupported
    requirement."""
    status, _, body = await answer(client, f"{METRIC}?labelSelector={selector}")
    assert (status, body["kind"]) == (200, "ExternalMetricValueList"), body


@pytest.mark.parametrize(("selector", "says"), [
    (f"deployment%20in%20({NAME}%2Cother)", "labelSelector names 2 different runtimes; "),
    ("deployment%20in%20(a%2Cb%2Cc)", "labelSelector names 3 different runtimes; "),
    (f"deployment%20in%20({NAME}),servingruntime%20in%20(x)", "labelSelector names 2 different runtimes; "),
    ("deployment%20in%20()", "empty value for 'deployment' in labelSelector; "),
    (f"deployment%20in%20({NAME}%2C)", "empty value for 'deployment' in labelSelector; "),
    ("deployment%20in%20(-x-)", "invalid label value '-x-' for 'deployment' in labelSelector: must consist of"),
    (f"deployment%20notin%20({NAME})", f"unsupported requirement 'deployment notin ({NAME})' in labelSelector"),
])
async def test_a_set_of_several_runtimes_says_how_many_as_equalities_do(client: Client, selector: str,
                                                                        says: str) -> None:
    """`in (a,b)` said "unsupported requirement" where `deployment=a,deployment=b` says the selector names 2
    different runtimes; it says the same now, and a set's empty or malformed value is named as an equality's."""
    status, _, body = await answer(client, f"{METRIC}?labelSelector={selector}")
    assert (status, body["kind"], body.get("reason")) == (400, "Status", "BadRequest"), body
    assert body["message"].startswith(says), body["message"]
