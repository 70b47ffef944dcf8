"""The reports of a few seeded `simulate` runs, hashed: a change meant to make the simulator faster, not
different, must print the same hashes before and after. Each run is the command a user types; the hash is of
report.json less its wall-clock fields (`wall_seconds`), the only values that differ between two runs, and with
the run's folder and the program's path written as fixed words: the report's advice holds commands that name
both by absolute path (`--out`, the policy file), and a temporary folder's random path (or another checkout's
venv) made the same results hash differently on every run. Plain script:

    python bench/simulate_report_hashes.py [--quick]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

from autoscaler.simulation.program import program

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


FOLDER = "<folder>"
PROGRAM = "<program>"
"""The words the report's paths are written as: where a run was made, and by which install, is no result."""


def comparable(value: object, folder: str) -> object:
    """`value` less its wall-clock fields, `folder` and this program's own words written as fixed words."""
    if isinstance(value, dict):
        return {k: comparable(v, folder) for k, v in value.items() if k != "wall_seconds"}
    if isinstance(value, list):
        return [comparable(v, folder) for v in value]
    if isinstance(value, str):
        return value.replace(shlex.join(program()), PROGRAM).replace(folder, FOLDER)
    return value


def report_hash(flags: str, folder: Path, name: str) -> str:
    subprocess.run([sys.executable, "-m", "autoscaler.cli", "simulate", "--synthetic", *flags.split(), "--out",
                    name, "--no-plot", "--quiet"], check=True, stdout=subprocess.DEVNULL, cwd=folder)
    # The run names its --out by its working folder's real path (os.getcwd()), links such as macOS's /tmp resolved
    report = comparable(json.loads((folder / name / "report.json").read_text()), str(folder.resolve()))
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
