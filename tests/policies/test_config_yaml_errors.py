"""A YAML mistake in the policy file (`--config`) is one line naming the file, line and column, as a user runs
`serve` and `simulate`: PyYAML's own message is five lines of copied text and carets that name
"<unicode string>" rather than the file (the shape `simulate --hpa-behavior` already had)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from autoscaler.policies import strict_yaml
from autoscaler.policies.config import ConfigError
from autoscaler.policies.config_file import load_policy_book
from autoscaler.policies.yaml_errors import yaml_error_text
from tests.simulation.runs import FAILED

REPO = Path(__file__).resolve().parents[2]

# `target_gpu_busy: 0.8` is one space short under `defaults:`: PyYAML stops at line 3, column 2
BAD = "defaults:\n   skew_order: 2\n  target_gpu_busy: 0.8\n"


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "autoscaler.cli", *args], capture_output=True, text=True,
                          timeout=120, cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(REPO)})


TWICE = "defaults:\n  skew_order: 3\n  target_gpu_busy: 0.8\n  skew_order: 4\n"
"""`skew_order` given twice in one mapping: PyYAML kept the last, 4, without a word."""

MISTAKES = [
    pytest.param(BAD, "3:3: not valid YAML: ", id="indentation"),
    pytest.param(TWICE, "4:3: not valid YAML: found duplicate key 'skew_order' (first at line 2)", id="key-twice"),
]
"""(policy text, what follows `FILE:` in the one line that names the mistake)."""


@pytest.mark.parametrize(("text", "said"), MISTAKES)
def test_serve_names_the_line_and_column_of_a_yaml_mistake_in_one_line(tmp_path: Path, text: str,
                                                                       said: str) -> None:
    policy = tmp_path / "bad.yaml"
    policy.write_text(text)
    result = run(tmp_path, "serve", "--config", str(policy))
    assert result.returncode == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert f"cannot start: --config {policy}:{said}" in line, line
    assert "<unicode string>" not in line and "fix the file" in line, line


@pytest.mark.parametrize(("text", "said"), MISTAKES)
def test_simulate_names_the_line_and_column_of_a_yaml_mistake_in_one_line(tmp_path: Path, text: str,
                                                                          said: str) -> None:
    policy = tmp_path / "bad.yaml"
    policy.write_text(text)
    result = run(tmp_path, "simulate", "--synthetic", "--models", "5", "--hours", "0.1", "--out",
                 str(tmp_path / "out"), "--no-plot", "--quiet", "--config", str(policy))
    assert result.returncode == 2, result.stderr
    assert result.stderr.count("\n") == 1, result.stderr
    assert result.stderr.startswith(f"{FAILED}{policy}:{said}"), result.stderr
    assert "<unicode string>" not in result.stderr


@given(st.text(alphabet="ab:-[]{}'\"\t #&*!|>\n ,?", max_size=40))
def test_whatever_yaml_a_policy_file_holds_its_error_is_one_line_naming_the_file(text: str) -> None:
    """The promise for any text, not the two mistakes above: one line, the file first, never PyYAML's name."""
    try:
        yaml.safe_load(text)
    except yaml.YAMLError as exc:
        message = yaml_error_text("policy.yaml", exc)
    else:
        return
    assert "\n" not in message and message.startswith("policy.yaml"), message
    assert "<unicode string>" not in message and ": not valid YAML: " in message, message


def test_the_loader_raises_the_one_line_message(tmp_path: Path) -> None:
    policy = tmp_path / "bad.yaml"
    policy.write_text(BAD)
    with pytest.raises(ConfigError) as caught:
        load_policy_book(policy)
    assert str(caught.value).startswith(f"{policy}:3:3: not valid YAML: ")
    assert isinstance(caught.value.__cause__, yaml.YAMLError)


def test_an_edit_with_a_yaml_mistake_is_warned_about_with_its_line_and_column(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The warning for a file edited while running (a ConfigMap updated in place) read PyYAML's message."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("defaults:\n  skew_order: 2\n")
    book = load_policy_book(policy)
    policy.write_text(BAD + "# edited\n")
    with caplog.at_level("WARNING", logger="autoscaler.policies.config"):
        book.notice_file_change()
    [record] = [r for r in caplog.records if "changed on disk" in r.getMessage()]
    assert f"{policy}:3:3: not valid YAML: " in record.getMessage(), record.getMessage()
    assert "<unicode string>" not in record.getMessage()


def test_a_merge_key_may_still_be_overridden() -> None:
    """`<<: *anchor` then a key of the anchor's: the mapping's own key wins, as YAML's merge says; not a repeat."""
    text = "base: &base {skew_order: 3, target_gpu_busy: 0.8}\nruntime:\n  <<: *base\n  skew_order: 4\n"
    assert strict_yaml.safe_load(text)["runtime"] == {"skew_order": 4, "target_gpu_busy": 0.8}


KEYS = st.one_of(st.text(max_size=8), st.integers(), st.booleans())
DOCUMENTS = st.recursive(st.one_of(st.none(), st.integers(), st.text(max_size=8), st.floats(allow_nan=False)),
                         lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                 st.dictionaries(KEYS, inner, max_size=4)), max_leaves=12)


@given(DOCUMENTS)
def test_a_file_without_a_repeated_key_reads_as_pyyaml_reads_it(document: object) -> None:
    text = yaml.safe_dump(document)
    assert strict_yaml.safe_load(text) == yaml.safe_load(text)
