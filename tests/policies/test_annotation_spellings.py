"""Policy annotations have one documented spelling (`autoscaler.modelmesh.io/min-replicas`). The policy file's
key spelling under our prefix (`autoscaler.modelmesh.io/min_replicas`) was read before, so it still applies,
said once with the spelling to write; one written as people mistype it otherwise (`Min-Replicas`,
`minReplicas`, another prefix) is ignored as a bad value is, said once with the spelling to write and what
applies instead, and shown in /debug."""

from __future__ import annotations

import logging

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.policies.config import PolicyBook, parse_policy_book
from autoscaler.policies.policy_annotations import KEYS_LISTED, near_miss, read_as
from autoscaler.policies.policy_origins import policy_document, unknown_annotations
from autoscaler.policies.policy_values import FIELDS, show_value
from tests.policies.builders import PROPERTIES

TRITON = RuntimeKey("default", "modelmesh-serving-triton")
PREFIX = "autoscaler.modelmesh.io/"
LOGGER = "autoscaler.policies.config"
PREFIXES = (PREFIX, "Autoscaler.modelmesh.io/", "autoscaling.modelmesh.io/", "modelmesh.io/", "")
RATIOS = ("target_gpu_busy", "cache_full_ratio", "min_coverage")


def file_book() -> PolicyBook:
    return parse_policy_book({"runtimes": [{"namespace": TRITON.namespace, "deployment": TRITON.deployment,
                                            "min_replicas": 2}]}, "policy.yaml")


@st.composite
def spellings(draw: st.DrawFn) -> tuple[str, str]:
    """(policy key, an annotation for it): half of them under our prefix in lower case with `-` or `_` between
    words (as documented, or as the file spells the key), the others any letter case, `-`, `_` or nothing
    between words, any prefix."""
    name = draw(st.sampled_from(FIELDS))
    if draw(st.booleans()):
        return name, PREFIX + "".join(w + draw(st.sampled_from(["-", "_"])) for w in name.split("_"))[:-1]
    words = [draw(st.sampled_from([w, w.upper(), w.title()])) for w in name.split("_")]
    joined = words[0] + "".join(draw(st.sampled_from(["-", "_", ""])) + w for w in words[1:])
    prefix = draw(st.sampled_from(PREFIXES))
    return name, prefix + joined


@PROPERTIES
@given(spellings())
def test_the_documented_and_the_file_spelling_apply_and_a_near_miss_is_said_once(spelt: tuple[str, str]) -> None:
    name, annotation = spelt
    documented = PREFIX + name.replace("_", "-")
    read_before = annotation != documented and annotation.replace("_", "-") == documented  # an upgrade keeps it
    value = "0.3" if name in RATIOS else "3"
    book, seen = file_book(), []
    handler = _Collect()
    logging.getLogger(LOGGER).addHandler(handler)
    try:
        for _ in range(3):  # every refresh
            seen.append(book.policy_for(TRITON, {annotation: value, "deployment.kubernetes.io/revision": "3"}))
    finally:
        logging.getLogger(LOGGER).removeHandler(handler)
    applied = getattr(seen[-1], name) == float(value)
    shown = (policy_document(book.explain(TRITON)) or {})[name]
    if annotation == documented:
        assert applied and handler.messages == [] and shown["from"] == f"annotation {documented}", shown
        return
    if read_before:
        assert applied and shown == {"value": shown["value"], "from": f"annotation {annotation}"}, shown
        [warning] = handler.messages
        assert f"{annotation}={value!r} applies as {documented}" in warning, warning
        assert f"write {documented}={value}" in warning, warning
        return
    unannotated = file_book().policy_for(TRITON)
    assert not applied and seen[-1] == unannotated
    [warning] = handler.messages
    assert f"{annotation}={value!r}" in warning and f"write {documented}" in warning, warning
    assert f"uses {name} {show_value(getattr(unannotated, name))} (" in warning, warning  # what applies instead
    assert f"{annotation}={value!r}" in str(shown["ignored"]) and f"write {documented}" in str(shown["ignored"])


class _Collect(logging.Handler):
    """The adapter's warnings, as its log shows them (caplog is per test, not per example)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_the_file_spelling_beside_the_documented_one_is_not_used(caplog: pytest.LogCaptureFixture) -> None:
    book = file_book()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        policy = book.policy_for(TRITON, {PREFIX + "min-replicas": "7", PREFIX + "min_replicas": "6"})
    assert policy.min_replicas == 7
    [warning] = [r.getMessage() for r in caplog.records]
    assert f"ignoring annotation {PREFIX}min_replicas='6'" in warning, warning
    assert f"uses min_replicas 7 from {PREFIX}min-replicas: remove {PREFIX}min_replicas" in warning, warning
    shown = (policy_document(book.explain(TRITON)) or {})["min_replicas"]
    assert shown["from"] == f"annotation {PREFIX}min-replicas", shown
    assert f"{PREFIX}min_replicas='6'" in str(shown["ignored"]), shown


def test_an_upgrade_keeps_the_file_spelling_applied_and_says_so_once_per_value(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A runtime whose floor was raised with `.../min_replicas=6` before the documented spelling was enforced must
    not fall back to the file's 2 (and scale down) after an upgrade."""
    book = file_book()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        seen = [book.policy_for(TRITON, {PREFIX + "min_replicas": value, "deployment.kubernetes.io/revision": rev})
                .min_replicas for value, rev in (("6", "1"), ("6", "2"), ("7", "3"))]
    assert seen == [6, 6, 7]
    assert [r.getMessage().split(": ", 1)[1] for r in caplog.records] == [
        f"annotation {PREFIX}min_replicas={v!r} applies as {PREFIX}min-replicas, as the policy file's key spelling "
        f"read before: write {PREFIX}min-replicas={v}, the documented spelling, instead" for v in ("6", "7")]


