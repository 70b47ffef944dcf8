"""Properties of the parsers that see raw client input: label selectors, metric names, request attributes."""

from __future__ import annotations

import re
import unicodedata
from urllib.parse import quote, unquote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.api.field_selector import BadFieldSelector, refuse_bad_field_selector
from autoscaler.api.identity import NonResourceAttributes, ResourceAttributes, request_attributes
from autoscaler.api.list_options import parse_int64_error
from autoscaler.api.selector import SelectorError, deployment_from_selector
from autoscaler.names import API_GROUP, SERVINGRUNTIME_DEPLOYMENT_PREFIX, ServedMetric, lookup_metric, runtime_labels

PROPERTIES = settings(max_examples=200, deadline=None)
LABEL_VALUE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$")

label_values = st.from_regex(LABEL_VALUE, fullmatch=True)
spaces = st.sampled_from(["", " ", "  ", "\t", "\n", "\r", "\r\n", " \n\t"])  # apimachinery's whitespace
anything = st.text(alphabet=st.characters(codec="utf-8"), max_size=80)
selector_like = st.lists(
    st.one_of(anything, st.sampled_from(["deployment", "servingruntime", "=", "==", "!=", ",", "(", ")", " in ",
                                         " notin ", "app", "x", "-", ".", "_"]), label_values),
    max_size=12).map("".join)


@PROPERTIES
@given(value=label_values, before=spaces, after=spaces, operator=st.sampled_from(["=", "=="]))
def test_an_equality_on_deployment_names_that_deployment(value: str, before: str, after: str, operator: str) -> None:
    assert deployment_from_selector(f"{before}deployment{before}{operator}{after}{value}{after}") == value


@PROPERTIES
@given(value=label_values, inner=spaces)
def test_a_one_value_set_means_the_same(value: str, inner: str) -> None:
    assert deployment_from_selector(f"deployment in ({inner}{value}{inner})") == value
    assert deployment_from_selector(f"servingruntime in ({value})") == SERVINGRUNTIME_DEPLOYMENT_PREFIX + value


@PROPERTIES
@given(values=st.lists(label_values, min_size=1, max_size=4), inner=spaces)
def test_a_set_names_as_many_runtimes_as_it_holds_different_values(values: list[str], inner: str) -> None:
    """apimachinery reads `in (...)` as a set: repeating a value names it once; different values are as many
    runtimes, refused as `deployment=a,deployment=b` is."""
    selector = f"deployment in ({','.join(inner + value + inner for value in values)})"
    if len(set(values)) == 1:
        assert deployment_from_selector(selector) == values[0]
    else:
        with pytest.raises(SelectorError, match=f"names {len(set(values))} different runtimes"):
            deployment_from_selector(selector)


# Runtime names whose Deployment name is still a label value (63 characters at most with its prefix)
LABELLED_RUNTIME = re.compile(
    rf"^[A-Za-z0-9]([-A-Za-z0-9_.]{{0,{61 - len(SERVINGRUNTIME_DEPLOYMENT_PREFIX)}}}[A-Za-z0-9])?$")


@PROPERTIES
@given(value=st.from_regex(LABELLED_RUNTIME, fullmatch=True))
def test_both_keys_naming_the_same_runtime_agree(value: str) -> None:
    selector = f"servingruntime={value},deployment={SERVINGRUNTIME_DEPLOYMENT_PREFIX}{value}"
    assert deployment_from_selector(selector) == SERVINGRUNTIME_DEPLOYMENT_PREFIX + value


def test_a_runtime_whose_deployment_name_is_no_label_value_is_named_by_servingruntime() -> None:
    # A 46-character runtime name makes a 64-character Deployment name: no label value can hold it, so a
    # `deployment=` requirement naming it is refused (as kube-apiserver refuses the selector), and
    # `servingruntime=` names it. Hypothesis found the pair the property above once generated.
    runtime = "0" * 46
    with pytest.raises(SelectorError, match="must be no more than 63 characters, not 64"):
        deployment_from_selector(f"servingruntime={runtime},deployment={SERVINGRUNTIME_DEPLOYMENT_PREFIX}{runtime}")
    assert deployment_from_selector(f"servingruntime={runtime}") == SERVINGRUNTIME_DEPLOYMENT_PREFIX + runtime


@PROPERTIES
@given(first=label_values, second=label_values)
def test_two_different_runtimes_required_together_select_none(first: str, second: str) -> None:
    """apimachinery ANDs requirements: no runtime is both `first` and `second`."""
    if first == second:
        return
    with pytest.raises(SelectorError, match="selects no runtime"):
        deployment_from_selector(f"deployment={first},deployment={second}")


