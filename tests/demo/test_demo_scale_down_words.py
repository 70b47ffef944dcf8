"""What the demo's HPA line says of each pod a scale-down removes, as its user reads it.

A Ready pod the adapter had not ranked yet (it joins the adapter's targets once its exporter answers, and is ranked
at the adapter's next refresh) was removed first, as cost 0, as a real ReplicaSet reads a pod without the annotation;
and the line read "removed demo-4 (deletion cost 0)": that the adapter ranked it the least needed. The order stays;
the words say what happened.
"""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from pathlib import Path

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh, ModelMeshLoad
from autoscaler.demo.fleet import DemoPod
from autoscaler.demo.removals import NOT_RANKED, NOT_READY, Ranking, removal_preview, scale_down
from autoscaler.demo.run import Demo
from tests.demo.demo_output import unwrap


@pytest.mark.slow
async def test_a_ready_pod_the_adapter_has_not_ranked_is_removed_saying_so_not_as_deletion_cost_0(
        tmp_path: Path) -> None:
    """The demo's fleet, its real exporters and adapter, and its HPA loop: a fifth pod Ready in the demo but not
    yet among the adapter's targets (as between its exporter's first answer and the adapter's next refresh) while
    the adapter serves the four pods' even load, 4 replicas."""
    demo = Demo(4, 60.0, 3.0, tmp_path, start_timeout=120.0)
    with contextlib.redirect_stdout(io.StringIO()) as printed:
        async with demo.fleet.running(4), aiohttp.ClientSession() as session:
            await demo.first_value(session)
            unranked = await demo.fleet.add_pod(wait=False)
            unranked.ready = True  # Ready, not yet in the targets the adapter reads
            hpa = asyncio.create_task(demo.autoscale(session))
            try:
                async with asyncio.timeout(120):
                    while "HPA: " not in printed.getvalue():
                        await asyncio.sleep(0.2)
            finally:
                hpa.cancel()
                await asyncio.gather(hpa, return_exceptions=True)
    line = re.search(r"HPA: .*", unwrap(printed.getvalue()))
    assert line, printed.getvalue()
    assert re.search(r"scale down 5 -> \d \(the adapter's [^()]*\); removed demo-4 \(not ranked yet: no "
                     r"deletion cost, read as 0 as the ReplicaSet does\)", line.group()), line.group()


def pod(name: str, ready: bool, created_at: float) -> DemoPod:
    return DemoPod(name, FakeModelMesh(ModelMeshLoad(requests_per_second=0.0, models_loaded=6), model_prefix=name),
                   0, 0, created_at=created_at, models=name, ready=ready)


FLEETS = st.lists(st.tuples(st.booleans(), st.one_of(st.none(), st.tuples(st.integers(0, 1000),
                                                                           st.one_of(st.none(), st.integers(0, 9))))),
                  min_size=1, max_size=10)
"""Each pod: Ready, and the adapter's (deletion cost, models only it served) or None where it has not ranked it."""


@settings(max_examples=300, deadline=None)
@given(FLEETS, st.integers(1, 10))
def test_a_removed_pod_is_named_with_a_deletion_cost_only_where_the_adapter_ranked_it(
        fleet: list[tuple[bool, tuple[int, int | None] | None]], count: int) -> None:
    pods = [pod(f"demo-{i}", ready, float(i)) for i, (ready, _) in enumerate(fleet)]
    ranked: Ranking = {f"demo-{i}": rank for i, (_, rank) in enumerate(fleet) if rank is not None}
    removed = scale_down(pods, ranked, count)
    assert len(removed) == min(count, len(pods))
    for name, words in removed:
        ready = next(p.ready for p in pods if p.name == name)
        if not ready:
            assert words == f"{name} ({NOT_READY})"
        elif name not in ranked:
            assert words == f"{name} ({NOT_RANKED})"
        else:
            cost, unique = ranked[name]
            held = ("" if unique is None else "; its models have copies" if unique == 0 else
                    f"; {unique} models? only it served")
            assert re.fullmatch(rf"{name} \(cost {cost}; lowest[^();]*{held}\)", words), words
            assert len(words) <= 80, words
            # why it was the least needed: the Ready, ranked pods kept cost as much or more
            kept_costs = [ranked[p.name][0] for p in pods
                          if p.ready and p.name in ranked and p.name not in dict(removed)]
            assert all(cost <= other for other in kept_costs)
            # against the pods it was chosen among: those kept and those removed after it
            after = [n for n, _ in removed][[n for n, _ in removed].index(name) + 1:]
            among = kept_costs + [ranked[n][0] for n in after
                                  if n in ranked and next(p.ready for p in pods if p.name == n)]
            if among and min(among) > cost:
                assert re.search(r"; lowest, next demo-\d+ at \d+[;)]", words), words
    # the order is the ReplicaSet's: not Ready first, then the lowest cost, a pod without one read as 0
    order = [(next(p.ready for p in pods if p.name == name), ranked.get(name, (0, None))[0]) for name, _ in removed]
    assert order == sorted(order)
    kept = [(p.ready, ranked.get(p.name, (0, None))[0]) for p in pods if p.name not in dict(removed)]
    assert not order or not kept or order[-1] <= min(kept)


def test_a_cost_that_moved_since_the_last_table_is_said_with_the_one_the_table_showed() -> None:
    """"removed demo-3 (deletion cost 600 ...)" three seconds after the table showed demo-3 at 500 read as a
    mistake: the line says the cost the ReplicaSet went by, as written at that moment, and the one shown."""
    pods = [pod("demo-1", True, 1.0), pod("demo-2", True, 2.0), pod("demo-3", True, 3.0)]
    ranked: Ranking = {"demo-1": (700, 6), "demo-2": (700, 6), "demo-3": (600, 6)}
    [(name, words)] = scale_down(pods, ranked, 1, shown={"demo-1": 600, "demo-2": 600, "demo-3": 500})
    assert name == "demo-3"
    assert words == "demo-3 (cost 600, was 500; lowest, next demo-1 at 700; 6 models only it served)", words


def test_a_copy_tied_with_others_is_said_in_one_short_clause() -> None:
    """The removal lines ran to 530 characters; the tie is counted over the pods the ReplicaSet chose among, the
    pods removed after it in the same scale-down included."""
    pods = [pod(f"demo-{i}", True, float(i)) for i in range(8)]
    ranked: Ranking = {**{f"demo-{i}": (600, 6) for i in (1, 2, 3)}, **{f"demo-{i}": (400, 0) for i in (0, 4, 5, 6, 7)}}
    removed = scale_down(pods, ranked, 2)
    assert removed == [("demo-7", "demo-7 (cost 400; lowest, newest of 5 tied; its models have copies)"),
                       ("demo-6", "demo-6 (cost 400; lowest, newest of 4 tied; its models have copies)")]


def test_the_tables_preview_lists_the_tied_pods_newest_first_as_the_replicaset_takes_them() -> None:
    """"removes demo-0, demo-4, demo-5 first" read as if demo-0 went first; of equal costs the newest goes first."""
    costs = {"demo-0": 400, "demo-1": 600, "demo-4": 400, "demo-5": 400, "demo-10": 400, "demo-3": 600}
    created = ["demo-0", "demo-1", "demo-3", "demo-4", "demo-5", "demo-10"]
    assert removal_preview(costs, created) == ("  on scale-down the ReplicaSet removes demo-10, demo-5, demo-4, demo-0 "
                                               "first (deletion cost 400, the newest first), demo-3, demo-1 last (600)")
    assert removal_preview(dict.fromkeys(created, 400), created) is None
