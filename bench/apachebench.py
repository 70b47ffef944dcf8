"""ApacheBench (`ab`, from Debian's apache2-utils) as the benchmarks' load generator in C.

Single-threaded and a fraction of a Python client's CPU a request, it outruns any Python server, so what it
measures is the server (its capacity, and at saturation its queue), not the client's own core.

Answers that are not 2xx are counted by status and returned, as ab and wrk report them, not raised: a
benchmark that aborts on the first 503 leaves its user with no figures and no idea how many there were. The
caller decides what a share of them means for the run's latencies (ab's percentiles include every answer).

ab runs at a raised priority where allowed (`bench.client_priority`)."""

from __future__ import annotations

import math
import re
import subprocess
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from bench.client_priority import prioritized_command

_NOT_2XX = re.compile(rb"^WARNING: Response code not 2xx \((\d{3})\)$", re.M)
_SUMMARY = ("Complete requests", "Failed requests", "Non-2xx responses", "Keep-Alive requests",
            "Time taken for tests")


@dataclass
class AbRun:
    requests: int
    """Requests answered (ab's "Complete requests"), whatever their status."""
    seconds: float
    percentiles_s: list[float]
    """ab's latency percentiles 0 to 99 (`-e`), in seconds: each stands for 1% of the run's requests, every
    answer included, not-2xx ones too (ab cannot tell them apart in its table)."""
    not_2xx: Counter[int] = field(default_factory=Counter)
    """Answers that were not 2xx, by status."""
    failed: int = 0
    """Requests with no answer: connect, receive or other exceptions (a body of another length than the first is
    not counted: `-l`, since the adapter's values change between refreshes)."""


def parse_ab(stdout: bytes) -> tuple[dict[str, str], Counter[int]]:
    """ab's summary fields and its not-2xx answers by status, from its output at verbosity 2 (one `WARNING:
    Response code not 2xx (NNN)` line per such answer, between logged headers)."""
    fields: dict[str, str] = {}
    for line in stdout.decode(errors="replace").splitlines():
        name, _, value = line.partition(":")
        if name in _SUMMARY:
            fields[name] = value.strip()
    return fields, Counter(int(status) for status in _NOT_2XX.findall(stdout))


def run_ab(url: str, client_pem: Path, headers: dict[str, str], seconds: float, concurrency: int) -> AbRun:
    """`concurrency` keep-alive connections (HTTP/1.0 keep-alive) presenting `client_pem` (certificate and key)
    and `headers`, one request in flight on each, for `seconds`. Raises if ab fails or if the connections were
    not kept alive (the figures would measure handshakes); answers that are not 2xx and requests that failed are
    counted in the result. ab runs at a raised priority where allowed (`bench.client_priority`). ab counts its
    time limit in whole seconds (it reads `-t 0.5` as 0, no limit: then it would send its 100 million
    requests), so `seconds` is rounded up. Verbosity 2 is what makes ab name each not-2xx status; it also logs
    every answer's headers, so its output goes to a file rather than a pipe that could stall it."""
    seconds = max(1, math.ceil(seconds))
    with tempfile.NamedTemporaryFile(suffix=".csv") as percentages, tempfile.TemporaryFile() as output:
        command = prioritized_command([
            "ab", "-k", "-q", "-l", "-v", "2", "-c", str(concurrency), "-t", str(seconds), "-n", "100000000",
            "-E", str(client_pem), "-e", percentages.name,
            *(arg for name, value in headers.items() for arg in ("-H", f"{name}: {value}")), url])
        result = subprocess.run(command, stdout=output, stderr=subprocess.PIPE, timeout=seconds + 30)
        table = [float(line.split(",")[1]) / 1000 for line in Path(percentages.name).read_text().splitlines()[1:]]
        output.seek(0)
        stdout = output.read()
    fields, not_2xx = parse_ab(stdout)
    if result.returncode != 0 or "Complete requests" not in fields:
        raise RuntimeError(f"ab failed: {result.stderr.decode(errors='replace') or stdout[-2000:]!r}")
    complete = int(fields["Complete requests"])
    if sum(not_2xx.values()) != int(fields.get("Non-2xx responses", "0")):
        raise RuntimeError(f"{url}: ab counted {fields.get('Non-2xx responses', '0')} non-2xx answers but logged "
                           f"{sum(not_2xx.values())}")
    if int(fields.get("Keep-Alive requests", "0")) < 0.99 * complete:
        raise RuntimeError(f"{url}: connections were not kept alive; the figures would measure handshakes")
    return AbRun(complete, float(fields["Time taken for tests"].split()[0]), table, not_2xx,
                 int(fields["Failed requests"].split()[0]))