POOL = ("a", "b", "c")
FRESH = ("fresh-1", "fresh-2")
"""Runtime names a selector never mentions: a selector that only narrows still matches these, as it would match
every runtime of a cluster but the few it rules out."""
UNIVERSE = tuple(prefix + name for name in POOL + FRESH for prefix in ("", SERVINGRUNTIME_DEPLOYMENT_PREFIX))


def matches(labels: dict[str, str], key: str, operator: str, values: list[str]) -> bool:
    """apimachinery's `Requirement.Matches` on a runtime's labels."""
    if operator in ("exists", "!"):
        return (key in labels) == (operator == "exists")
    if operator in ("=", "==", "in"):
        return key in labels and labels[key] in values
    return key not in labels or labels[key] not in values  # "!=", "notin"


REQUIREMENT_KEYS = st.sampled_from(["deployment", "servingruntime"])
REQUIREMENT_OPERATORS = st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!"])
NAMES_BY_KEY = {"servingruntime": st.sampled_from(POOL),
                "deployment": st.sampled_from(POOL + tuple(SERVINGRUNTIME_DEPLOYMENT_PREFIX + name for name in POOL))}
"""Built once, not at every draw: Hypothesis builds and validates a strategy again each time one is made."""
NAME_LISTS_BY_KEY = {key: st.lists(names, min_size=1, max_size=3) for key, names in NAMES_BY_KEY.items()}


@st.composite
def requirements(draw: st.DrawFn) -> tuple[str, str, list[str], str]:
    """A requirement on a runtime's labels: key, operator, values, and its text as a client might space it."""
    key = draw(REQUIREMENT_KEYS)
    names = NAMES_BY_KEY[key]
    operator = draw(REQUIREMENT_OPERATORS)
    blank = draw(spaces)
    if operator in ("exists", "!"):
        return key, operator, [], f"{blank}{'!' if operator == '!' else ''}{key}{blank}"
    if operator in ("in", "notin"):
        values = draw(NAME_LISTS_BY_KEY[key])
        return key, operator, values, f"{key} {operator}{blank}({','.join(blank + v + blank for v in values)})"
    value = draw(names)
    return key, operator, [value], f"{blank}{key}{blank}{operator}{blank}{value}{blank}"


@PROPERTIES
@given(chosen=st.lists(requirements(), min_size=1, max_size=4))
def test_a_selector_serves_the_one_runtime_that_meets_every_requirement(
        chosen: list[tuple[str, str, list[str], str]]) -> None:
    """Among runtimes of any names (those the selector mentions, and others), the one whose labels meet every
    requirement, as apimachinery matches them, is the one served; where none does, the 400 says the selector
    selects no runtime, and where several do (or every runtime but a few), it is refused otherwise."""
    selector = ",".join(text for *_, text in chosen)
    met = [name for name in UNIVERSE
           if all(matches(runtime_labels(name), key, op, values) for key, op, values, _ in chosen)]
    if len(met) == 1:
        assert deployment_from_selector(selector) == met[0], selector
        return
    with pytest.raises(SelectorError) as refused:
        deployment_from_selector(selector)
    assert ("selects no runtime" in str(refused.value)) == (not met), (selector, met, str(refused.value))
    assert repr(selector) in str(refused.value)


@PROPERTIES
@given(selector=st.one_of(anything, selector_like))
def test_any_text_names_one_valid_deployment_or_is_a_selector_error(selector: str) -> None:
    try:
        deployment = deployment_from_selector(selector)
    except SelectorError as error:
        assert "labelSelector" in str(error)
        return
    name = deployment.removeprefix(SERVINGRUNTIME_DEPLOYMENT_PREFIX)
    assert LABEL_VALUE.match(name) or LABEL_VALUE.match(deployment)


@PROPERTIES
@given(key=st.from_regex(r"^[a-z][a-z0-9]{0,10}$", fullmatch=True), value=label_values)
def test_any_other_label_is_refused_with_help(key: str, value: str) -> None:
    if key in ("deployment", "servingruntime"):
        return
    with pytest.raises(SelectorError, match="deployment=<Deployment name>"):
        deployment_from_selector(f"{key}={value}")


@PROPERTIES
@given(selector=st.one_of(anything, selector_like))
def test_a_refusal_quotes_no_control_character_as_it_is(selector: str) -> None:
    """Whatever was sent, a refusal's message shows a control character escaped (`\\n`, `\\x0b`), so that
    it is seen rather than acting on the terminal or the log line that shows the message."""
    try:
        deployment_from_selector(selector)
    except SelectorError as error:
        assert not any(unicodedata.category(char) == "Cc" for char in str(error)), str(error)


