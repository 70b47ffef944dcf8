"""The promise of `PendingRates`: an exporter with no rates is said once it has shown three distinct ModelMesh
reads, never before, whatever the order, repeats and scrapes without a read; and a rate starts the count again."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.sources.pending_rates import READS_WITHOUT_RATES, PendingRates

READS = st.lists(st.one_of(st.none(), st.sampled_from([1.0, 2.0, 3.0, 4.0, 5.0])), max_size=20)


@given(READS)
def test_said_from_the_third_distinct_read_on_and_never_before(reads: list[float | None]) -> None:
    pending = PendingRates()
    seen: set[float] = set()
    for read_at in reads:
        said = pending.overdue("pod", read_at)
        if read_at is not None:
            seen.add(read_at)
        overdue = len(seen) >= READS_WITHOUT_RATES and read_at is not None
        assert (said is not None) == overdue, (reads, said)


@given(READS, READS)
def test_a_rate_or_a_pod_gone_starts_the_count_again(before: list[float | None], after: list[float | None]) -> None:
    pending = PendingRates()
    for read_at in before:
        pending.overdue("pod", read_at)
    if len(before) % 2:
        pending.ended("pod")  # its exporter published a rate
    else:
        pending.forget_all_but(["another pod"])  # the pod is no longer listed
    fresh = PendingRates()
    for read_at in after:
        assert pending.overdue("pod", read_at) == fresh.overdue("pod", read_at)
