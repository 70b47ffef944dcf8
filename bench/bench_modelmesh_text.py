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

`--with-window` counts the read as the exporter makes it every `--modelmesh-interval`: the parse, then the reading
folded into the load window (`exporter.counters.CounterWindow.add`: the running totals, the ceiling checks, the
jumps), whose checks a parse alone never pays. Each read is of a new body, `INTERVAL_S` after the last, in which
a third of the models were served again (requests, queue delays, now and then a cache miss: counts rising as a
busy pod's do, well under the ceilings). The bodies are rendered before the first read, `--bodies` of them
whatever N, so that two runs of `--parses-only` differ by their reads alone:

    PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        python bench/bench_modelmesh_text.py --parses-only 110 --models 200 --with-window

`--memory` (with `--with-window`) says instead what the reads take in memory (tracemalloc: Python's own
allocations, not the process's resident size, which tests/exporter/test_exporter_memory_limit.py measures):
what a reading of `--models` models leaves held from read to read, and the most a later read adds while it
parses and folds, each against the body's size, as a sidecar with tens of thousands of models reads them:

    python bench/bench_modelmesh_text.py --with-window --memory --models 40000
"""

from __future__ import annotations

import argparse
import random
import sys
import time
import timeit
import tracemalloc
from collections.abc import Callable
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from exporter import modelmesh_text  # noqa: E402
from exporter.counters import CounterWindow  # noqa: E402
from exporter.modelmesh_text import SAMPLES_READ, parse_modelmesh, parse_narrowly, parse_with_library  # noqa: E402
from exporter.settings import ExporterSettings  # noqa: E402
from tests.exporter.modelmesh_wire import ModelMeshContainer  # noqa: E402

WALL = 1_800_000_000.0
METHODS = ("ModelInfer", "ModelMetadata")
CODES = ("OK", "NOT_FOUND")


SETTINGS = ExporterSettings()
INTERVAL_S = SETTINGS.modelmesh_interval_s
"""Seconds between two reads with `--with-window`: the exporter's default `--modelmesh-interval`."""
BODIES = 111
"""`--bodies`' default: enough for `--parses-only 110`, the larger count of the documented pair."""


def model_name(index: int) -> str:
    """`ModelMeshContainer.add_models`' name for its model `index`."""
    return f"model-{index:05d}__isvc-{index * 7919 % 10**10:010d}"


def serving_container(models: int) -> ModelMeshContainer:
    """A per-model ModelMesh that has served `models` models, each by both methods with both codes."""
    container = ModelMeshContainer(lambda: WALL, per_model=True)
    container.add_models(models)  # each model served once by ModelInfer/OK, its cache miss, its queue delay
    for index in range(models):
        for method in METHODS:
            for code in CODES:
                container.serve(3.0, model=model_name(index), method=method, code=code)
    container.publish(models=models, lru_time_s=WALL - 60.0 if models else None)
    return container


def render(container: ModelMeshContainer) -> str:
    """What `container` answers the exporter's request (its `name[]`)."""
    return container.render(frozenset(SAMPLES_READ))


def modelmesh_body(models: int) -> str:
    """What a per-model ModelMesh serving `models` models answers the exporter's request."""
    return render(serving_container(models))


def rising_bodies(models: int, count: int, seed: int = 7) -> list[str]:
    """`count` answers of one ModelMesh, `INTERVAL_S` apart, each after a third of its models were served again:
    1-40 requests each (a few NOT_FOUND, a metadata call now and then), queued, one in ten of them missing the
    cache. Seeded, so that every run reads the same bodies."""
    rng = random.Random(seed)
    container = serving_container(models)
    bodies = [render(container)]
    for _ in range(count - 1):
        for index in rng.sample(range(models), models // 3):
            model = model_name(index)
            method = METHODS[rng.random() < 0.1]
            code = CODES[rng.random() < 0.05]
            container.serve(float(rng.randint(1, 40)), model=model, method=method, code=code,
                            queue_ms=rng.uniform(0.1, 30.0))
            if rng.random() < 0.1:
                container.cache_miss.series[(model, "")].observe(rng.uniform(500.0, 5000.0), 1)
        bodies.append(render(container))
    return bodies


def windowed_reader(bodies: list[str]) -> tuple[Callable[[], object], CounterWindow]:
    """One read as the exporter makes it, of the next body each call: the parse, then the reading folded into an
    exporter's load window (its default settings, returned beside) `INTERVAL_S` after the last. The first call is
    the baseline."""
    window = CounterWindow(SETTINGS.load_window_s, late_s=SETTINGS.modelmesh_timeout_s)
    texts = iter(bodies)
    clock = [1_000.0]

    def read() -> object:
        clock[0] += INTERVAL_S
        return window.add(parse_modelmesh(next(texts)), clock[0])

    return read, window


def cold_read(text: str) -> object:
    """`parse_modelmesh` with no label text seen before."""
    modelmesh_text._NARROW._keys.clear()
    modelmesh_text._NARROW._shared.clear()
    return parse_modelmesh(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--models", type=int, default=200)
    parser.add_argument("--parses-only", type=int, default=0, metavar="N",
                        help="read the body N times, for counting instructions; print nothing")
    parser.add_argument("--library", action="store_true", help="with --parses-only: prometheus_client's path")
    parser.add_argument("--cold", action="store_true", help="with --parses-only: no label text seen before")
    parser.add_argument("--with-window", action="store_true",
                        help="each read also folded into the exporter's load window (CounterWindow.add), a new "
                             f"body every {INTERVAL_S:g} s with its counts risen")
    parser.add_argument("--memory", action="store_true",
                        help="with --with-window: the memory the reads hold and add (tracemalloc), not their time")
    parser.add_argument("--bodies", type=int, default=BODIES, metavar="B",
                        help="with --with-window and --parses-only: bodies rendered before the reads, whatever N "
                             "(at least N + 1)")
    args = parser.parse_args()
    if args.with_window:
        if args.library or args.cold:
            parser.error("--with-window reads as the exporter does: without --library or --cold")
        windowed(parser, args)
        return
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


def windowed(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """`--with-window`: the reads counted (`--parses-only`), measured in memory (`--memory`) or timed against the
    parse alone."""
    if args.memory:
        memory(args.models)
        return
    if args.parses_only:
        if args.bodies < args.parses_only + 1:
            parser.error(f"--bodies {args.bodies} is too few for --parses-only {args.parses_only}: give at least "
                         f"--bodies {args.parses_only + 1} (and the same to the run it is compared with)")
        read, _ = windowed_reader(rising_bodies(args.models, args.bodies))
        for _ in range(args.parses_only + 1):
            read()
        return
    bodies = rising_bodies(args.models, args.runs + 1)
    read, window = windowed_reader(bodies)
    read()  # the baseline
    started = time.perf_counter()
    for _ in range(args.runs):
        read()
    whole = (time.perf_counter() - started) / args.runs
    parse = timeit.timeit(partial(parse_modelmesh, bodies[-1]), number=args.runs) / args.runs
    rates = window.rates()
    served = "no rate yet" if rates is None else (
        f"{rates.requests_per_second:,.1f} req/s, {rates.cache_misses_per_second:.2f} cache misses/s over "
        f"{rates.elapsed_s:g} s")
    print(f"{args.models} models ({len(bodies[-1]):,} bytes), a read every {INTERVAL_S:g} s: parse and window "
          f"{whole * 1e6:,.0f} µs, parse alone {parse * 1e6:,.0f} µs; the window read {served}")


def memory(models: int) -> None:
    """`--memory`: three reads (the first the baseline) of bodies rendered beforehand; what the first leaves held,
    and the most the third adds over what the second left (the bodies, rendered before, not counted)."""
    bodies = rising_bodies(models, 3)
    size = len(bodies[-1])
    read, _ = windowed_reader(bodies)
    tracemalloc.start()
    read()
    held = tracemalloc.get_traced_memory()[0]
    read()
    before = tracemalloc.get_traced_memory()[0]
    tracemalloc.reset_peak()
    read()
    peak = tracemalloc.get_traced_memory()[1] - before
    tracemalloc.stop()
    mib = 1 << 20
    print(f"{models:,} models ({size / mib:.1f} MiB body): held {held / mib:.1f} MiB ({held / size:.2f}x the "
          f"body, {held / max(models, 1) / 1024:.2f} KiB a model); a read adds at most {peak / mib:.1f} MiB "
          f"({peak / size:.2f}x the body)")


if __name__ == "__main__":
    main()
