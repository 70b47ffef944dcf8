"""`modelmesh-autoscaler demo` as a new user runs it: it shows the served values and leaves nothing behind."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest

from autoscaler.demo.orphans import children
from autoscaler.demo.workdir_janitor import start_time
from tests.demo.demo_output import unwrap
from tests.support.processes import poll, serving_workers
from tests.support.terminal import ctrl_c_after, ctrl_c_once, moments_of_start_up

pytestmark = pytest.mark.slow

DEMO = [sys.executable, "-m", "autoscaler.cli", "demo"]
TARGET = 100.0  # the demo's target_rps_per_pod
RANKED_WORDS = r"\(cost \d+(?:, was \d+)?; lowest[^;()]*; (its models have copies|\d+ models? only it served)\)"
"""A removed pod the adapter ranked, as the HPA line says it: the cost it went by, why the lowest, what it held."""
NOT_READY_WORDS = r"\(still starting: a pod not Ready is the first a scale-down removes\)"
"""A removed pod that had not started, as the HPA line says it (`removals.NOT_READY`)."""


def models_only_it_served(held: str) -> int:
    """The count the removal's words give ("its models have copies": none)."""
    return 0 if held == "its models have copies" else int(held.split()[0])


def workdir_of(output: str) -> str:
    """The demo's directory, from the line that opens its output (wrapped or not: `unwrap`)."""
    match = re.search(r"logs in (\S+)/processes\.log", unwrap(output))
    assert match, output
    return match.group(1)


def opening(stdout: IO[str]) -> str:
    """The demo's output up to the line naming its log: the opening line, wrapped to 80 columns where piped,
    names the log's path on its second line or third (`workdir_of`)."""
    said = ""
    while "/processes.log" not in said and (line := stdout.readline()):
        said += line
    return said


def command_lines(pattern: str) -> list[tuple[int, str]]:
    """Each process whose command line matches `pattern`, with that line, as `pgrep -af` lists them, read from
    /proc here: the tests wait on them every 0.2 s for a minute or more (the full run: 245 looks), and a pgrep run
    cost 10 ms of CPU where a /proc read costs 2."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                line = (entry / "cmdline").read_bytes().rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
                if re.search(pattern, line):
                    found.append((int(entry.name), line))
    return sorted(found)


def pids_of(pattern: str) -> list[int]:
    """`pgrep -f pattern`: `command_lines`."""
    return [pid for pid, _ in command_lines(pattern)]


def processes_using(workdir: str) -> str:
    """`pgrep -af workdir`'s lines (`command_lines`)."""
    return "\n".join(f"{pid} {line}" for pid, line in command_lines(workdir))


SETTINGS_LEFT_IN_THE_SHELL = {"AUTOSCALER_SOURCE": "prometheus", "EXPORTER_MODELMESH_INSECURE": "true"}
"""Settings a user may have left in the shell, which the demo must not take (test_settings_left_in_the_shell_...)."""


def adapter_pid(workdir: str, timeout: float = 45) -> int:
    """The demo's adapter process, once started: the demo starts it after its exporters, which takes a while
    on a loaded machine."""
    deadline, found = time.monotonic() + timeout, list[int]()
    while not found and time.monotonic() < deadline:
        time.sleep(0.2)
        found = pids_of(f"autoscaler.cli serve .*{workdir}")
    assert found, processes_using(workdir)
    return found[0]


def start_demo(args: list[str], output: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[str], str]:
    """The demo started with its output in files under `output` (read whole at the end: a pipe read for the
    first line loses what its buffer held beyond it), and its directory once its first line names it."""
    with open(output / "stdout", "w") as stdout, open(output / "stderr", "w") as stderr:
        demo = subprocess.Popen(args, stdout=stdout, stderr=stderr, text=True, env=env)
    poll(lambda: "\n" in (output / "stdout").read_text() or demo.poll() is not None, timeout=60)
    return demo, workdir_of((output / "stdout").read_text())


