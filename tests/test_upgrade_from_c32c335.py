"""Upgrading from release c32c335 (the previous one) without a runtime going unserved: what that release's sidecars
answer and what its manifests set, captured in tests/upgrade/ (each file says how it was made), read by today's code.

- New adapter, old sidecars (the adapter is upgraded first, the sidecars runtime by runtime after): a runtime whose
  pods run yesterday's exporter and today's side by side is read in full, by the real scrape source over HTTP. The
  old sidecar names no pod (`modelmesh_exporter_pod_info` is new): it must be read as before, never refused as
  another pod's, although today's discovery gives every pod its uid.
- Today's adapter started with yesterday's Deployment (its args and env), and today's exporter with yesterday's
  sidecar and PodResources patches' variables: a replica or sidecar that refuses them never becomes Ready.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from pytest_aiohttp import AiohttpServer

from autoscaler.cli import build_parser
from autoscaler.model import RuntimeKey
from autoscaler.policies.aggregation import aggregate
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.serve_args import settings_from_args
from autoscaler.sources.base import PodTarget
from exporter.settings import parse_settings
from tests.support.upgrade_sidecars import (
    captured_metrics,
    read_mixed_runtime,
    replayed_sidecar,
    todays_sidecar,
)

RELEASE = Path(__file__).with_name("upgrade")
KEY = RuntimeKey("modelmesh-serving", "modelmesh-serving-triton")
NEW_POD = {"EXPORTER_POD_NAME": "modelmesh-serving-triton-new", "EXPORTER_POD_NAMESPACE": KEY.namespace,
           "EXPORTER_POD_UID": "5d1e7c3a-1111-4c1d-9e7a-2f0d6b8c9a22"}


def old_exporter_text() -> str:
    """The old sidecar's /metrics answer, without the fixture's own header."""
    return captured_metrics("c32c335")


def old_manifests() -> dict[str, Any]:
    loaded: dict[str, Any] = yaml.safe_load((RELEASE / "c32c335-manifests.yaml").read_text())
    return loaded


def env_of(entries: list[dict[str, Any]], downward: str) -> dict[str, str]:
    """The variables of a container's `env` entries, a downward-API one (`valueFrom`) given the value `downward`."""
    return {entry["name"]: entry.get("value", downward if "valueFrom" in entry else "") for entry in entries}


@pytest.fixture
async def old_sidecar(aiohttp_server: AiohttpServer) -> str:
    """An old sidecar's URL: a server answering its captured /metrics, as it would answer every scrape."""
    return await replayed_sidecar(aiohttp_server, old_exporter_text())


@pytest.fixture
async def new_sidecar(tmp_path: Path) -> AsyncIterator[str]:
    """Today's exporter, a real process naming its pod as the sidecar patch makes it, reading a fake ModelMesh."""
    async with todays_sidecar(tmp_path, NEW_POD) as url:
        yield url


@pytest.mark.slow
async def test_a_runtime_of_old_and_new_sidecars_is_read_in_full_by_the_new_adapter(
        old_sidecar: str, new_sidecar: str) -> None:
    old = PodTarget("modelmesh-serving-triton-old", True, old_sidecar, uid="0b3c2a4e-5f61-4c1d-9e7a-2f0d6b8c9a11")
    new = PodTarget(NEW_POD["EXPORTER_POD_NAME"], True, new_sidecar, uid=NEW_POD["EXPORTER_POD_UID"])
    source, snapshot, now = await read_mixed_runtime(KEY, old, new)
    try:
        assert source.problems(KEY) == (), source.problems(KEY)  # neither refused (other_pod), nor garbage
        by_name = {pod.name: pod for pod in snapshot.pods}
        read = by_name[old.name]
        assert read.requests_per_second == pytest.approx(40.04828045622268)
        assert read.gpu_busy == pytest.approx((0.75 + 0.2) / 2)
        assert read.cache_used_ratio == 0.5 and read.models_loaded == 8.0
        assert read.recent_models is not None and len(read.recent_models) == 8
        assert by_name[new.name].requests_per_second is not None
        values = aggregate(snapshot.pods, RuntimePolicy(target_rps_per_pod=100.0), now)
        assert values.n == 2 and values.request_rate is not None  # both pods' load counts: the runtime is served
    finally:
        await source.close()


def test_the_new_adapter_starts_with_the_old_deployments_args_and_env() -> None:
    container = old_manifests()["adapter"]
    env = env_of(container["env"], "modelmesh-autoscaler")
    args = [arg.replace("$(POD_NAMESPACE)", env["POD_NAMESPACE"]) for arg in container["args"]]
    parsed = build_parser().parse_args(args)  # argparse exits (status 2) on a flag or value it refuses
    settings = settings_from_args(parsed, env)
    assert settings.shutdown_delay_s == 5.0  # `5s`: the old release took a unit on this flag alone
    assert settings.leader_elect is True  # `--leader-elect=true`, a switch's old spelling


@pytest.mark.parametrize("patches", [("exporter_sidecar_patch_env",),
                                     ("exporter_sidecar_patch_env", "exporter_pod_resources_patch_env")],
                         ids=["sidecar", "sidecar+pod-resources"])
def test_the_new_exporter_starts_with_the_old_patches_variables(patches: tuple[str, ...]) -> None:
    """A runtime patched yesterday keeps its `env` when only its sidecar's image changes."""
    env: dict[str, str] = {}
    for patch in patches:
        env.update(env_of(old_manifests()[patch], "modelmesh-serving-triton-0"))
    settings = parse_settings([], env)  # exits (status 2) on a variable it refuses
    assert settings.load_window_s == 30.0 and settings.modelmesh_insecure
    if "exporter_pod_resources_patch_env" in patches:
        assert settings.pod_resources_socket is not None
        assert settings.pod_name == "modelmesh-serving-triton-0"  # the older EXPORTER_GPU_POD_NAME still names it
