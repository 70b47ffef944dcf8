"""The `fieldSelector` of a request, read as kube-apiserver reads it for the external metrics API.

custom-metrics-apiserver lists external metrics with apiserver's `handlers.ListResource`: it decodes the
`ListOptions` of the query first, parsing `fieldSelector` with `k8s.io/apimachinery/pkg/fields.ParseSelector`,
then converts each field through its scheme, which has no conversion for external metrics and so takes only
`metadata.name` and `metadata.namespace` (`runtime.DefaultMetaV1FieldSelectorConversion`). Either failure is a
400 `BadRequest` carrying Go's error; a selector on those two fields is taken and changes nothing (an external
metric value has no metadata to match). The adapter ignored the parameter: `fieldSelector=foo` or
`fieldSelector=spec.nodeName=x` was served as if it selected something.
"""

from __future__ import annotations

import pytest

from tests.api.builders import KEY
from tests.api.test_request_options import Client, answer, client

__all__ = ["client"]

METRIC = (f"/apis/external.metrics.k8s.io/v1beta1/namespaces/{KEY.namespace}/modelmesh_desired_replicas"
          f"?labelSelector=deployment%3D{KEY.deployment}")
KNOWN = 'is not a known field selector: only "metadata.name", "metadata.namespace"'


@pytest.mark.parametrize(("option", "said"), [
    ("fieldSelector=foo", "invalid selector: 'foo'; can't understand 'foo'"),
    ("fieldSelector=metadata.name%3Dx,foo", "invalid selector: 'metadata.name=x,foo'; can't understand 'foo'"),
    # Terms are read in sorted order: 'status...' before 'zz', and any that does not parse is named before a
    # field that parses but is not known.
    ("fieldSelector=zz,status.phase%3DRunning", "invalid selector: 'zz,status.phase=Running'; can't understand 'zz'"),
    ("fieldSelector=metadata.name%3Da%3Db", "invalid field selector: unescaped character in value: 61"),
    ("fieldSelector=metadata.name%3Da,b", "invalid selector: 'metadata.name=a,b'; can't understand 'b'"),
    ("fieldSelector=metadata.name%3Da%5Cx", "invalid field selector: invalid escape sequence: \\x"),
    ("fieldSelector=metadata.name%3Da%5C", "invalid field selector: invalid escape sequence: \\"),
    ("fieldSelector=spec.nodeName%3Dnode-1", f'"spec.nodeName" {KNOWN}'),
    ("fieldSelector=status.phase%21%3DRunning", f'"status.phase" {KNOWN}'),
    ("fieldSelector=metadata.name%3Dx,metadata.uid%3D%3Dy", f'"metadata.uid" {KNOWN}'),
    ("fieldSelector=%3Dx", f'"" {KNOWN}'),
    ("fieldSelector=Metadata.Name%3Dx", f'"Metadata.Name" {KNOWN}'),
    ("fieldSelector=spec.x%0A%3D1", f'"spec.x\\n" {KNOWN}'),
    # Decoded before `watch` is looked at, as apiserver decodes every list option first.
    ("fieldSelector=foo&watch=true", "invalid selector: 'foo'; can't understand 'foo'"),
    ("fieldSelector=foo&fieldSelector=metadata.name%3Dx", "invalid selector: 'foo'; can't understand 'foo'"),
])
async def test_a_field_selector_kube_apiserver_refuses_is_a_bad_request_in_its_words(
        client: Client, option: str, said: str) -> None:
    status, _, body = await answer(client, f"{METRIC}&{option}")
    assert (status, body["kind"], body.get("reason"), body.get("code")) == (400, "Status", "BadRequest", 400), body
    assert body["message"] == said


async def test_an_integer_option_that_does_not_parse_is_said_before_the_field_selector(client: Client) -> None:
    """The integers fail while the query becomes a versioned `ListOptions`; the selectors only when that is
    converted to the internal one."""
    status, _, body = await answer(client, f"{METRIC}&fieldSelector=foo&limit=abc")
    assert (status, body["message"]) == (400, 'query parameter limit: strconv.ParseInt: parsing "abc": invalid syntax')


@pytest.mark.parametrize("option", [
    "fieldSelector=", "fieldSelector", "fieldSelector=,", "fieldSelector=metadata.name%3Dwhatever",
    "fieldSelector=metadata.namespace%3Dother", "fieldSelector=metadata.name%21%3Dx",
    "fieldSelector=metadata.name%3D%3Dx", "fieldSelector=metadata.name%3Da%5C%2Cb%5C%3Dc%5C%5C",
    "fieldSelector=metadata.name%3D,metadata.namespace%3Dml", "fieldSelector=metadata.name%3Dx&fieldSelector=foo",
    "FieldSelector=foo", "fieldselector=foo",
])
async def test_a_field_selector_on_metadata_is_taken_and_changes_nothing(client: Client, option: str) -> None:
    """`metadata.name` and `metadata.namespace` pass apiserver's conversion, and the external metrics REST
    storage never reads the field selector: the answer is the one without it. Keys are case-sensitive, as Go's
    `url.Values` are, and the first value decides."""
    plain = await answer(client, METRIC)
    status, content_type, body = await answer(client, f"{METRIC}&{option}")
    assert (status, content_type, body) == plain
    assert plain[0] == 200


async def test_a_field_selector_longer_than_a_label_selector_may_be_is_refused_unread(client: Client) -> None:
    """It was parsed character by character whatever its length (the request line's 8 KiB: 3 to 5 ms of the one
    serving worker a request, HPAs' requests waiting behind it); it is held to the label selector's 1,024."""
    status, _, body = await answer(client, f"{METRIC}&fieldSelector=metadata.name%3D{'a' * 2000}")
    assert (status, body.get("reason")) == (400, "BadRequest"), body
    assert body["message"].startswith("fieldSelector is longer than 1024 characters"), body["message"]
    status, _, body = await answer(client, f"{METRIC}&fieldSelector=metadata.name%3D{'a' * 900}")
    assert status == 200, body
