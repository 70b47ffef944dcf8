"""/debug's discovery problem of a namespace: "its pods are unknown" only while every error about it says so (no
list of its pods ever worked); any other error (a Deployment read, a watch that had listed) is an outage of what
was known, said as out of date, every value of its runtimes unknown (503) until it recovers."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.source_problems import PODS_UNKNOWN, DiscoveryOutage

NS = "team-a"
UNKNOWN = PODS_UNKNOWN.format(scope=f"namespace {NS}") + "its pod list is refused (list pods ...: 403)"
ERRORS = st.lists(st.tuples(st.sampled_from([None, NS, "team-b"]),
                            st.one_of(st.just(UNKNOWN), st.text(min_size=1, max_size=30))), max_size=6)


@given(ERRORS)
def test_pods_are_said_unknown_exactly_when_every_error_of_the_namespace_says_so(
    errors: list[tuple[str | None, str]],
) -> None:
    outage = DiscoveryOutage()
    outage.note(lambda namespace: False, [NS], 0.0, tuple(errors))
    [problem] = outage.problems(NS)
    mine = [error for where, error in errors if where in (None, NS)]
    if mine and all(error == UNKNOWN for error in mine):  # (30 random characters never start as UNKNOWN does)
        assert "until it recovers" not in problem.detail and problem.detail.startswith("the pods of "), errors
    else:
        assert problem.detail.startswith("pod discovery is out of date"), errors
        assert "unknown (503) until it recovers" in problem.detail, errors
