"""The deletion cost the demo's table shows for each pod is the one on the pod: the cost the adapter writes.

A pod a scale-up started, Ready and in the adapter's targets but without a fresh rate yet, showed `0` in the table
(where a pod still starting shows `-`): /debug lists the cost the adapter would write for it, 0, but the adapter
writes a cost only for a Ready pod with fresh data in a runtime whose values are known
(`deletion_cost_plan.plan_patches`), so nothing was on it. And a cost once written stays on the pod whatever /debug
shows later.

Here the demo reads a stand-in adapter whose /debug answers as the real one did at those moments (`DEBUG_PODS`).
"""

from __future__ import annotations

import contextlib
import io
import re
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from hypothesis import given, settings
from hypothesis import strategies as st

from autoscaler.api.certs import generate_self_signed, server_context
from autoscaler.demo.fake_modelmesh_metrics import FakeModelMesh
from autoscaler.demo.fleet import DEPLOYMENT, NAMESPACE, DemoPod, free_port
from autoscaler.demo.pod_costs import costs_on_pods
from autoscaler.demo.run import Demo


def pod(name: str, *, fresh: bool, cost: int | None, unique: int | None) -> dict[str, Any]:
    """One pod of the adapter's /debug document, with the fields the demo reads."""
    return {"name": name, "ready": True, "fresh": fresh, "deletion_cost": cost, "unique_models": unique}


RANKED = pod("demo-0", fresh=True, cost=700, unique=6)
DEBUG_PODS = {
    # the real adapter's answer a second after the new pod's exporter answered: Ready, listed, no fresh rate yet
    "not fresh yet": [RANKED, pod("demo-1", fresh=False, cost=0, unique=None)],
    "ranked": [RANKED, pod("demo-1", fresh=True, cost=200, unique=0)],
    # its exporter missed a scrape: the adapter writes nothing new, and the 200 it wrote stays on the pod
    "stale": [RANKED, pod("demo-1", fresh=False, cost=0, unique=None)],
}


@pytest.fixture
async def demo(tmp_path: Path) -> AsyncIterator[tuple[Demo, dict[str, Any]]]:
    """A demo with two Ready pods whose adapter is a stand-in serving `document` at /debug (https, as the real)."""
    document: dict[str, Any] = {"known": True, "pods": []}

    async def debug(_: web.Request) -> web.Response:
        return web.json_response(document)

    app = web.Application()
    app.router.add_get(f"/debug/runtimes/{NAMESPACE}/{DEPLOYMENT}", debug)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    certs = generate_self_signed(tmp_path / "tls", "adapter", ["127.0.0.1"])
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=server_context(certs.cert_file, certs.key_file))
    await site.start()
    made = Demo(2, 60.0, 3.0, tmp_path)
    made.fleet.adapter_port = runner.addresses[0][1]
    made.fleet.pods = [DemoPod(f"demo-{i}", FakeModelMesh(), free_port(), free_port(), 0.0, f"demo-{i}", ready=True)
                       for i in range(2)]
    try:
        yield made, document
    finally:
        await runner.cleanup()


def cost_shown(table: str, name: str) -> str:
    row = re.search(rf"^  {name} +\S+ +\S+ +(\S+) +\S+", table, re.MULTILINE)
    assert row, table
    return row.group(1)


async def test_a_pod_the_adapter_has_written_no_cost_on_shows_none(demo: tuple[Demo, dict[str, Any]]) -> None:
    made, document = demo
    shown = []
    async with aiohttp.ClientSession() as session:
        for moment in DEBUG_PODS.values():
            document["pods"] = moment
            with contextlib.redirect_stdout(io.StringIO()) as printed:
                await made.report(session)
            shown.append((cost_shown(printed.getvalue(), "demo-0"), cost_shown(printed.getvalue(), "demo-1"),
                          made.unranked()))
    assert shown == [("700", "-", ["demo-1"]), ("700", "200", []), ("700", "200", [])]


async def test_no_cost_is_on_the_pods_while_the_runtime_has_no_values(demo: tuple[Demo, dict[str, Any]]) -> None:
    """The adapter writes no cost for a runtime it answers 503 for (`known` false)."""
    made, document = demo
    document.update(known=False, pods=DEBUG_PODS["ranked"])
    async with aiohttp.ClientSession() as session:
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            await made.report(session)
    assert (cost_shown(printed.getvalue(), "demo-0"), cost_shown(printed.getvalue(), "demo-1")) == ("-", "-")


DEBUG_POD = st.fixed_dictionaries({
    "name": st.sampled_from(["demo-0", "demo-1", "demo-2"]), "ready": st.booleans(), "fresh": st.booleans(),
    "deletion_cost": st.one_of(st.none(), st.integers(0, 1000)),
    "unique_models": st.one_of(st.none(), st.integers(0, 6)),
})
DEBUG_DOCUMENT = st.fixed_dictionaries({
    "known": st.booleans(),
    "pods": st.lists(DEBUG_POD, max_size=3, unique_by=lambda shown: shown["name"]),
})


def written(document: dict[str, Any]) -> dict[str, tuple[int, int | None]]:
    """The costs the adapter writes at the refresh `document` shows (`deletion_cost_plan.plan_patches`)."""
    return {pod["name"]: (pod["deletion_cost"], pod["unique_models"]) for pod in document["pods"]
            if document["known"] and pod["ready"] and pod["fresh"] and pod["deletion_cost"] is not None}


@settings(max_examples=300, deadline=None)
@given(st.lists(DEBUG_DOCUMENT, min_size=1, max_size=6))
def test_a_cost_shown_is_the_last_one_written_on_the_pod_while_it_runs(documents: list[dict[str, Any]]) -> None:
    """Whatever the adapter's /debug lists from one refresh to the next: a pod shows a cost once one was written on
    it, the one written last, and keeps it until it has gone from the adapter's list; none before."""
    on: dict[str, tuple[int, int | None]] = {}
    last_written: dict[str, tuple[int, int | None]] = {}
    for document in documents:
        listed = {pod["name"] for pod in document["pods"]}
        last_written = {name: cost for name, cost in last_written.items() if name in listed}
        last_written.update(written(document))
        on = costs_on_pods(document, on)
        assert on == last_written, (document, on)
