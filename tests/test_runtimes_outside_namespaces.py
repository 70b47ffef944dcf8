"""The start-up warning about policy-file runtimes outside `--namespaces` names exactly those runtimes.

Its promise, for any `--namespaces` and any `runtimes:` entries: said when, and only when, some runtime's
namespace is left out; naming each such runtime and no runtime of a served namespace; telling the user to add
exactly the namespaces missing. Never said without `--namespaces` (every namespace is watched) nor with a targets
file (no Kubernetes discovery). The real `serve` says it in tests/e2e/test_runtime_outside_namespaces.py.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.model import RuntimeKey
from autoscaler.runtimes_outside_namespaces import runtimes_outside_namespaces
from autoscaler.settings import ServeSettings

NAMESPACES = st.sampled_from(["team-a", "team-b", "team-c", "modelmesh-serving"])
RUNTIMES = st.lists(st.builds(RuntimeKey, NAMESPACES, st.sampled_from(["modelmesh-serving-triton", "mlserver"])),
                    max_size=6)


def named(warning: str) -> set[str]:
    """The runtimes the warning names, read back as a user reads them (`names runtimes a/x, b/y, whose ...`)."""
    listed = warning.split(" names ", 1)[1].split(", whose namespace", 1)[0]
    return set(listed.removeprefix("runtimes ").removeprefix("runtime ").split(", "))


def to_add(warning: str) -> set[str]:
    return set(warning.split(" Add ", 1)[1].split(" to ", 1)[0].split(","))


@given(served=st.lists(NAMESPACES, min_size=1, unique=True), runtimes=RUNTIMES)
def test_names_exactly_the_runtimes_outside_and_the_namespaces_to_add(served: list[str],
                                                                      runtimes: list[RuntimeKey]) -> None:
    settings = ServeSettings(namespaces=tuple(served), config=Path("policy.yaml"))
    outside = {key for key in runtimes if key.namespace not in served}

    warning = runtimes_outside_namespaces(settings, runtimes)

    if not outside:
        assert warning is None
        return
    assert warning is not None
    assert named(warning) == {str(key) for key in outside}, warning
    assert to_add(warning) == {key.namespace for key in outside}, warning
    assert f"--namespaces {','.join(served)}:" in warning, warning


@given(runtimes=RUNTIMES)
def test_never_said_when_every_namespace_is_watched_or_with_a_targets_file(runtimes: list[RuntimeKey]) -> None:
    assert runtimes_outside_namespaces(ServeSettings(config=Path("policy.yaml")), runtimes) is None
    assert runtimes_outside_namespaces(ServeSettings(namespaces=("elsewhere",), targets=Path("targets.yaml")),
                                       runtimes) is None


def test_a_namespace_given_by_its_variable_is_named_as_written() -> None:
    settings = ServeSettings(namespaces=("team-a",), config=Path("policy.yaml"),
                             given_by=(("namespaces", "variable AUTOSCALER_NAMESPACES"),))
    warning = runtimes_outside_namespaces(settings, [RuntimeKey("team-c", "modelmesh-serving-triton")])
    assert warning is not None
    assert "is not in AUTOSCALER_NAMESPACES=team-a:" in warning and "Add team-c to AUTOSCALER_NAMESPACES" in warning


def test_what_a_refused_namespace_does_to_its_runtime_is_said_as_it_is() -> None:
    """Its pods refused from the start, the runtime is not served at all: the HPA holds, and cannot scale up
    either. It said the runtime's "values held", as if served and able to rise."""
    settings = ServeSettings(namespaces=("team-a",), config=Path("policy.yaml"))
    warning = runtimes_outside_namespaces(settings, [RuntimeKey("team-c", "modelmesh-serving-triton")])
    assert warning is not None
    assert ("its pods are refused (403) and its values unknown (503), the HPA holding its replicas (no scale-up, "
            "no scale-down)") in warning, warning
