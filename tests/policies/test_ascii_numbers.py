"""Policy numbers are ASCII, as Kubernetes quantities and Go's strconv read them: Python's `int` and `float`
also read any script's decimal digits (Arabic-Indic `'١٢'`, fullwidth), so `target-rps-per-pod='١٢'` applied
as 12 without a word. Such a value is refused as any other that is not a number, in the policy file and in an
annotation."""

from __future__ import annotations

import logging

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.policies.config import ConfigError, PolicyBook, parse_policy_book
from autoscaler.policies.policy import RuntimePolicy
from tests.policies.builders import PROPERTIES

TRITON = RuntimeKey("default", "modelmesh-serving-triton")
PREFIX = "autoscaler.modelmesh.io/"
LOGGER = "autoscaler.policies.config"

_DIGITS = st.characters(categories=["Nd"])
_NON_ASCII_NUMBER = st.lists(_DIGITS, min_size=1, max_size=4).map("".join).filter(lambda text: not text.isascii())


@PROPERTIES
@given(_NON_ASCII_NUMBER, st.sampled_from([("min_replicas", "whole number"), ("target_rps_per_pod", "number")]))
def test_a_number_in_other_digits_is_refused_in_the_file(text: str, key: tuple[str, str]) -> None:
    name, kind = key
    with pytest.raises(ConfigError) as refused:
        parse_policy_book({"defaults": {name: text}}, "policy.yaml")
    assert str(refused.value) == f"policy.yaml: defaults: {name} must be a {kind}, got {text!r}"


@pytest.mark.parametrize("text", ["١٢", "\uff11\uff12", "1٢.5"])
def test_a_number_in_other_digits_is_ignored_in_an_annotation_with_a_warning(
    caplog: pytest.LogCaptureFixture, text: str,
) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        policy = PolicyBook().policy_for(TRITON, {PREFIX + "target-rps-per-pod": text})
    assert policy == RuntimePolicy()
    [record] = caplog.records
    assert (f"ignoring annotation {PREFIX}target-rps-per-pod={text!r}: target_rps_per_pod must be a number;"
            in record.getMessage()), record.getMessage()


@pytest.mark.parametrize("text, value", [("12\u00a0", 12), ("\u2003 7", 7), ("\u30003\u3000", 3)])
def test_a_number_with_whitespace_of_any_script_around_it_is_read(text: str, value: int) -> None:
    """Whitespace around a number is not part of it, a no-break space pasted from a web page included: such a
    value read as before the ASCII rule came, and an annotation pasted that way was then ignored."""
    policy = PolicyBook().policy_for(TRITON, {PREFIX + "max-replicas": text})
    assert policy.max_replicas == value
    assert parse_policy_book({"defaults": {"min_replicas": text}}, "policy.yaml").defaults.min_replicas == value
