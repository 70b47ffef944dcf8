"""Where /debug says each policy value came from: the layer that decided it, so that a user sees why a flag or
the file does not apply (docs/configuration.md, Per-runtime annotations)."""

from __future__ import annotations

import pytest

from autoscaler.model import RuntimeKey
from autoscaler.policies.config import parse_policy_book
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.policy_origins import policy_document

TRITON = RuntimeKey("default", "modelmesh-serving-triton")
FILE, FLAG = "policy.yaml: defaults", "flag --min-coverage"


@pytest.mark.parametrize(
    ("flag", "file", "shown"),
    [
        (None, None, (0.5, "built-in")),
        (None, 0.5, (0.5, "built-in")),  # the shipped file restates every built-in value
        (None, 0.7, (0.7, FILE)),
        (0.5, None, (0.5, "built-in")),  # a flag given its built-in value
        (0.5, 0.5, (0.5, "built-in")),
        (0.5, 0.7, (0.7, FILE)),
        (0.9, None, (0.9, FLAG)),
        (0.9, 0.5, (0.5, FILE)),  # shown as built-in: nothing said why --min-coverage 0.9 did not apply
        (0.9, 0.7, (0.7, FILE)),
    ],
)
def test_the_source_shown_is_the_layer_that_decided_the_value(
    flag: float | None, file: float | None, shown: tuple[float, str]
) -> None:
    base = RuntimePolicy() if flag is None else RuntimePolicy(min_coverage=flag)
    document = {} if file is None else {"defaults": {"min_coverage": file}}
    given_by = {} if flag is None else {"min_coverage": FLAG}
    book = parse_policy_book(document, "policy.yaml", base, given_by)
    book.policy_for(TRITON)
    debug = policy_document(book.explain(TRITON))
    assert debug is not None
    assert (debug["min_coverage"]["value"], debug["min_coverage"]["from"]) == shown
