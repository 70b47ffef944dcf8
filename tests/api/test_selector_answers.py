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
    (f"deployment%21%3D{NAME}%0A", f"labelSelector 'deployment!={NAME}\\n' names no runtime"),
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
    (f"deployment%20in%20({NAME}%2Cother)", f"labelSelector 'deployment in ({NAME},other)' names 2 different "
                                            "runtimes; "),
    ("deployment%20in%20(a%2Cb%2Cc)", "labelSelector 'deployment in (a,b,c)' names 3 different runtimes; "),
    ("deployment%20in%20()", "empty value for 'deployment' in labelSelector; "),
    (f"deployment%20in%20({NAME}%2C)", "empty value for 'deployment' in labelSelector; "),
    ("deployment%20in%20(-x-)", "invalid label value '-x-' for 'deployment' in labelSelector: must consist of"),
    ("deployment%3Ex", "unsupported requirement 'deployment>x' in labelSelector"),
])
async def test_a_set_of_several_runtimes_says_how_many_as_equalities_do(client: Client, selector: str,
                                                                        says: str) -> None:
    """`in (a,b)` said "unsupported requirement" where `deployment=a,deployment=b` says the selector names 2
    different runtimes; it says the same now, and a set's empty or malformed value is named as an equality's."""
    status, _, body = await answer(client, f"{METRIC}?labelSelector={selector}")
    assert (status, body["kind"], body.get("reason")) == (400, "Status", "BadRequest"), body
    assert body["message"].startswith(says), body["message"]


@pytest.mark.parametrize("selector", [
    f"deployment%20in%20(other%2C{NAME}),deployment%3D{NAME}",
    f"deployment%20in%20(a%2C{NAME}),deployment%20in%20({NAME}%2Cc)",
    f"deployment%20in%20(a%2C{NAME}%2Cb),deployment%20in%20({NAME}%2Cb),deployment%20notin%20(b)",
    f"deployment%20in%20({NAME}%2Cother),deployment%21%3Dother",
    f"servingruntime%20in%20(triton%2Cother),deployment%3D{NAME}",
    "servingruntime%20in%20(triton%2Cother),servingruntime%21%3Dother",
    f"deployment%20in%20({NAME}%2Cunprefixed),servingruntime",
    f"deployment%3D{NAME},deployment", f"%0Adeployment%0A,deployment%3D{NAME}",
    # An empty value rules nothing out (apimachinery's parseExactValue and parseValues take ""): an HPA's
    # `NotIn` with `values: [""]` was refused as "empty value for 'deployment'".
    f"deployment%3D{NAME},deployment%21%3D", f"deployment%3D{NAME},deployment%20notin%20()",
    f"deployment%3D{NAME},servingruntime%20notin%20(%2Cother)",
])
async def test_requirements_all_hold_as_kubernetes_ands_them(client: Client, selector: str) -> None:
    """apimachinery's requirements are ANDed: `deployment in (a,b),deployment=a` selects `a`, and `!=`, `notin`
    and a key alone narrow what the others name. Each was refused ("names 2 different runtimes", or
    "unsupported requirement")."""
    status, _, body = await answer(client, f"{METRIC}?labelSelector={selector}")
    assert (status, body["kind"]) == (200, "ExternalMetricValueList"), body
    assert body["items"][0]["metricLabels"]["deployment"] == NAME


@pytest.mark.parametrize(("selector", "sent"), [
    ("deployment%3Da,deployment%3Db", "deployment=a,deployment=b"),
    ("deployment%20in%20(a%2Cb),deployment%20in%20(c%2Cd)", "deployment in (a,b),deployment in (c,d)"),
    (f"deployment%20in%20({NAME}),servingruntime%20in%20(x)", f"deployment in ({NAME}),servingruntime in (x)"),
    (f"deployment%3D{NAME},deployment%21%3D{NAME}", f"deployment={NAME},deployment!={NAME}"),
    (f"deployment%3D{NAME},%21deployment", f"deployment={NAME},!deployment"),
    ("deployment%3Dunprefixed,servingruntime", "deployment=unprefixed,servingruntime"),
    (f"deployment%3D{NAME},%21servingruntime", f"deployment={NAME},!servingruntime"),
    ("%21deployment", "!deployment"),
])
async def test_requirements_no_runtime_meets_together_select_none_and_say_so(client: Client, selector: str,
                                                                            sent: str) -> None:
    """A selector no runtime can meet is a 400, as one naming several runtimes or none is: it never names one,
    whatever the cluster holds. `deployment=a,deployment=b` said it named 2 different runtimes."""
    status, _, body = await answer(client, f"{METRIC}?labelSelector={selector}")
    assert (status, body["kind"], body.get("reason")) == (400, "Status", "BadRequest"), body
    assert body["message"].startswith(f"labelSelector {sent!r} selects no runtime: "), body["message"]
    assert body["message"].endswith("'deployment=<Deployment name>' or 'servingruntime=<ServingRuntime name>'")


@pytest.mark.parametrize(("selector", "sent"), [
    ("deployment%21%3Da", "deployment!=a"),
    ("deployment%20notin%20(a%2Cb)", "deployment notin (a,b)"),
    ("deployment", "deployment"),
    ("servingruntime", "servingruntime"),
    ("%21servingruntime", "!servingruntime"),
    ("deployment,servingruntime%21%3Dx", "deployment,servingruntime!=x"),
])
async def test_a_selector_of_narrowing_requirements_alone_says_it_names_no_runtime(client: Client, selector: str,
                                                                                  sent: str) -> None:
    """`deployment!=a` selects every runtime but `a`: the message says so and which forms name one, where it
    read "unsupported requirement" as if `!=` were unknown."""
    status, _, body = await answer(client, f"{METRIC}?labelSelector={selector}")
    assert (status, body["kind"], body.get("reason")) == (400, "Status", "BadRequest"), body
    assert body["message"].startswith(f"labelSelector {sent!r} names no runtime: '!=', 'notin'"), body["message"]
