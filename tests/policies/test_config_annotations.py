"""Policy annotations as platform engineers write them: near-miss names, pairs of bounds, edits while running."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from autoscaler.model import RuntimeKey
from autoscaler.policies.config import ConfigError, PolicyBook
from autoscaler.policies.config_file import load_policy_book
from autoscaler.policies.policy import RuntimePolicy

TRITON = RuntimeKey("default", "modelmesh-serving-triton")
PREFIX = "autoscaler.modelmesh.io/"
LOGGER = "autoscaler.policies.config"


@pytest.mark.parametrize(
    "annotation",
    [
        "autoscaling.modelmesh.io/target-rps-per-pod",
        "modelmesh.io/target-rps-per-pod",
        "autoscaler.modelmesh.com/target-rps-per-pod",
        "autoscaler.modelmesh.io.target_rps_per_pod",
        "target-rps-per-pod",
    ],
)
def test_a_policy_key_under_the_wrong_prefix_is_warned_about_not_silently_ignored(
    caplog: pytest.LogCaptureFixture, annotation: str
) -> None:
    book = PolicyBook()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):  # every refresh
            policy = book.policy_for(TRITON, {annotation: "120", "deployment.kubernetes.io/revision": "3"})
    assert policy == RuntimePolicy()  # not applied: the prefix is what says it is ours
    [record] = caplog.records
    message = record.getMessage()
    assert str(TRITON) in message and annotation in message
    assert PREFIX + "target-rps-per-pod" in message  # the fix


def test_other_tools_annotations_are_not_warned_about(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        PolicyBook().policy_for(TRITON, {"deployment.kubernetes.io/revision": "3", "app.kubernetes.io/name": "x",
                                         "kubectl.kubernetes.io/last-applied-configuration": "{}"})
    assert caplog.records == []


def test_an_annotation_pair_is_applied_together_not_one_at_a_time(caplog: pytest.LogCaptureFixture) -> None:
    """The file says min 3; the Deployment asks for 1..2. Applied one by one (max first), max 2 < min 3
    was refused and the runtime scaled with no cap."""
    book = PolicyBook(defaults=RuntimePolicy(min_replicas=3))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        policy = book.policy_for(TRITON, {PREFIX + "min-replicas": "1", PREFIX + "max-replicas": "2"})
    assert (policy.min_replicas, policy.max_replicas) == (1, 2)
    assert caplog.records == []


def test_contradicting_bound_annotations_name_both_values(caplog: pytest.LogCaptureFixture) -> None:
    """A swapped pair (min 5, max 2): keeping min 5 pinned the runtime above either bound meant; neither stands."""
    book = PolicyBook(defaults=RuntimePolicy(max_replicas=10))
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        policy = book.policy_for(TRITON, {PREFIX + "min-replicas": "5", PREFIX + "max-replicas": "2"})
    assert (policy.min_replicas, policy.max_replicas) == (None, 10)
    # each line names both, the max's 2 once: beside its annotation, or (on min's line) as what min is refused for
    lines = [record.getMessage() for record in caplog.records]
    for message, written, max_named in zip(lines, ("min-replicas='5'", "max-replicas='2'"),
                                           (", got 2; min_replicas is 5", "max-replicas='2': "), strict=True):
        assert written in message and max_named in message and "min_replicas is 5" in message, message
    assert "got" not in lines[1], lines[1]


def test_an_annotation_changed_or_removed_while_running_is_logged_once(caplog: pytest.LogCaptureFixture) -> None:
    book = PolicyBook(defaults=RuntimePolicy(max_replicas=10))
    steps = [{PREFIX + "max-replicas": "8"}, {PREFIX + "max-replicas": "4"}, {}]
    seen = []
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for annotations in steps:
            for _ in range(3):  # every refresh
                seen.append(book.policy_for(TRITON, annotations).max_replicas)
    assert seen == [8, 8, 8, 4, 4, 4, 10, 10, 10]
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages  # the first sight is not a change; each change once
    assert str(TRITON) in messages[0] and "max_replicas 8 -> 4" in messages[0]
    assert "max_replicas 4 -> 10" in messages[1]


def test_a_change_to_a_large_number_is_logged_as_written(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The policy file's 120 requests a second, then an annotation of 1000000 (the most the key takes): the
    change was logged as `120 -> 1e+06`, a number nobody wrote."""
    path = tmp_path / "policy.yaml"
    path.write_text("defaults:\n  target_rps_per_pod: 120\n")
    book = load_policy_book(path)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for annotations in ({}, {PREFIX + "target-rps-per-pod": "1000000"}, {PREFIX + "target-rps-per-pod": "0.5"}):
            book.policy_for(TRITON, annotations)
    changes = [r.getMessage() for r in caplog.records if "policy annotations changed" in r.getMessage()]
    assert [line.rsplit(": ", 1)[1] for line in changes] == [
        "target_rps_per_pod 120 -> 1000000", "target_rps_per_pod 1000000 -> 0.5"], changes