def test_a_typo_in_the_file_spelling_keeps_its_last_good_value_and_names_the_spelling_to_write(
    caplog: pytest.LogCaptureFixture,
) -> None:
    book = file_book()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        seen = [book.policy_for(TRITON, {PREFIX + "min_replicas": value}).min_replicas for value in ("6", "6x")]
    assert seen == [6, 6]
    warning = caplog.records[-1].getMessage()
    assert f"ignoring annotation {PREFIX}min_replicas='6x'" in warning and "keeps min_replicas 6" in warning, warning
    assert f"write {PREFIX}min-replicas=6 to keep it" in warning, warning


def test_an_annotation_renamed_to_a_near_miss_keeps_its_last_good_value(caplog: pytest.LogCaptureFixture) -> None:
    """As a typo in its value does: `min-replicas=6` renamed `Min-Replicas=6` must not fall back to the file's 2."""
    book = file_book()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        seen = [book.policy_for(TRITON, annotations).min_replicas
                for annotations in ({PREFIX + "min-replicas": "6"}, {PREFIX + "Min-Replicas": "6"}, {})]
    assert seen == [6, 6, 2]
    [warning] = [r.getMessage() for r in caplog.records]
    assert "keeps min_replicas 6" in warning and f"write {PREFIX}min-replicas=6 to keep it" in warning, warning


_KEY_LETTERS = st.text("abcdefghijklmnopqrstuvwxyz-_", min_size=1, max_size=24)


@PROPERTIES
@given(st.lists(_KEY_LETTERS, min_size=1, max_size=3, unique=True), st.sampled_from(["3", "8", "fast", ""]))
def test_every_annotation_naming_no_policy_key_is_shown_in_debug_as_the_log_says_it(
    keys: list[str], value: str,
) -> None:
    """`autoscaler.modelmesh.io/skew-ordr=3` was said in the log only: /debug, where whoever wonders why it does
    not apply looks, showed no trace of it. It lists each one, in the log's words, until it is removed."""
    annotations = [PREFIX + key for key in keys]
    assume(all(read_as(a) is None and near_miss(a) is None for a in annotations))  # naming no key, not near one
    book, handler = file_book(), _Collect()
    logging.getLogger(LOGGER).addHandler(handler)
    try:
        for revision in "12":  # two refreshes, another annotation of the runtime changed between them
            book.policy_for(TRITON, {**dict.fromkeys(annotations, value), PREFIX + "min-replicas": "3",
                                     "deployment.kubernetes.io/revision": revision})
    finally:
        logging.getLogger(LOGGER).removeHandler(handler)
    shown = policy_document(book.explain(TRITON)) or {}
    assert shown["min_replicas"]["value"] == 3, shown  # the good annotation beside them applies
    listed = unknown_annotations(book.explain(TRITON))
    assert [entry.split("=", 1)[0] for entry in listed] == sorted(annotations), listed
    assert all(f"={value!r}: no such policy annotation" in entry for entry in listed), listed
    assert sum(message.endswith(KEYS_LISTED) for message in handler.messages) <= 1  # the keys listed once at most
    lines = [message.removesuffix(KEYS_LISTED) for message in handler.messages]
    assert sorted(lines) == sorted(f"runtime {TRITON}: ignoring annotation {e}" for e in listed)
    book.policy_for(TRITON, {PREFIX + "min-replicas": "3"})  # the typos removed
    assert unknown_annotations(book.explain(TRITON)) == []


def test_an_unknown_annotation_is_shown_with_the_key_it_is_likely_meant_as() -> None:
    book = file_book()
    book.policy_for(TRITON, {PREFIX + "skew-ordr": "3", PREFIX + "max-replica": "8", PREFIX + "gpu-thing": "1"})
    assert unknown_annotations(book.explain(TRITON)) == [
        f"{PREFIX}gpu-thing='1': no such policy annotation",
        f"{PREFIX}max-replica='8': no such policy annotation (did you mean {PREFIX}max-replicas?)",
        f"{PREFIX}skew-ordr='3': no such policy annotation (did you mean {PREFIX}skew-order?)",
    ]