@PROPERTIES
@given(number=st.integers(min_value=-(2**63), max_value=2**63 - 1), zeros=st.integers(0, 3), plus=st.booleans())
def test_every_int64_go_parses_is_a_list_option_taken(number: int, zeros: int, plus: bool) -> None:
    sign = "-" if number < 0 else "+" if plus else ""
    assert parse_int64_error(f"{sign}{'0' * zeros}{abs(number)}") is None


@PROPERTIES
@given(text=st.one_of(anything, st.from_regex(r"[+-]?[0-9]{0,22}[a-z_. ]?[0-9]{0,3}", fullmatch=True)))
def test_any_other_text_is_refused_with_go_s_error(text: str) -> None:
    """`strconv.ParseInt(text, 10, 64)` takes an optional sign and ASCII digits in the int64 range, nothing
    else (Python's `int` also takes blanks, `_` and other scripts' digits)."""
    go_parses = re.fullmatch(r"[+-]?[0-9]+", text, re.ASCII) is not None and -(2**63) <= int(text) < 2**63
    said = parse_int64_error(text)
    assert (said is None) == go_parses, (text, said)
    if said is not None:
        assert said.startswith("strconv.ParseInt: parsing \"") and said.endswith(("invalid syntax",
                                                                                    "value out of range"))


def go_escape(value: str) -> str:
    """A field selector value as a client writes it (`fields.EscapeValue`): `\\`, `,` and `=` escaped."""
    return value.replace("\\", "\\\\").replace(",", "\\,").replace("=", "\\=")


metadata_terms = st.tuples(st.sampled_from(["metadata.name", "metadata.namespace"]),
                           st.sampled_from(["=", "==", "!="]), anything).map(lambda t: t[0] + t[1] + go_escape(t[2]))
taken_field_selectors = st.lists(metadata_terms, max_size=4).map(",".join)


@PROPERTIES
@given(selector=taken_field_selectors)
def test_a_field_selector_on_metadata_with_any_escaped_value_is_taken(selector: str) -> None:
    """kube-apiserver takes `metadata.name` and `metadata.namespace` whatever their value, once escaped as
    client-go's `fields.EscapeValue` escapes it (`a\\,b` is the value `a,b`)."""
    refuse_bad_field_selector(selector)


@PROPERTIES
@given(selector=taken_field_selectors, field=st.from_regex(r"[A-Za-z][A-Za-z0-9._/-]{0,30}", fullmatch=True),
       operator=st.sampled_from(["=", "==", "!="]), value=anything)
def test_a_term_on_any_other_field_is_refused_naming_it(selector: str, field: str, operator: str,
                                                        value: str) -> None:
    if field in ("metadata.name", "metadata.namespace"):
        return
    with pytest.raises(BadFieldSelector) as refused:
        refuse_bad_field_selector(",".join(filter(None, [selector, field + operator + go_escape(value)])))
    assert str(refused.value) == (f'"{field}" is not a known field selector: only "metadata.name", '
                                  '"metadata.namespace"')


@PROPERTIES
@given(selector=taken_field_selectors, term=anything.filter(lambda t: t and not set(t) & set("=,\\")))
def test_a_term_without_an_operator_is_refused_quoting_it_and_the_selector(selector: str, term: str) -> None:
    sent = ",".join(filter(None, [selector, term]))
    with pytest.raises(BadFieldSelector) as refused:
        refuse_bad_field_selector(sent)
    assert str(refused.value) == f"invalid selector: '{sent}'; can't understand '{term}'"


@PROPERTIES
@given(metric=st.sampled_from(list(ServedMetric)), flips=st.lists(st.booleans(), min_size=40, max_size=40))
def test_metric_names_match_in_any_case(metric: ServedMetric, flips: list[bool]) -> None:
    name = "".join(c.upper() if flip else c for c, flip in zip(metric.value, flips, strict=False))
    assert lookup_metric(name) is metric


@PROPERTIES
@given(name=anything)
def test_any_other_metric_name_is_unknown(name: str) -> None:
    found = lookup_metric(name)
    assert found is None or name.lower() == found.value


@PROPERTIES
@given(method=st.sampled_from(["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS", "BREW"]),
       segments=st.lists(st.one_of(anything, st.sampled_from(["apis", "api", API_GROUP, "v1beta1", "namespaces",
                                                               "keda", "v1", "runtimes", "debug"])), max_size=8))
def test_every_request_has_attributes(method: str, segments: list[str]) -> None:
    path = "/" + "/".join(quote(segment, safe="") for segment in segments)
    attributes = request_attributes(method, path)
    if isinstance(attributes, NonResourceAttributes):
        assert attributes.path == unquote(path) and attributes.verb == method.lower()
    else:
        assert isinstance(attributes, ResourceAttributes) and attributes.resource
        if attributes.group == API_GROUP:
            assert attributes.resource == attributes.resource.lower()
