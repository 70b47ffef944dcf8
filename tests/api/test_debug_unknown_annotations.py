"""/debug's `policy` holds only policy keys, each `{value, from}`; the annotations that name no key have their own
field, `unknown_annotations`, beside `policy` and `warnings`.

`policy.unknown_annotations` (a list) sat among the per-key objects, so a client walking `policy`'s entries
(`for key, entry in policy.items(): entry["value"]`) met a list and failed on a runtime with a typo in an
annotation, the runtime it was looking at. Read as a serving worker answers it (the snapshot's record) and as
the refresh process writes it (`explanation`).
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from autoscaler.api.debug_document import explanation
from autoscaler.policies.config import PolicyBook
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.refresher import Refresher
from autoscaler.selfmetrics import AdapterMetrics
from tests.api.builders import KEY, NOW
from tests.api.test_debug_policy_bounds import OneRuntime, shown_policy

PREFIX = "autoscaler.modelmesh.io/"


async def _written(book: PolicyBook, annotations: dict[str, str]) -> dict[str, Any]:
    """The document as the refresh process writes it (one process, or a view that cannot be packed)."""
    refresher = Refresher(OneRuntime(annotations), book, AdapterMetrics(), clock=lambda: NOW)
    await refresher.refresh_once()
    document: dict[str, Any] = json.loads(json.dumps(explanation(refresher.views[KEY], book.explain(KEY))))
    return document


@pytest.mark.parametrize("made", ["served", "written"])
async def test_policy_holds_only_keys_and_the_unknown_annotations_are_beside_it(made: str) -> None:
    book = PolicyBook(RuntimePolicy())
    annotations = {PREFIX + "skew-ordr": "3", PREFIX + "min-replicas": "2"}
    document = await (shown_policy(book, None, annotations) if made == "served" else _written(book, annotations))
    for key, entry in document["policy"].items():
        assert isinstance(entry, dict) and {"value", "from"} <= entry.keys(), (key, entry)
    assert document["unknown_annotations"] == [
        f"{PREFIX}skew-ordr='3': no such policy annotation (did you mean {PREFIX}skew-order?)"]
    assert document["policy"]["min_replicas"] == {"value": 2, "from": f"annotation {PREFIX}min-replicas"}


@pytest.mark.parametrize("made", ["served", "written"])
async def test_no_unknown_annotation_is_an_empty_list(made: str) -> None:
    """Always there, so a client reads it without testing for it first."""
    book = PolicyBook(RuntimePolicy())
    annotations = {PREFIX + "min-replicas": "2"}
    document = await (shown_policy(book, None, annotations) if made == "served" else _written(book, annotations))
    assert document["unknown_annotations"] == []
