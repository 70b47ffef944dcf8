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
        python bench/bench_modelmesh_text.py --parses-only 110 --models 200 [--library | --cold]

`--library` makes `--parses-only` read with prometheus_client's parser alone (the path before the narrow reader);
`--cold` forgets the narrow reader's label keys before each read, as at the exporter's first read (or after a
restart of ModelMesh), where every label text is new.
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
from exporter.modelmesh_text import SAMPLES_READ, parse_modelmesh, parse_narrowly, parse_with_library  # noqa: E402
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


def cold_read(text: str) -> object:
    """`parse_modelmesh` with no label text seen before."""
    modelmesh_text._NARROW._keys.clear()
    return parse_modelmesh(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--parses-only", type=int, default=0, metavar="N",
                        help="read the body N times, for counting instructions; print nothing")
    parser.add_argument("--library", action="store_true", help="with --parses-only: prometheus_client's path")
    parser.add_argument("--cold", action="store_true", help="with --parses-only: no label text seen before")
    args = parser.parse_args()
    text = modelmesh_body(args.models)
    read = parse_with_library if args.library else cold_read if args.cold else parse_modelmesh
    if args.parses_only:
        read(text)
        for _ in range(args.parses_only):
            read(text)
        return
    if parse_narrowly(text) is None:
        print("the narrow reader gave up on this body: parse_modelmesh read it with prometheus_client")
    timings = {label: timeit.timeit(partial(function, text), number=args.runs) / args.runs
               for label, function in (("parse_modelmesh", parse_modelmesh), ("first read", cold_read),
                                       ("prometheus_client", parse_with_library))}
    library = timings["prometheus_client"]
    print(f"{args.models} models ({len(text):,} bytes): " + ", ".join(
        f"{label} {seconds * 1e6:,.0f} µs ({library / seconds:.1f}x)" for label, seconds in timings.items()))


if __name__ == "__main__":
    main()
