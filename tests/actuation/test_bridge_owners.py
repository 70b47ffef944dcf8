"""`RuntimeOwners` without I/O: who owns a runtime when timestamps tie or are missing, and what a namespace's
fresh list forgets."""

from __future__ import annotations

from typing import Any

from autoscaler.actuation.bridge_owners import RuntimeOwners

JSON = dict[str, Any]


def scale(name: str, runtime: str, created: str | None, replicas: int | None = None, namespace: str = "ml") -> JSON:
    meta: JSON = {"name": name, "namespace": namespace}
    if created is not None:
        meta["creationTimestamp"] = created
    spec: JSON = {"servingRuntime": runtime}
    if replicas is not None:
        spec["replicas"] = replicas
    return {"metadata": meta, "spec": spec}


def test_a_tie_in_the_same_second_goes_by_name_and_an_unknown_age_never_wins() -> None:
    owners = RuntimeOwners()
    owners.note(("ml", "b"), scale("b", "triton", "2026-01-01T00:00:00Z", 3))
    owners.note(("ml", "a"), scale("a", "triton", "2026-01-01T00:00:00Z", 5))
    owners.note(("ml", "0"), scale("0", "triton", None, 7))
    owners.note(("ml", "1"), scale("1", "triton", "not a time", 8))

    assert owners.owner(("ml", "triton")) == ("ml", "a")
    assert owners.owner_replicas("ml", "modelmesh-serving-triton") == 5


def test_an_owner_without_replicas_yet_does_not_let_a_duplicate_ask_count() -> None:
    owners = RuntimeOwners()
    owners.note(("ml", "triton"), scale("triton", "triton", "2026-01-01T00:00:00Z"))
    owners.note(("ml", "copy"), scale("copy", "triton", "2026-01-01T00:01:00Z", 9))

    assert owners.owner_replicas("ml", "modelmesh-serving-triton") is None


def test_a_list_of_one_namespace_forgets_only_what_that_namespace_no_longer_holds() -> None:
    owners = RuntimeOwners()
    owners.note(("ml", "old"), scale("old", "triton", "2026-01-01T00:00:00Z", 2))
    owners.note(("other", "triton"), scale("triton", "triton", "2026-01-01T00:00:00Z", 4, namespace="other"))

    owners.replace("ml", [(("ml", "new"), scale("new", "triton", "2026-01-02T00:00:00Z", 3))])

    assert owners.owner(("ml", "triton")) == ("ml", "new")
    assert owners.owner(("other", "triton")) == ("other", "triton")
    assert len(owners) == 2
    owners.replace(None, [])
    assert len(owners) == 0 and owners.owner(("ml", "triton")) is None