ADAPTER_HELD_S = 20.0
"""How long `full_run` holds the adapter stopped as it starts: half the run, as a busy laptop's adapter took
(at load 15 on a 2-core machine it served its first value 25 s into a 40 s run)."""

NEW_EXPORTER_HELD_S = 20.0
"""How long `full_run` holds each exporter a scale-up starts: the pods the hot model brought were still starting
when the traffic dropped at a fixed time, and the ReplicaSet removed them first, unranked."""


def exporters_of(workdir: str) -> set[int]:
    return set(pids_of(f"exporter.cli .*{workdir}"))


def hold_new_exporters(workdir: str, seconds: float, done: threading.Event) -> None:
    """Stop each exporter started from now on for `seconds` as it starts, as a busy machine starts a new pod
    slowly; continue every one still held once `done` is set."""
    seen, held = exporters_of(workdir), dict[int, float]()
    try:
        while not done.wait(0.2):
            for pid in exporters_of(workdir) - seen:
                seen.add(pid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGSTOP)
                    held[pid] = time.monotonic()
            for pid, since in list(held.items()):
                if time.monotonic() - since >= seconds:
                    del held[pid]
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(pid, signal.SIGCONT)
    finally:
        for pid in held:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)


@pytest.fixture(scope="module")
def full_run_as_printed(tmp_path_factory: pytest.TempPathFactory) -> subprocess.CompletedProcess[str]:
    """One whole demo (even load, a hot model, the traffic drop), run once for the tests that read its output:
    a demo takes 40 s to show its scaling, and what they check does not change the run. It runs with settings
    left in the shell that the demo must ignore: the tests of the whole run then show that they change nothing,
    which the demo of its own (15 s) run for that alone showed only by a served value above 0.

    It runs as on a slow machine. Its adapter is held stopped for `ADAPTER_HELD_S` as it starts: the scenario's
    clock started when the processes were started, and a slow adapter's first value came after the hot model
    had gone; the scale-up came during the traffic drop and its pods were removed while still starting. And each
    pod a scale-up starts is held `NEW_EXPORTER_HELD_S` before it answers: the traffic dropped at a fixed time
    all the same, and the pods still starting were the first removed."""
    args = [*DEMO, "--duration", "40", "--interval", "4"]
    output = tmp_path_factory.mktemp("full-run")
    done, holding = threading.Event(), None
    demo, workdir = start_demo(args, output, {**os.environ, **SETTINGS_LEFT_IN_THE_SHELL})
    try:
        adapter = adapter_pid(workdir)
        os.kill(adapter, signal.SIGSTOP)
        time.sleep(ADAPTER_HELD_S)
        os.kill(adapter, signal.SIGCONT)
        holding = threading.Thread(target=hold_new_exporters, args=(workdir, NEW_EXPORTER_HELD_S, done))
        holding.start()
        demo.wait(timeout=240)
    finally:
        done.set()
        if holding is not None:
            holding.join()
        if demo.poll() is None:  # a failed step above: leave no demo running into later tests
            demo.send_signal(signal.SIGTERM)
            demo.wait(timeout=30)
    return subprocess.CompletedProcess(args, demo.returncode, (output / "stdout").read_text(),
                                       (output / "stderr").read_text())


