"""The fake ModelMesh's `POST /control`, as its `--help` presents it to a person running it on its own
(`python -m autoscaler.demo.fake_modelmesh`): a field it does not take is named in a 400, with the fields it takes.

`{"rps": 600}` (the name of its own `--rps` flag) answered `{"error": "ModelMeshLoad.__init__() got an unexpected
keyword argument 'rps'"}`, and `{"requests_per_second": "600"}` was taken, to fail every scrape after it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from autoscaler.demo.fake_modelmesh import CONTROL_FIELDS, FakeModelMesh, ModelMeshLoad, serve


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
    ({"requests_per_second": "600"}, "requests_per_second must be a number, not '600'"),
    ({"requests_per_second": True}, "requests_per_second must be a number, not True"),
    ({"models_loaded": 2.5}, "models_loaded must be a whole number, not 2.5"),
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
