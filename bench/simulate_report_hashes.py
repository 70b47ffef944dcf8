"""The reports of a few seeded `simulate` runs, hashed: a change meant to make the simulator faster, not
different, must print the same hashes before and after. Each run is the command a user types; the hash is of
report.json less its wall-clock fields (`wall_seconds`), the only values that differ between two runs. Each run
writes to a folder named by its case, given relative to the run's own working folder: the report's advice holds
commands naming `--out`, which a temporary folder's random path would make differ too. Plain script:

    python bench/simulate_report_hashes.py [--quick]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
from pathlib import Path

CASES = {  # name -> simulate's flags: shapes, seeds, model counts, narrow and wide clusters
    "mixed500s0": "--models 500 --hours 6 --shape mixed --seed 0",
    "bursty500s1": "--models 500 --hours 6 --shape bursty --seed 1",
    "churn1000s2": "--models 1000 --hours 4 --shape churn --seed 2 --cache-models 50",
    "heavy3000s3": "--models 3000 --hours 3 --shape heavy-tailed --seed 3",
    "diurnal200s4": "--models 200 --hours 12 --shape diurnal --seed 4 --min-replicas 1",
    "many5000s5": "--models 5000 --hours 6 --shape mixed --seed 5",
    "wide2000s6": "--models 2000 --hours 2 --shape bursty --seed 6 --pod-rps 1 --cache-models 20",
}
QUICK = ("mixed500s0", "churn1000s2", "diurnal200s4")


def without_wall_clock(value: object) -> object:
    if isinstance(value, dict):
        return {k: without_wall_clock(v) for k, v in value.items() if k != "wall_seconds"}
    if isinstance(value, list):
        return [without_wall_clock(v) for v in value]
    return value


def report_hash(flags: str, folder: Path, name: str) -> str:
    subprocess.run([sys.executable, "-m", "autoscaler.cli", "simulate", "--synthetic", *flags.split(), "--out",
                    name, "--no-plot", "--quiet"], check=True, stdout=subprocess.DEVNULL, cwd=folder)
    report = without_wall_clock(json.loads((folder / name / "report.json").read_text()))
    return hashlib.sha256(json.dumps(report, sort_keys=True).encode()).hexdigest()[:16]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=f"only {', '.join(QUICK)}")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        for name, flags in CASES.items():
            if not args.quick or name in QUICK:
                print(f"{name:<13} {report_hash(flags, Path(directory), name)}", flush=True)


if __name__ == "__main__":
    main()
