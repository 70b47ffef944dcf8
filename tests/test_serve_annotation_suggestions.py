"""An annotation under our prefix whose key is a word of one policy key (`autoscaler.modelmesh.io/tau=60`) is told
the key it is likely meant as; one that could mean several (`min`: min-replicas or min-coverage) is told none, and
the log lists the policy annotations instead, once for the runtime's mistakes, not once per annotation.

`tau=60` was listed as "no such policy annotation" with no hint: the spelling rule (a key the name starts, else
the closest spelling) finds nothing three letters long, and the platform engineer was left to find the key in
the docs. A running adapter, its runtime annotated in the targets file; the log and /debug as they read.
"""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from autoscaler.policies.policy_values import FIELDS, closest_name
from tests.support.ports import free_port
from tests.support.processes import running, wait_until_logged
from tests.test_serve_policy_edits import POLICY, PREFIX, debug_document, write_targets


def test_a_word_of_one_key_is_suggested_and_an_ambiguous_one_gets_the_list(tmp_path: Path) -> None:
    targets, config, log = tmp_path / "targets.yaml", tmp_path / "policy.yaml", tmp_path / "adapter.log"
    config.write_text(POLICY)
    write_targets(targets, {"tau": "60", "min": "3", "frobnicate": "1"})
    listen = free_port()
    url = f"https://127.0.0.1:{listen}/debug/runtimes/default/rt-a"
    args = ["autoscaler.cli", "serve", "--insecure-dev", "--workers", "0", "--listen", f"127.0.0.1:{listen}",
            "--targets", str(targets), "--config", str(config), "--refresh-interval", "1"]
    with running(args, url, log) as adapter:
        wait_until_logged(adapter, log, f"{PREFIX}tau='60'", f"{PREFIX}min='3'", f"{PREFIX}frobnicate='1'")
        document = debug_document(url)
    assert document["unknown_annotations"] == [
        f"{PREFIX}frobnicate='1': no such policy annotation",
        f"{PREFIX}min='3': no such policy annotation",
        f"{PREFIX}tau='60': no such policy annotation (did you mean {PREFIX}scale-down-tau-s?)",
    ], document["unknown_annotations"]
    lines = log.read_text().splitlines()
    listed = [line for line in lines if "the policy annotations are" in line]
    assert len(listed) == 1, lines  # once, for the two without a suggestion
    for name in FIELDS:
        assert name.replace("_", "-") in listed[0], (name, listed[0])
    assert f"under {PREFIX}" in listed[0], listed[0]


WORDS = sorted({word for name in FIELDS for word in name.split("_")})


@given(words=st.lists(st.sampled_from(WORDS), min_size=1, max_size=3, unique=True),
       joint=st.sampled_from(["-", "_"]))
def test_a_name_of_policy_words_is_told_a_key_only_when_one_key_fits(words: list[str], joint: str) -> None:
    """The keys that fit a name: those it starts, and those that have every one of its words. With one, it is
    the suggestion; with several, none is (`min`, `cache`, `need-weight`): never a guess among them."""
    name = joint.join(words)
    fitting = {key for key in FIELDS
               if key.startswith(name.replace("-", "_")) or set(words) <= set(key.split("_"))}
    suggested = closest_name(name.replace("-", "_"), FIELDS)
    if len(fitting) == 1:
        assert suggested in fitting, (name, suggested)
    elif fitting:
        assert suggested is None, (name, suggested, fitting)