@pytest.fixture(scope="module")
def full_run(full_run_as_printed: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    """`full_run_as_printed` with each of its lines whole (`unwrap`): the tests read what each line says."""
    return subprocess.CompletedProcess(full_run_as_printed.args, full_run_as_printed.returncode,
                                       unwrap(full_run_as_printed.stdout), full_run_as_printed.stderr)


def test_every_line_of_a_whole_run_fits_80_columns_where_piped(
        full_run_as_printed: subprocess.CompletedProcess[str]) -> None:
    """84 of a run's 262 lines ran past 80 columns, the scale lines and their reasons above all, and an 80-column
    terminal broke them mid-word (tests/demo/test_demo_line_width.py). Every kind of line comes in a whole run: the
    scale-ups and -downs with their reasons, the tables with pods starting, the ReplicaSet's order."""
    printed = full_run_as_printed.stdout
    assert full_run_as_printed.returncode == 0, full_run_as_printed.stderr
    assert re.search(r"HPA: .*scale down", unwrap(printed)), printed
    too_long = [line for line in printed.splitlines() if len(line) > 80]
    assert too_long == [], "\n".join(too_long)


def test_demo_prints_what_the_adapter_serves_and_stops_everything(full_run: subprocess.CompletedProcess[str]) -> None:
    result = full_run
    assert result.returncode == 0, result.stderr
    assert "demo finished" in result.stdout
    served = re.findall(r"request_load=([0-9.]+)", result.stdout)
    assert served, f"the adapter never served a value:\n{result.stdout}"
    assert float(served[-1]) > 0
    assert "an HPA on the average would want" in result.stdout
    assert "deletion cost" in result.stdout
    assert processes_using(workdir_of(result.stdout)) == ""


def test_replicas_follow_the_hot_model_up_and_come_down_slowly_least_needed_first(
        full_run: subprocess.CompletedProcess[str]) -> None:
    result = full_run
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "policy: HPA on External modelmesh_desired_replicas AverageValue 1" in out
    replicas = [int(n) for n in re.findall(r"replicas (\d+) \(", out)]
    assert replicas[0] == 4
    assert max(replicas) > 4, out  # up with the hot model
    ups = re.findall(r"HPA: modelmesh_desired_replicas proposes (\d+).*scale up (\d+) -> (\d+)", out)
    downs = re.findall(r"HPA: .*scale down (\d+) -> (\d+) \([^()]*\); removed (.*)", out)
    # after the traffic drop, which waits for the pods still starting (a scale-down while the hot model's copies
    # relieve it may remove one still starting, as the ReplicaSet does, and says so)
    dropped = out[out.index("phase 3 of 3 begins"):]
    downs_after_drop = re.findall(r"HPA: .*scale down (\d+) -> (\d+) \([^()]*\); removed (.*)", dropped)
    assert ups, out
    assert downs, out  # and down again once the traffic drops
    assert "the run ended" not in out, out  # no note of what was not shown: all was
    # up while the hot model runs, not once the traffic has dropped: a table of the hot phase shows the pods added
    hot = [int(n) for n in re.findall(r"\] a hot model lands.*\n  replicas (\d+) \(", out)]
    assert hot and max(hot) > 4, out
    # every pod removed after the drop had served and been ranked: none there at the drop was removed while still
    # starting ("removed demo-5 (deletion cost 0)"); each says why it was the least needed, with the cost the
    # ReplicaSet went by. A pod a scale-up started after the drop may be removed before it started, as the
    # ReplicaSet removes a pod not Ready first, and the line says so.
    added_after_drop = {name for added in re.findall(r"HPA: .*scale up .*; added (.*)", dropped)
                        for name in added.split(", ")}
    for _, _, names in downs_after_drop:
        for removal in re.split(r"; (?=demo-\d+ \()", names):
            name = removal.split()[0]
            words = rf"(?:{RANKED_WORDS}|{NOT_READY_WORDS})" if name in added_after_drop else RANKED_WORDS
            assert re.fullmatch(rf"demo-\d+ {words}", removal), (removal, out)
    # Slowly: after the drop the adapter's slow scale-down (scale_down_tau_s, the one slow-down rail) holds the
    # HPA's count above what its deciding term proposes, and the scale line says so ("scale down 7 -> 6 (the
    # adapter's requests term proposes 3: ...; the adapter's slow scale-down serves 6 meanwhile, ... falling to
    # 3 ...)"). It asked for two scale-downs in the run's wall-clock time, which a starved HPA loop may not get to,
    # and which scale_down_tau_s 0 passed all the same: 8 -> 6, then 6 -> 3 at the drop, then 3 -> 2.
    held_down = [(int(after), int(term)) for after, term in re.findall(
        r"HPA: .*scale down \d+ -> (\d+) \(the adapter's \w+ term proposes (\d+)[^()]*; the adapter's slow "
        r"scale-down serves ", dropped)]
    assert any(after > term for after, term in held_down), out
    said = re.findall(rf"(demo-\d+) {RANKED_WORDS}",
                      " ".join(r for _, _, r in downs))
    removed = [name for name, _ in said]
    assert removed
    # First one of the hot model's pods, whose models have copies: a pod a scale-up added (demo-4 on, holding copies
    # of the hot pod's models, as the README says: ModelMesh's extra copies of hot models) or the hot pod itself,
    # before the three others the runtime started with, each holding the only copies of its own models. The hot pod
    # ties with its copies, and of equal costs the newest goes first; but the costs come from the exporters' rates,
    # each a 6 s window read at its own moment, and as the load falls the hot pod's rate may read under 0.8 of a
    # copy's, a bucket lower: then it goes first, losing no model (a run read "removed demo-0 (cost 300, was 400;
    # lowest, next demo-4 at 400; its models have copies)"), its requests going to the copies.
    first, held_by_first = said[0]
    assert first == "demo-0" or int(first.removeprefix("demo-")) >= 4, out
    assert models_only_it_served(held_by_first) == 0, out
    # While the hot pod runs, an added pod holds no model only it served: the hot pod holds every one of its models
    # (was: "demo-4 (deletion cost 500, 6 models only it served)"). Once the hot pod has gone, the last added pod
    # left holds the only copies of its models, and its removal says so.
    before_the_hot_pod = said[:removed.index("demo-0")] if "demo-0" in removed else said
    assert all(models_only_it_served(held) == 0 for name, held in before_the_hot_pod
               if int(name.removeprefix("demo-")) >= 4), said
    assert "models only it served" in out
    for report in re.split(r"\n\[ *\d+s\] ", out):  # each report names only the pods it lists
        listed = set(re.findall(r"^  (demo-\d+) ", report, re.MULTILINE))
        for order in re.findall(r"the ReplicaSet removes (.*)", report):
            assert set(re.findall(r"demo-\d+", order)) <= listed, report
        if "on scale-down the ReplicaSet removes" in report:
            # costs are on the pods only once the runtime's values are served: no order while it answers 503
            assert re.search(r"desired_replicas=\d", report), report
    assert processes_using(workdir_of(out)) == ""


def hot_pod_loads(out: str) -> list[float]:
    """demo-0's true req/s in each table of the hot phase, in order."""
    return [float(n) for n in re.findall(r"\] a hot model.*\n(?:  .*\n)*?  demo-0 +(\d+) ", out)]


def test_the_hot_models_copies_relieve_the_hot_pod_that_an_hpa_on_the_average_leaves_saturated(
        full_run: subprocess.CompletedProcess[str]) -> None:
    """The hot pod stayed at 345 req/s through the whole hot phase, at maxReplicas, against a target of 100: only
    the other pods' load fell as pods were added, though the README says the added pods hold copies of the hot
    pod's models. As ModelMesh does, the hot model's requests now spread over its copies on the added pods, and the
    hot pod's load falls (its exact loads: tests/demo/test_demo_hot_model.py). The fixture holds each added pod's
    exporter 20 s, so a table shows the hot pod alone first; where the hold came too late on a loaded machine the
    copies may serve by the first table, and the fall is from the hot phase to the drop."""
    out = full_run.stdout
    assert full_run.returncode == 0, full_run.stderr
    loads = hot_pod_loads(out)
    assert loads, out
    highest = loads.index(max(loads))
    assert min([*loads[highest + 1:], *drop_loads(out)]) < loads[highest], out
    # the "average looks fine" line comes only where it holds: below maxReplicas, on the load its table shows
    for table in re.findall(r"\] a hot model[^\n]*\n((?:  [^\n]*\n)*)", out):
        if said := re.search(r"the average looks fine .*, but (demo-\d+) serves (\d+) req/s", table):
            replicas = int(re.search(r"replicas (\d+) ", table).group(1))  # type: ignore[union-attr]
            assert replicas < 8, table
            shown = re.search(rf"^  {said.group(1)} +(\d+) ", table, re.MULTILINE)
            assert shown and shown.group(1) == said.group(2), table


def drop_loads(out: str) -> list[float]:
    """demo-0's true req/s in each table after the traffic drop, in order."""
    return [float(n) for n in re.findall(r"\] traffic drops.*\n(?:  .*\n)*?  demo-0 +(\d+) ", out)]


SCALE_LINE = re.compile(r"HPA: modelmesh_desired_replicas proposes (\d+);(?: [^;]*;)*? scale (up|down) \d+ -> \d+ "
                        r"\((.*?)\)(?:; (?:removed|added) .*)?$")
TERM_DECIDED = re.compile(r"the adapter's (requests|queue|cache|gpu|min_replicas|max_replicas|ready_pods)\b")
NO_REASON = re.compile(r"the adapter's /debug [^:]*: why it scaled is unknown this time(?:; the count is the metrics "
                       r"API's)?|the adapter decides nothing now: .*")


def test_each_scale_says_which_of_the_adapters_terms_decided(full_run: subprocess.CompletedProcess[str]) -> None:
    """'HPA: modelmesh_desired_replicas proposes 7; scale up 5 -> 7' named no reason, though the adapter's /debug
    says which term decided (`winner`). Where /debug did not answer in time (a loaded machine) or the adapter
    decides nothing (too few fresh pods) the line says that instead; and a scale-down to a count above the deciding
    term's names what holds it there (the slow scale-down, or a hold), read from the same /debug document."""
    out = full_run.stdout
    scales = re.findall(r"HPA: .*", out)
    assert scales, out
    for line in scales:
        match = SCALE_LINE.match(line)
        assert match, line
        proposes, direction, why = int(match.group(1)), match.group(2), match.group(3)
        assert TERM_DECIDED.match(why) or NO_REASON.fullmatch(why), line
        term = re.match(r"the adapter's \w+ term proposes (\d+)", why)
        if direction == "down" and term and proposes > int(term.group(1)):
            assert "the adapter's slow scale-down serves" in why or "the adapter holds" in why, line
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_stops_the_demo_and_every_process_it_started(signum: signal.Signals) -> None:
    """SIGHUP too (a terminal closed, an SSH session dropped): it ended the demo alone, leaving the adapter and
    the exporters running, holding their ports, and the directory with the fake ModelMesh's private key."""
    demo = subprocess.Popen([*DEMO, "--duration", "120"], stdout=subprocess.PIPE, text=True)
    assert demo.stdout is not None
    workdir = workdir_of(opening(demo.stdout))
    # the exporters and the adapter are running (the demo starts the adapter last, after a loaded machine's while)
    poll(lambda: "autoscaler.cli serve" in processes_using(workdir), timeout=60)
    demo.send_signal(signum)
    rest, _ = demo.communicate(timeout=30)
    assert demo.returncode == 130
    assert "interrupted: every process stopped." in rest
    assert processes_using(workdir) == ""
    assert not Path(workdir).exists()


@pytest.fixture(scope="module")
def moment_of_start_up() -> Callable[[float], float]:
    """The demo's start-up, measured once on this machine for the five moments below, which run in a row: each
    measure is a demo started until its first line (its whole fleet), as costly as the run it times."""
    return moments_of_start_up([*DEMO, "--duration", "1"], "demo: ")


@pytest.mark.parametrize("share", [0.1, 0.4, 0.7, 1.0, 1.2])
def test_ctrl_c_during_start_up_ends_with_one_line_and_leaves_nothing(
        share: float, moment_of_start_up: Callable[[float], float]) -> None:
    """At any moment of the start-up (while Python imports, while the pods and processes start) Ctrl-C ends
    the demo with status 130 and one line, never a traceback, and stops whatever had started. The moments are
    shares of its start-up time on this machine."""
    run = ctrl_c_after([*DEMO, "--duration", "30"], moment_of_start_up(share))
    assert run.ended_by_ctrl_c, run.output
    assert "Traceback" not in run.output and "KeyboardInterrupt" not in run.output, run.output
    assert run.output.strip().splitlines()[-1] in ("interrupted.", "interrupted: every process stopped."), run.output
    assert run.left == [], f"processes of the demo still running: {run.left}"


def adapter_has_started_its_worker(group: int) -> bool:
    """The adapter's serving worker runs (multiprocessing's spawn, after its resource tracker): both are the
    adapter's children, not the demo's. (`pgrep -g GROUP -f multiprocessing.spawn`.)"""
    for pid in pids_of("multiprocessing.spawn"):
        with contextlib.suppress(OSError):
            if int(Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[2]) == group:  # field 5, pgrp
                return True
    return False


def test_ctrl_c_once_the_adapter_has_started_its_worker_leaves_nothing() -> None:
    """The adapter starts processes of its own (its serving worker and multiprocessing's resource tracker), which
    outlived it: the demo waited for the adapter alone and ended while they still ran, two processes left in the
    terminal's group (`processes of the demo still running: ['26315', '26316']`)."""
    run = ctrl_c_once([*DEMO, "--duration", "120"], adapter_has_started_its_worker)
    assert run.ended_by_ctrl_c, run.output
    assert run.output.strip().splitlines()[-1] == "interrupted: every process stopped.", run.output
    assert run.left == [], f"processes of the demo still running: {run.left}"


def test_settings_left_in_the_shell_do_not_change_the_demo(full_run: subprocess.CompletedProcess[str]) -> None:
    """AUTOSCALER_SOURCE=prometheus (no URL) stopped the demo's adapter at start, and the demo printed
    'starting' until the end; EXPORTER_MODELMESH_INSECURE contradicts the exporters' CA file. The whole run
    (`full_run`) has them set: besides this, every test of its output shows the demo unchanged by them."""
    result = full_run
    assert result.returncode == 0, result.stderr
    served = re.findall(r"request_load=([0-9.]+)", result.stdout)
    assert served and float(served[-1]) > 0, result.stdout


def started_below(pid: int) -> dict[int, str]:
    """Every process running below `pid` (its children, theirs, ...), with the start time that tells each from a
    later process given its id (`workdir_janitor.start_time`)."""
    found, todo = {}, [pid]
    while todo:
        for child in children(todo.pop()):
            if (started := start_time(child)) is not None:
                found[child] = started
                todo.append(child)
    return found


def still_running(started: dict[int, str]) -> list[str]:
    """Those of `started` that still run (a zombie has ended), each as `ps` shows it."""
    alive = [str(pid) for pid, when in started.items() if start_time(pid) == when]
    return subprocess.run(["ps", "-ww", "-o", "pid=,ppid=,stat=,args=", "-p", ",".join(alive)], capture_output=True,
                          text=True).stdout.strip().splitlines() if alive else []


def test_an_adapter_that_stops_ends_the_demo_with_its_reason_keeps_the_log_and_leaves_no_process() -> None:
    """Not 'adapter serves: starting' until the end of the run. And the log the first line points to is kept:
    it was deleted with the demo's directory as the demo ended, so `cat` on the path it printed found nothing.

    And no process is left: the adapter is killed (SIGKILL, as the OOM killer does) while its serving worker is
    stuck (held stopped here), which the adapter's own stop would have killed after its 10 s. Its worker and
    multiprocessing's resource tracker (kept running by the worker's end of its pipe) are no child of the demo's,
    and have no parent-death signal: the demo said "every process stopped" and both ran on, for good, under init
    (`orphans.adopt_orphans` removed from `run_demo`: '... S python -c from multiprocessing.spawn import ...')."""
    demo = subprocess.Popen([*DEMO, "--duration", "60"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    started: dict[int, str] = {}
    try:
        assert demo.stdout is not None
        workdir = workdir_of(opening(demo.stdout))
        adapter = adapter_pid(workdir)
        deadline = time.monotonic() + 45
        log = Path(workdir) / "processes.log"
        while "serving external.metrics.k8s.io" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)  # killed once it has logged, so that the log kept has something to show
        [worker] = serving_workers(adapter)
        started = started_below(demo.pid)
        assert worker in started and len(started) > 3, started  # the exporters, the adapter, its processes
        os.kill(worker, signal.SIGSTOP)
        os.kill(adapter, signal.SIGKILL)
        _, err = demo.communicate(timeout=60)
    finally:
        if demo.poll() is None:  # a failed assertion above: leave no demo running into later tests
            demo.send_signal(signal.SIGTERM)
            demo.communicate(timeout=30)
    try:
        assert demo.returncode == 1, err
        # The reason, and what the adapter's own processes logged last when one did in time (its refresh process
        # and serving worker see their parent gone, and may say so first): either way one line.
        assert re.fullmatch(r"demo: the adapter stopped \(killed by signal 9\)(: [^\n]+)?; every process stopped; "
                            rf"their log is kept in {re.escape(str(log))}\n", err), err
        assert "autoscaler.workers: serving external.metrics.k8s.io" in log.read_text(), "the adapter's lines"
        # the demo has ended: what it left would run on, but one still ending (a zombie not yet reaped) is given time
        with contextlib.suppress(AssertionError):
            poll(lambda: not still_running(started), timeout=30)
        left = still_running(started)
        assert left == [], f"left running after the demo said every process stopped: {left}"
    finally:
        for pid, when in started.items():  # leave nothing into later tests
            if start_time(pid) == when:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
        shutil.rmtree(workdir, ignore_errors=True)


def test_a_demo_that_ends_removes_its_directory(full_run: subprocess.CompletedProcess[str]) -> None:
    """Kept only where it failed: a finished demo leaves nothing behind, and its first line says so."""
    assert "kept if the demo fails" in full_run.stdout.splitlines()[0], full_run.stdout.splitlines()[0]
    assert not Path(workdir_of(full_run.stdout)).exists()


def test_an_adapter_that_serves_no_value_in_time_ends_the_demo_naming_the_flag_that_waits_longer(
        tmp_path: Path) -> None:
    """The scenario starts once the adapter serves its first value; one that never comes (here: an adapter held
    stopped) ends the demo with one line naming `--start-timeout` and what to write on a slower machine, not a
    scenario that plays out to a table of 'starting'."""
    demo, workdir = start_demo([*DEMO, "--duration", "30", "--start-timeout", "5"], tmp_path)
    adapter = None
    try:
        adapter = adapter_pid(workdir)
        os.kill(adapter, signal.SIGSTOP)
        demo.wait(timeout=60)
    finally:
        if adapter is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(adapter, signal.SIGCONT)
        if demo.poll() is None:
            demo.send_signal(signal.SIGTERM)
            demo.wait(timeout=30)
    out, err = (tmp_path / "stdout").read_text(), (tmp_path / "stderr").read_text()
    try:
        assert demo.returncode == 1, out + err
        assert "waiting for the adapter's first value" in out, out
        assert re.fullmatch(r"demo: the adapter served no modelmesh_desired_replicas for "
                            r"default/modelmesh-serving-demo within 5 s \(--start-timeout; on a slower machine give "
                            r"it longer, e\.g\. --start-timeout 60\); its last answer: none \(it does not take "
                            rf"connections yet\); every process stopped; their log is kept in {re.escape(workdir)}/"
                            r"processes\.log\n", err), err
        assert not re.search(r"^\[ *\d+s\]", out, re.MULTILINE), "no table: the scenario never started"
        poll(lambda: processes_using(workdir) == "", timeout=30)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
