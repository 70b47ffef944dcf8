"""The janitor the demo leaves beside it (`workdir_janitor`), run as the demo runs it, told of processes as the demo
tells it, and the demo's end of the pipe closed as a SIGKILL closes it: it kills only a process the demo started,
never another that has its id since, and where it cannot tell them apart (no /proc) it kills nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler.demo import workdir_janitor
from autoscaler.demo.workdir_janitor import Janitor, clean_up
from tests.support.processes import poll

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="start times are read from /proc")


@pytest.fixture
def sleeper() -> Iterator[subprocess.Popen[bytes]]:
    process = subprocess.Popen(["sleep", "60"])
    yield process
    process.kill()
    process.wait()


def killed_demo(janitor: Janitor) -> None:
    """What a SIGKILL of the demo does to the janitor's pipe."""
    assert janitor.process.stdin is not None
    janitor.process.stdin.close()


def test_a_process_with_the_id_of_one_the_demo_started_is_left_alone(
        tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """The demo's process ended and its id was given to another (a user's `tail -f`, anything): the janitor checks
    the start time it was told before it signals, and removes the directory at once."""
    janitor = Janitor(tmp_path / "demo", stop_s=0.5)
    (tmp_path / "demo").mkdir()
    assert janitor.process.stdin is not None
    janitor.process.stdin.write(f"{sleeper.pid} 1\n".encode())  # started at tick 1: long gone
    killed_demo(janitor)
    assert janitor.process.wait(timeout=30) == 0
    assert not (tmp_path / "demo").exists()
    assert sleeper.poll() is None


def test_a_process_the_demo_started_that_does_not_stop_is_killed(
        tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    janitor = Janitor(tmp_path / "demo", stop_s=0.5)
    (tmp_path / "demo").mkdir()
    janitor.watch(sleeper.pid)
    killed_demo(janitor)
    assert sleeper.wait(timeout=30) == -9
    assert janitor.process.wait(timeout=30) == 0
    assert not (tmp_path / "demo").exists()


def test_a_released_janitor_leaves_the_directory_and_its_processes(
        tmp_path: Path, sleeper: subprocess.Popen[bytes]) -> None:
    """The demo ended on its own and kept its directory (it failed: the log stays)."""
    janitor = Janitor(tmp_path / "demo", stop_s=0.1)
    (tmp_path / "demo").mkdir()
    janitor.watch(sleeper.pid)
    janitor.release()
    assert janitor.process.returncode == 0
    assert (tmp_path / "demo").exists() and sleeper.poll() is None


def test_without_proc_it_kills_nothing_and_removes_the_directory_once_the_processes_are_gone(
        tmp_path: Path, sleeper: subprocess.Popen[bytes], monkeypatch: pytest.MonkeyPatch) -> None:
    """macOS has no /proc: listing it raised, and the directory stayed even where every process had gone."""
    monkeypatch.setattr(workdir_janitor, "PROC", tmp_path / "no-proc")
    directory = tmp_path / "demo"
    directory.mkdir()
    assert workdir_janitor.start_time(sleeper.pid) is None  # what the demo sends then: "-"
    clean_up(directory, {sleeper.pid: workdir_janitor.UNKNOWN}, stop_s=0.3)
    assert directory.exists() and sleeper.poll() is None  # it may still use the directory
    sleeper.kill()
    sleeper.wait()
    clean_up(directory, {sleeper.pid: workdir_janitor.UNKNOWN}, stop_s=5)
    assert not directory.exists()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.text(st.characters(min_codepoint=32, max_codepoint=126, blacklist_characters="/"), min_size=1,
               max_size=15).filter(lambda name: name not in (".", "..")))  # (names of directories, not files)
def test_any_process_name_reads_its_start_time_until_it_ends(tmp_path: Path, name: str) -> None:
    """/proc/PID/stat gives the name in parentheses before the fields, and a name may hold spaces and ') Z 1 ':
    read wrong, a process with such a name could pass for a zombie, or for one the demo started."""
    (tmp_path / name).unlink(missing_ok=True)
    (tmp_path / name).symlink_to(shutil.which("sleep") or "/bin/sleep")
    process = subprocess.Popen([str(tmp_path / name), "60"])
    try:
        started = workdir_janitor.start_time(process.pid)
        own = workdir_janitor.start_time(os.getpid())
        assert started is not None and own is not None and int(started) >= int(own), started
        assert workdir_janitor.running(process.pid, started)
        assert not workdir_janitor.running(process.pid, str(int(started) + 1))
    finally:
        process.kill()
    poll(lambda: workdir_janitor.start_time(process.pid) is None, timeout=10)  # a zombie: ended, not yet waited for
    process.wait()
