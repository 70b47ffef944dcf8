"""ApacheBench (`ab`, from Debian's apache2-utils) as the benchmarks' load generator in C.

Single-threaded and a fraction of a Python client's CPU a request, it outruns any Python server, so what it
measures is the server (its capacity, and at saturation its queue), not the client's own core.

ab runs at a raised priority where allowed (`bench.client_priority`)."""

from __future__ import annotations

import math
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bench.client_priority import prioritized_command


@dataclass
class AbRun:
    requests: int
    seconds: float
    percentiles_s: list[float]
    """ab's latency percentiles 0 to 99 (`-e`), in seconds: each stands for 1% of the run's requests."""


def run_ab(url: str, client_pem: Path, headers: dict[str, str], seconds: float, concurrency: int) -> AbRun:
    """`concurrency` keep-alive connections (HTTP/1.0 keep-alive) presenting `client_pem` (certificate and key)
    and `headers`, one request in flight on each, for `seconds`. Raises if ab fails, if any request fails or
    is not a 2xx, or if the connections were not kept alive (the figures would measure handshakes). ab runs at
    a raised priority where allowed (`bench.client_priority`). ab counts its time limit in whole seconds (it
    reads `-t 0.5` as 0, no limit: then it would send its 100 million requests), so `seconds` is rounded up."""
    seconds = max(1, math.ceil(seconds))
    with tempfile.NamedTemporaryFile(suffix=".csv") as percentages:
        command = prioritized_command([
            "ab", "-k", "-q", "-c", str(concurrency), "-t", str(seconds), "-n", "100000000",
            "-E", str(client_pem), "-e", percentages.name,
            *(arg for name, value in headers.items() for arg in ("-H", f"{name}: {value}")), url])
        result = subprocess.run(command, capture_output=True, text=True, timeout=seconds + 30)
        table = [float(line.split(",")[1]) / 1000 for line in Path(percentages.name).read_text().splitlines()[1:]]
    fields = dict(line.split(":", 1) for line in result.stdout.splitlines() if ":" in line)
    if result.returncode != 0 or "Complete requests" not in fields:
        raise RuntimeError(f"ab failed: {result.stderr or result.stdout}")
    failed = int(fields.get("Non-2xx responses", "0")) + int(fields["Failed requests"].split()[0])
    if failed:
        raise RuntimeError(f"{url}: {failed} requests failed or were not 2xx")
    if int(fields.get("Keep-Alive requests", "0")) < 0.99 * int(fields["Complete requests"]):
        raise RuntimeError(f"{url}: connections were not kept alive; the figures would measure handshakes")
    return AbRun(int(fields["Complete requests"]), float(fields["Time taken for tests"].split()[0]), table)
