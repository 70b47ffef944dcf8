"""The fake ModelMesh's `POST /control`, as its `--help` presents it to a person running it on its own
(`python -m autoscaler.demo.fake_modelmesh`): a field it does not take is named in a 400, with the fields it takes.

`{"rps": 600}` (the name of its own `--rps` flag) answered `{"error": "ModelMeshLoad.__init__() got an unexpected
keyword argument 'rps'"}`, and `{"requests_per_second": "600"}` was taken, to fail every scrape after it.
"""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, generate_latest

from autoscaler.demo.fake_modelmesh import CONTROL_FIELDS, control_changes, serve
from autoscaler.demo.fake_modelmesh_metrics import FAULTS, FakeModelMesh, ModelMeshLoad


@pytest.fixture
async def control() -> AsyncIterator[str]:
    runner = await serve(FakeModelMesh(ModelMeshLoad(requests_per_second=40.0)), "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}/control"
    finally:
        await runner.cleanup()


async def post(url: str, body: object) -> tuple[int, dict[str, Any]]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as response:
        return response.status, await response.json()


async def test_an_unknown_field_is_a_400_naming_it_and_the_fields_taken(control: str) -> None:
    status, body = await post(control, {"rps": 600})
    assert status == 400, body
    assert body["error"].startswith("unknown field 'rps'; POST /control takes "), body
    for name in ("requests_per_second", "models_loaded", "fault", "fault_delay_s"):
        assert name in body["error"], body
    assert "__init__" not in body["error"]
    status, body = await post(control, {})
    assert (status, body["requests_per_second"]) == (200, 40.0), "the load is unchanged"


@pytest.mark.parametrize(("change", "said"), [
    ({"requests_per_second": "600"}, "requests_per_second must be a number from -1e+15 to 1e+15, not '600'"),
    ({"requests_per_second": True}, "requests_per_second must be a number from -1e+15 to 1e+15, not True"),
    ({"models_loaded": 2.5}, "models_loaded must be a whole number from 0 to 10000, not 2.5"),
    # found by the property below: a 500 (unhashable list), counters made infinite, a memory filled
    ({"fault": []}, "unknown fault []"),
    ({"requests_per_second": 1e308}, "requests_per_second must be a number from -1e+15 to 1e+15, not 1e+308"),
    ({"models_loaded": 10**9}, "models_loaded must be a whole number from 0 to 10000, not 1000000000"),
    ({"lru_time_published": 1}, "lru_time_published must be true or false, not 1"),
    ({"fault": "broken"}, "unknown fault 'broken'"),
    ([1, 2], "expected a JSON object of fields"),
])
async def test_a_value_of_the_wrong_kind_is_a_400_and_changes_nothing(control: str, change: object,
                                                                      said: str) -> None:
    status, body = await post(control, change)
    assert status == 400 and said in body["error"], body
    async with aiohttp.ClientSession() as session, session.get(control.replace("/control", "/metrics")) as response:
        assert response.status == 200, "the scrape after it still answers"
    assert (await post(control, {}))[1]["requests_per_second"] == 40.0


async def test_the_fields_taken_change_the_load(control: str) -> None:
    status, body = await post(control, {"requests_per_second": 600, "models_loaded": 3, "fault": None})
    assert status == 200, body
    assert (body["requests_per_second"], body["models_loaded"], body["fault"]) == (600, 3, None)


def test_help_names_every_field_control_takes() -> None:
    shown = subprocess.run([sys.executable, "-m", "autoscaler.demo.fake_modelmesh", "--help"], capture_output=True,
                           text=True, check=True).stdout
    assert "POST /control" in shown
    for name in CONTROL_FIELDS:
        assert name in shown, (name, shown)


JSON_VALUE = st.one_of(st.none(), st.booleans(), st.integers(), st.integers(-20, 20), st.floats(allow_nan=True),
                       st.text(max_size=5), st.lists(st.integers(), max_size=2))
FIELD = st.one_of(st.sampled_from(CONTROL_FIELDS), st.sampled_from(sorted(FAULTS)), st.text(max_size=8))


@settings(max_examples=400, deadline=None)
@given(st.dictionaries(FIELD, st.one_of(JSON_VALUE, st.sampled_from(sorted(FAULTS))), max_size=4))
def test_a_control_either_is_refused_changing_nothing_or_leaves_metrics_served(body: dict[str, Any]) -> None:
    """Whatever JSON object comes: a 400 (its one line naming a field) and the fake as it was, or the change
    taken and `/metrics` still rendered; never a change that fails every scrape after it."""
    ticks = itertools.count(step=600)  # ten minutes between reads: counters grow at the rate set
    fake = FakeModelMesh(ModelMeshLoad(requests_per_second=40.0), clock=lambda: float(next(ticks)),
                         wall=lambda: 1.8e9)
    before = (fake.load, fake.fault)
    try:
        changes = control_changes(dict(body))
    except ValueError as error:
        assert (fake.load, fake.fault) == before
        assert "\n" not in str(error) and any(repr(name) in str(error) or name in str(error) for name in body)
        return
    if "fault" in changes or "fault_delay_s" in changes:
        fake.set_fault(changes.pop("fault", fake.fault), changes.pop("fault_delay_s", None))
    fake.update(**changes)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(fake)
    for _ in range(2):
        assert b"modelmesh_instance_models_total" in generate_latest(registry)
