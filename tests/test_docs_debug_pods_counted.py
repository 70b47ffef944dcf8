"""docs/operations.md's /debug section quotes the words each pod counted otherwise than its readiness shows.

Mid-rollout `ready_pods` read 4 beside 7 pods all `ready: true`, and a crash-looping pod Ready in kubectl read
`ready: false`, with no word on either pod; each pod now shows `counted` and a `reason`, which the section names
and quotes as the adapter writes them (tests/api/test_debug_pods_counted.py reads them from a real adapter)."""

from __future__ import annotations

from autoscaler.model import PodSample
from autoscaler.policies.surge_pods import surge_pod_words
from autoscaler.policies.unready_pods import held_words, left_out_words
from tests.test_docs_debug_reason import debug_section_first_paragraph


def quoted_prefix(words: str, cut: str) -> str:
    """`words` up to `cut` (which the docs follow with `...`)."""
    return words[:words.index(cut) + len(cut)]


def test_the_debug_section_names_counted_and_reason_and_quotes_each_pods_words() -> None:
    paragraph = debug_section_first_paragraph()
    assert "(`counted`)" in paragraph and "why (`reason`, empty otherwise)" in paragraph, paragraph
    assert "those shown `counted: true` in `pods`" in paragraph, paragraph
    surge = surge_pod_words(7, 4).replace("replicas 4 (7", "replicas R (N")
    assert f"`{quoted_prefix(surge, 'new pods are;')} ...`" in paragraph, surge
    left_out = left_out_words("p-0", 1000.0, {"p-0": (0.0, 688.0, True)}).replace("312 s ago", "N s ago")
    assert f"`{quoted_prefix(left_out, 'counted as not Ready,')} ...`" in paragraph, left_out
    held = held_words(PodSample("p-0", ready=False, requests_per_second=150.0), 1000.0, {"p-0": (0.0, 988.0, False)})
    held = held.replace("12 s", "N s").replace("150 req/s", "R req/s")
    assert f"`{quoted_prefix(held, 'counted as missing data,')} ...`" in paragraph, held
