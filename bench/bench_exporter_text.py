"""Cost of reading one exporter response: the fast reader of our own format against prometheus_client's
parser (the fallback), on the exporter's real output with 1 and 8 GPUs. Plain script, no asserts:

    python bench/bench_exporter_text.py [--runs 2000]
"""

from __future__ import annotations

import argparse
import sys
import timeit
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from autoscaler.sources.exporter_text import fast_samples  # noqa: E402
from autoscaler.sources.exposition import library_samples, parse_exporter_text  # noqa: E402
from bench.bench_fleet import STAMP, exporter_template  # noqa: E402


def eight_gpus(text: str) -> str:
    """The 1-GPU text with seven more GPUs' busy and memory lines."""
    lines = text.splitlines()
    extra = [line.replace('gpu="0"', f'gpu="{gpu}"') for gpu in range(1, 8) for line in lines
             if line.startswith("modelmesh_pod_gpu_") and 'gpu="0"' in line]
    return "\n".join(lines + extra) + "\n"


def list_library_samples(text: str) -> list[object]:
    return list(library_samples(text))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=2000)
    args = parser.parse_args()
    one = STAMP.join(exporter_template(3)).decode()
    for label, text in (("1 GPU", one), ("8 GPUs", eight_gpus(one))):
        assert fast_samples(text) is not None
        fast = timeit.timeit(partial(fast_samples, text), number=args.runs) / args.runs
        library = timeit.timeit(partial(list_library_samples, text), number=args.runs) / args.runs
        whole = timeit.timeit(partial(parse_exporter_text, text, "p", True, 2e9), number=args.runs) / args.runs
        print(f"{label}: fast reader {fast * 1e6:.0f} µs, prometheus_client {library * 1e6:.0f} µs "
              f"({library / fast:.1f}x); parse_exporter_text (fast path) {whole * 1e6:.0f} µs, {len(text)} bytes")


if __name__ == "__main__":
    main()
