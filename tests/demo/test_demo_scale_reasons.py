"""What the demo's scale line says of why: the adapter's deciding term, from its /debug, never its own guess.

"HPA: modelmesh_desired_replicas proposes 7; scale up 5 -> 7" named no reason, though the README says each scale
says why and /debug names the `winner`.
"""

from __future__ import annotations

from typing import Any

from autoscaler.demo.scale_reasons import served_replicas, why_scaled


def debug(winner: str, proposals: dict[str, int | None], value: float, raw: float,
          falling: dict[str, Any] | None = None) -> dict[str, Any]:
    """The fields of the adapter's /debug document the scale line reads, as the real one serves them."""
    return {"winner": winner, "proposals": {"gpu": None, "ready_pods": None, "min_replicas": 2, **proposals},
            "values": {"modelmesh_desired_replicas": {"value": value, "raw": raw},
                       "modelmesh_request_load": {"value": 668.0, "raw": 668.4}},
            "policy": {"target_rps_per_pod": {"value": 100.0, "from": "policy.yaml"}},
            "falling": {} if falling is None else {"modelmesh_desired_replicas": falling}}


def test_a_scale_up_names_the_term_that_decided_and_what_it_read() -> None:
    said = why_scaled(debug("requests", {"requests": 7, "queue": 5, "cache": 3}, 7, 7))
    assert said == ("the adapter's requests term proposes 7: the skew-aware request load, 668 req/s at 100 a pod; "
                    "queue 5, cache 3")


def test_a_scale_down_says_the_slow_scale_down_holds_the_served_value_above_the_term() -> None:
    said = why_scaled(debug("cache", {"requests": 2, "queue": None, "cache": 3}, 5, 3,
                            {"smoothed": 4.5, "scale_down_tau_s": 5.0}))
    assert said == ("the adapter's cache term proposes 3: the cache's fill; requests 2; the adapter's slow "
                    "scale-down serves 5 meanwhile, an earlier count smoothed 4.50 falling to 3 with "
                    "scale_down_tau_s 5")


def test_the_cap_names_the_term_it_cut() -> None:
    said = why_scaled(debug("max_replicas", {"requests": 12, "queue": 12, "cache": 3}, 8, 8))
    assert said.startswith("the adapter's max_replicas 8 cuts its requests term's 12"), said


def test_no_debug_answer_says_why_is_unknown_this_time() -> None:
    assert why_scaled(None, "answered 404") == ("the adapter's /debug answered 404: why it scaled is unknown this "
                                                "time; the count is the metrics API's")


def test_no_winner_says_why_the_adapter_decides_nothing_yet() -> None:
    """Below the minimum coverage /debug has no winner: the line read "the adapter's None term proposes None"."""
    document = {**debug("requests", {"requests": None, "queue": None, "cache": None}, 4, 4), "winner": None,
                "reason": "only 3 of 5 ready pods fresh (coverage 60% < 90%); values unknown (503), HPA holds"}
    assert why_scaled(document) == ("the adapter decides nothing now: only 3 of 5 ready pods fresh (coverage 60% < "
                                    "90%); values unknown (503), HPA holds")


def test_a_served_value_held_above_its_term_says_what_holds_it() -> None:
    document = {**debug("requests", {"requests": 3, "queue": None, "cache": 2}, 5, 3),
                "held": {"modelmesh_desired_replicas": "data not fresh on some ready pod; may rise, not fall"}}
    assert why_scaled(document) == ("the adapter's requests term proposes 3: the skew-aware request load, 668 req/s "
                                    "at 100 a pod; cache 2; the adapter holds 5: data not fresh on some ready pod; "
                                    "may rise, not fall")


def test_the_hpa_reads_the_replicas_from_the_same_document_that_says_why() -> None:
    """Read in two requests, the value and its reason could come from two refreshes of the adapter."""
    assert served_replicas(debug("requests", {"requests": 7}, 7, 7)) == 7
    assert served_replicas({"values": {"modelmesh_desired_replicas": {"value": None, "raw": None}}}) is None
    assert served_replicas(None) is None



def test_a_scale_up_to_a_count_still_falling_says_the_count_is_an_earlier_one() -> None:
    """"scale up 7 -> 8 (the adapter's requests term proposes 7; ...; the adapter's slow scale-down serves 8
    meanwhile ...)" read as if the slow scale-down scaled up: the 8 is a count the adapter proposed a moment before,
    still falling."""
    said = why_scaled(debug("requests", {"requests": 7, "queue": 7, "cache": 3}, 8, 7,
                            {"smoothed": 7.85, "scale_down_tau_s": 5.0}))
    assert said.endswith("; the adapter's slow scale-down serves 8 meanwhile, an earlier count smoothed 7.85 falling "
                         "to 7 with scale_down_tau_s 5"), said