def test_a_file_entry_that_matches_no_runtime_is_warned_about_once_with_the_likely_name(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """`deployment: triton` names the ServingRuntime, not its Deployment: without a word the runtime that
    exists scaled on the defaults."""
    book = PolicyBook(runtimes={RuntimeKey("default", "triton"): RuntimePolicy(target_rps_per_pod=120.0)})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):  # every refresh
            book.warn_unmatched({TRITON})
    [record] = caplog.records
    message = record.getMessage()
    assert "default/triton" in message and "deployment: modelmesh-serving-triton" in message


def test_a_file_entry_is_not_warned_about_before_anything_is_discovered(caplog: pytest.LogCaptureFixture) -> None:
    book = PolicyBook(runtimes={TRITON: RuntimePolicy()})
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        book.warn_unmatched(set())
        book.warn_unmatched({TRITON})
    assert caplog.records == []


def test_a_policy_file_edited_while_running_is_logged_once_as_needing_a_restart(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """The ConfigMap edited, the kubelet updates the mounted file, and nothing changed and nothing said so."""
    path = tmp_path / "policy.yaml"
    path.write_text("defaults: {target_gpu_busy: 0.8}\n")
    book = load_policy_book(path)
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        book.notice_file_change()
        assert caplog.records == []
        path.write_text("defaults: {target_gpu_busy: 0.6}\n")
        for _ in range(3):  # every refresh
            book.notice_file_change()
        path.write_text("defaults: {target_gpu_busy: 60}\n")
        book.notice_file_change()
    assert book.policy_for(TRITON).target_gpu_busy == 0.8  # read at start only, as documented
    first, second = (r.getMessage() for r in caplog.records)
    assert str(path) in first and "restart" in first
    assert "target_gpu_busy must be in (0, 1]" in second and "would not start" in second


def test_a_flag_the_policy_file_replaces_is_said_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """`--skew-order 3` with the shipped file (which restates `skew_order: 2`) ran on 2 without a word."""
    path = tmp_path / "policy.yaml"
    path.write_text("defaults: {skew_order: 2, min_coverage: 0.5}\n")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        book = load_policy_book(path, base=RuntimePolicy(skew_order=3.0), given_by={"skew_order": "flag --skew-order"})
    assert book.policy_for(TRITON).skew_order == 2.0  # the documented order: the file's defaults win
    [message] = [r.getMessage() for r in caplog.records]
    assert "--skew-order" in message and "3" in message and "{skew_order: 2}" in message and str(path) in message


def test_an_empty_policy_file_is_said_at_start(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = tmp_path / "policy.yaml"
    path.write_text("# nothing yet\n")
    with caplog.at_level(logging.INFO, logger=LOGGER):
        load_policy_book(path)
    [message] = [r.getMessage() for r in caplog.records]
    assert str(path) in message and "empty" in message


def test_an_out_of_range_edit_keeps_the_last_good_value_and_removing_it_gives_the_files(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """max-replicas=8 edited to 0 removed the cap (the file sets none) until someone read the log."""
    book = PolicyBook(runtimes={TRITON: RuntimePolicy(max_replicas=20)})
    seen = []
    with caplog.at_level(logging.INFO, logger=LOGGER):
        for annotations in ({PREFIX + "max-replicas": "8"}, {PREFIX + "max-replicas": "0"}, {}):
            seen.append(book.policy_for(TRITON, annotations).max_replicas)
    assert seen == [8, 8, 20]
    ignored, removed = (r.getMessage() for r in caplog.records)
    assert "max-replicas='0'" in ignored and "keeps max_replicas 8" in ignored, ignored
    assert "remove the annotation for max_replicas 20" in ignored, ignored
    assert "max_replicas 8 -> 20" in removed


def test_an_unchanged_bad_annotation_is_not_warned_again_when_another_changes(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Each edit of target-rps-per-pod warned again about skew-ordr and 80%, as if the edit had caused them."""
    book = PolicyBook()
    bad = {PREFIX + "skew-ordr": "3", PREFIX + "target-gpu-busy": "80%"}
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for rps in ("10", "20", "30"):
            book.policy_for(TRITON, {**bad, PREFIX + "target-rps-per-pod": rps})
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    assert any("skew-ordr='3'" in m for m in messages) and any("'80%'" in m for m in messages)


@pytest.mark.parametrize("change", ["deleted", "not_utf8", "directory"])
def test_a_policy_file_a_restart_would_refuse_is_said_while_running(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, change: str
) -> None:
    """A ConfigMap key renamed or removed logged nothing, and the next rollout crash-looped (exit 2)."""
    path = tmp_path / "policy.yaml"
    path.write_text("defaults: {target_gpu_busy: 0.8}\n")
    book = load_policy_book(path)
    path.unlink()
    if change == "not_utf8":
        path.write_bytes(b"defaults: {skew_order: 3} # \xff\n")
    elif change == "directory":
        path.mkdir()
    with caplog.at_level(logging.WARNING, logger=LOGGER):
        for _ in range(3):  # every refresh
            book.notice_file_change()
    with pytest.raises(ConfigError) as refused:  # what a restart says
        load_policy_book(path)
    [message] = [r.getMessage() for r in caplog.records]
    assert str(refused.value).split(": ", 1)[1] in message, message
    assert "would not start" in message and str(path) in message
