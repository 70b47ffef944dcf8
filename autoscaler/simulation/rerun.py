"""The command a report's advice gives to compare one setting changed: this run's, as the user can paste it.

A report that says "raise target_lru_age_s" leaves the user to write a policy file and work out the run's flags
again; one slip (maxReplicas, which `simulate` sizes from `target_lru_age_s` itself, or the trace's flags) and
the two reports compare two different clusters. So the advice carries the whole command: the flags this run was
given, `--min-replicas` and `--max-replicas` at this run's values (the bounds held where the setting would move
them), `--policies mean-hpa,skew-aware` (the goal's verdict without the bound's run), and where the setting is a
policy key, a `printf` that writes the policy file: this run's `defaults:` with that key changed, named as the
run's --out (one command's file never overwrites another's). Every path is absolute (a relative `--trace` failed
where the command was pasted in another folder), the program's too (`program`: the bare `modelmesh-autoscaler`
was "command not found" in a shell without the venv activated). Every setting advised is skew-aware's alone, so
that the compare run's mean-hpa is this run's (`--min-replicas`, advised, raised mean-hpa's floor too, and its
ratio read 0.954x where skew-aware's delays fell 6x): skew-aware's floor is the policy file's `min_replicas`."""

from __future__ import annotations

import argparse
import shlex
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Final

from autoscaler.policies.policy import RuntimePolicy
from autoscaler.simulation.hpa_spec import Behavior
from autoscaler.simulation.hpa_windows import DOWN_WINDOW, WINDOWS, behavior_yaml, with_window
from autoscaler.simulation.program import program
from autoscaler.simulation.standard_input import STDIN

COMPARED: Final = "mean-hpa,skew-aware"
"""The policies a comparison runs: skew-aware, and mean-hpa, which its goal is judged against."""
BOUND: Final = "fixed-max"
"""The policy whose run is the report's bound (every pod maxReplicas allows)."""

PATHS: Final = frozenset({"trace"})
"""The flags of `given_flags` that name a file, written absolute."""

SET_HERE: Final = frozenset({"out", "config", "policies", "min_replicas", "max_replicas", "hpa_behavior"})
"""The flags a comparison sets itself (`Rerun.command`); every other flag is passed on as this run had it."""


@dataclass(frozen=True, slots=True)
class Rerun:
    """This run's command, to be run again with one setting changed."""

    given: tuple[str, ...]
    """The flags this run was given other than those of `SET_HERE`, as words of a command line."""
    out: str
    config: str | None
    hpa_behavior: str | None
    min_replicas: int
    max_replicas: int
    """This run's maxReplicas (given, or sized from the trace): held, so that both runs have the same bounds."""
    policy: RuntimePolicy
    """The policy skew-aware ran: `--config`'s `defaults:`, else the built-in one."""
    behavior: Behavior | None
    """The HPA behavior skew-aware ran (`--hpa-behavior`'s, else the shipped one; None: an HPA without one)."""

    def command(self, key: str, value: float) -> str:
        """The command that runs this trace again with the policy key `key` at `value`, or the HPA window `key`
        names (hpa_windows.WINDOWS) at `value` seconds: a shell line, `printf` writing the policy file (or the HPA
        behavior, this run's with that one field changed) first, beside the --out it names."""
        config, behavior = self.config, self.hpa_behavior
        if key in WINDOWS:
            direction = "scaleDown" if key == DOWN_WINDOW else "scaleUp"
            out = f"{self.out}-hpa-{direction}-window-{_shown(value)}"
            behavior = f"{out}.yaml"
            text = behavior_yaml(with_window(self.behavior, key, int(value)))
        else:
            out = f"{self.out}-{key.strip('-')}-{_shown(value)}"
            config = f"{out}.yaml"
            text = policy_yaml(self.policy, key, value)
        first = f"printf {shlex.quote(text)} > {shlex.quote(f'{out}.yaml')} && "
        return first + shlex.join(self._words(self.given, out, config, behavior))

    def cluster_command(self, name: str, drop: tuple[str, ...], bound: bool = False) -> str:
        """The command that runs this trace again without the flags `drop` (and their values): a change to the
        cluster both policies run on, named `name` in its --out; `bound`: fixed-max too, whose Bound line is then
        the changed cluster's."""
        given: list[str] = []
        words = iter(self.given)
        for word in words:
            if word in drop:
                if word not in SWITCHES:
                    next(words, None)
                continue
            given.append(word)
        return shlex.join(self._words(tuple(given), f"{self.out}-{name}", self.config, self.hpa_behavior,
                                      f"{BOUND},{COMPARED}" if bound else COMPARED))

    def _words(self, given: tuple[str, ...], out: str, config: str | None, behavior: str | None,
               policies: str = COMPARED) -> list[str]:
        words = [*program(), "simulate", *given, "--out", out, "--policies", policies,
                 "--min-replicas", str(self.min_replicas), "--max-replicas", str(self.max_replicas)]
        if config is not None:
            words += ["--config", config]
        if behavior is not None:
            words += ["--hpa-behavior", behavior]
        return words


SWITCHES: Final = frozenset({"--queue-untimed"})
"""The flags `cluster_command` drops that take no value."""


def policy_yaml(policy: RuntimePolicy, key: str, value: float) -> str:
    """`printf`'s format for a policy file of `policy`'s `defaults:` with `key` at `value`: the keys that differ
    from the built-in policy, in RuntimePolicy's order (a user's other settings kept, the built-in ones left to
    the code, whatever they are by then)."""
    built_in = RuntimePolicy()
    lines = ["defaults:"]
    for field in fields(RuntimePolicy):
        current = value if field.name == key else getattr(policy, field.name)
        if current is not None and (field.name == key or current != getattr(built_in, field.name)):
            lines.append(f"  {field.name}: {_shown(current)}")
    return "\\n".join(lines) + "\\n"


def _shown(value: object) -> str:
    """A value as a policy file and a command line take it back: short where that is exact (3600, not 3600.0),
    else every digit (0.123456789 read back as 0.123457 would be another run)."""
    if not isinstance(value, float):
        return str(value)
    short = f"{value:g}"
    return short if float(short) == value else repr(value)


def given_flags(args: argparse.Namespace, parser: argparse.ArgumentParser) -> tuple[str, ...]:
    """The flags of `args` that differ from `parser`'s defaults, other than those of `SET_HERE`, as words of a
    command line: a switch by its own form, a list joined by commas."""
    words: list[str] = []
    for action in parser._actions:  # argparse keeps its options there, and only there
        if not action.option_strings or action.dest in SET_HERE or action.dest == "help":
            continue
        value = getattr(args, action.dest, None)
        if value is None or value == action.default:
            continue
        if action.dest in PATHS and str(value) != STDIN:  # pasted in another folder, the path still names it
            value = Path(value).absolute()
        if isinstance(value, bool):
            words.append(action.option_strings[0 if value else 1])
        elif isinstance(value, tuple):
            words += [action.option_strings[0], ",".join(map(str, value))]
        elif action.nargs == 0:  # store_true and kin
            words.append(action.option_strings[0])
        else:
            words += [action.option_strings[0], _shown(value)]
    return tuple(words)
