"""What a source-wide problem says to every runtime: the backend's words with their label sets cut out, so that
no runtime's /debug or 503 names another namespace's series (tests/api/test_debug_discovery_tenants.py serves it)."""

from __future__ import annotations

import pytest

from autoscaler.source_problems import CUT_NOTE, for_every_runtime

ROWS = [
    ("no braces: unchanged", "HTTP 503 from http://p:9090/api/v1/query: unavailable: not ready",
     "HTTP 503 from http://p:9090/api/v1/query: unavailable: not ready"),
    ("a label set", 'duplicate series for the match group {namespace="b", pod="b-0"} on the right',
     "duplicate series for the match group {…} on the right" + CUT_NOTE),
    ("label sets in a list", '[{model_id="m1"}, {model_id="m2"}];many-to-many',
     "[{…}, {…}];many-to-many" + CUT_NOTE),
    ("a brace inside a quoted value ends nothing", 'group {pod="x}leak", ns="b"} after',
     "group {…} after" + CUT_NOTE),
    ("an escaped quote inside a value", r'group {pod="x\"}leak"} after', "group {…} after" + CUT_NOTE),
    ("a Python repr of an item, nested", "bad item {'metric': {'namespace': 'b'}, 'value': [1, '2']} end",
     "bad item {…} end" + CUT_NOTE),
    ("a group cut short runs to the end", 'right hand side: [{model_id="conf', "right hand side: [{…}" + CUT_NOTE),
]


@pytest.mark.parametrize(("case", "said", "told"), ROWS, ids=[row[0] for row in ROWS])
def test_a_runtime_is_told_the_words_around_the_label_sets(case: str, said: str, told: str) -> None:
    assert for_every_runtime(said) == told
