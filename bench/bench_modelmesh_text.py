"""Cost of the exporter's read of ModelMesh's `/metrics` (`exporter.modelmesh_text.parse_modelmesh`): the narrow
reader (`exporter.modelmesh_fast`) against prometheus_client's parser (the fallback), on the text a real `mm`
container serves the exporter's `name[]` request with per-model metrics on (`tests/exporter/modelmesh_wire.py`):
`--models M` models each served by 2 methods with 2 codes (4 invoke series a model), each with its queue-delay
and cache-miss series, and the instance gauges. Plain script, no asserts:

    python bench/bench_modelmesh_text.py [--runs 200] [--models 200]

On a shared, noisy machine count instructions instead: `--parses-only N` reads one body N times (after one
warm-up read), nothing timed or printed; under valgrind with two N, the difference over their difference is one
read's instructions (docs/performance.md, "The exporter's read of ModelMesh"):

    PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        python bench/bench_modelmesh_text.py --parses-only 210 --models 200

`--library` makes `--parses-only` read with prometheus_client's parser alone (the path before the narrow reader).
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

from exporter import modelmesh_text  # noqa: E402
from exporter.modelmesh_text import SAMPLES_READ, parse_modelmesh  # noqa: E402
from tests.exporter.modelmesh_wire import ModelMeshContainer  # noqa: E402

WALL = 1_800_000_000.0
METHODS = ("ModelInfer", "ModelMetadata")
CODES = ("OK", "NOT_FOUND")


def modelmesh_body(models: int) -> str:
    """What a per-model ModelMesh serving `models` models answers the exporter's request (its `name[]`)."""
    container = ModelMeshContainer(lambda: WALL, per_model=True)
    container.add_models(models)  # each model served once by ModelInfer/OK, its cache miss, its queue delay
    for index in range(models):
        model = f"model-{index:05d}__isvc-{index * 7919 % 10**10:010d}"  # add_models' name for it
        for method in METHODS:
            for code in CODES:
                container.serve(3.0, model=model, method=method, code=code)
    container.publish(models=models, lru_time_s=WALL - 60.0 if models else None)
    return container.render(frozenset(SAMPLES_READ))


def library_read(text: str) -> object:
    """The read with prometheus_client's parser alone: what `parse_modelmesh` did before the narrow reader."""
    return modelmesh_text.parse_with_library(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--parses-only", type=int, default=0, metavar="N",
                        help="read the body N times, for counting instructions; print nothing")
    parser.add_argument("--library", action="store_true", help="with --parses-only: prometheus_client's path")
    args = parser.parse_args()
    text = modelmesh_body(args.models)
    read = library_read if args.library else parse_modelmesh
    if args.parses_only:
        read(text)
        for _ in range(args.parses_only):
            read(text)
        return
    fast = timeit.timeit(partial(parse_modelmesh, text), number=args.runs) / args.runs
    library = timeit.timeit(partial(library_read, text), number=args.runs) / args.runs
    print(f"{args.models} models ({len(text)} bytes): parse_modelmesh {fast * 1e6:.0f} µs, "
          f"prometheus_client {library * 1e6:.0f} µs ({library / fast:.1f}x)")


if __name__ == "__main__":
    main()
