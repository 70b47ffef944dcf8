"""The promises of `DiscoveryOutage`, over any run of refreshes: a runtime is held exactly while discovery is out
of date for its namespace, its /debug says since when that run of failures began, and it names no other
namespace's errors."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.source_problems import REASON_DISCOVERY, DiscoveryOutage

NAMESPACES = ("team-a", "team-b", "team-c")
refreshes = st.lists(
    st.tuples(st.frozensets(st.sampled_from(NAMESPACES)),  # the namespaces discovery is out of date for
              st.booleans()),  # whether the failing read is one of all namespaces (whose error names none)
    min_size=1, max_size=12)


@given(refreshes)
def test_a_runtime_is_held_exactly_while_its_namespace_is_out_of_date(runs: list[tuple[frozenset[str], bool]]) -> None:
    outage = DiscoveryOutage()
    began: dict[str, float] = {}
    for now, (failing, everywhere) in enumerate(runs):
        errors = (((None, "list pods: 403"),) if everywhere else
                  tuple((namespace, f"pod watch of namespace {namespace} failing") for namespace in sorted(failing)))
        out_of_date = set(NAMESPACES) if everywhere else failing
        outage.note(frozenset(NAMESPACES).difference(out_of_date).__contains__, NAMESPACES, float(now), errors)
        began = {namespace: began.get(namespace, float(now)) for namespace in out_of_date}

        for namespace in NAMESPACES:
            problems = outage.problems(namespace)
            assert outage.healthy(namespace) == (namespace not in out_of_date)
            if namespace in out_of_date:
                [problem] = problems
                assert problem.reason == REASON_DISCOVERY and problem.since == began[namespace]
                assert not any(other in problem.detail for other in NAMESPACES if other != namespace), problem
            else:
                assert problems == ()
