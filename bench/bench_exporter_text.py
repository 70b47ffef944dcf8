"""Cost of reading one exporter response: the fast reader of our own format against prometheus_client's
parser (the fallback), on the exporter's real output with 1 and 8 GPUs, and with 1 GPU and `--models` models
served recently (`modelmesh_pod_model_last_served_timestamp_seconds`, one series a model). Plain script, no
asserts:

    python bench/bench_exporter_text.py [--runs 2000] [--models 100]

On a shared, noisy machine count instructions instead: `--parses-only N` reads one text N times (after one
warm-up read), nothing timed or printed; under valgrind with N=10 and N=5010, the difference over 5000 is one
read's instructions (1 GPU: 0.41 M without the series; with 100 models 2.28 M, 1.65 M once the usual run of
model lines was read by one `findall`, 2 December 2026; docs/performance.md, The cost of per-model data, and
"A pod's models in whole" for the figures since, at the exporter's clock unless `--clock-off`; the text names its
pod, as the example sidecar's do, unless `--no-pod-line`: "The pod line in each answer"):

    PYTHONHASHSEED=0 valgrind --tool=cachegrind --cache-sim=no --cachegrind-out-file=/dev/null \
        python bench/bench_exporter_text.py --parses-only 5010 [--models 100] [--clock-off] [--gc-tuned]
"""

from __future__ import annotations

import argparse
import sys
import timeit
from collections.abc import Mapping
from functools import partial
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def parse_args() -> argparse.Namespace:
    """The flags, parsed before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--models", type=int, default=0, help="models served recently (default: none, no series)")
    parser.add_argument("--clock-off", action="store_true",
                        help="scrape at 2e9 (the exporter's clock 25 years behind: every time moved by the offset, "
                             "the figures before 2 December 2026 afternoon); default: at the exporter's clock")
    parser.add_argument("--gc-tuned", action="store_true",
                        help="the refresh process's garbage-collector settings (autoscaler.gcsettings), which reads "
                             "every exporter's response: with Python's defaults, a count moves by tens of thousands "
                             "of instructions a read with how many collections a few allocations more or less cause")
    parser.add_argument("--no-pod-line", action="store_true",
                        help="the exporter names no pod (no modelmesh_exporter_pod_info: a sidecar patched before "
                             "it, and every figure before 4 December 2026); default: it names its pod")
    parser.add_argument("--parses-only", type=int, default=0, metavar="N",
                        help="read the 1-GPU text (with --models) N times, for counting instructions; print nothing")
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()


from autoscaler.sources.exporter_text import fast_samples  # noqa: E402
from autoscaler.sources.exposition import library_samples  # noqa: E402
from bench.bench_fleet import STAMP  # noqa: E402
from bench.fake_exporter import exporter_text  # noqa: E402
from tests.support.exporter_texts import parse_exporter_text  # noqa: E402

MODEL_SERVED_AT = 1234567800.0
"""When the benchmark's models were last served: a minute and a half before the exporter's clock (`STAMP`)."""


def eight_gpus(text: str) -> str:
    """The 1-GPU text with seven more GPUs' busy and memory lines."""
    lines = text.splitlines()
    extra = [line.replace('gpu="0"', f'gpu="{gpu}"') for gpu in range(1, 8) for line in lines
             if line.startswith("modelmesh_pod_gpu_") and 'gpu="0"' in line]
    return "\n".join(lines + extra) + "\n"


def with_models(pod: int, models: Mapping[str, float] | None, names_pod: bool = True) -> str:
    """The 1-GPU text of pod number `pod` (as `exporter_template`'s, at `STAMP`), with `models` served recently
    (None: no per-model series), naming its pod unless not `names_pod` (a sidecar patched before that line)."""
    stamp = float(STAMP)
    return exporter_text(pod, gpus=1, modelmesh_stamp=stamp, gpu_stamp=4e9, clock=stamp, models=models,
                         names_pod=names_pod).decode()


def as_fleet_serves(text: str) -> str:
    """`text` with its timestamps spelt as the fleet benchmark's responses spell them (`STAMP`, where the exporter
    writes `1.2345678905e+09`): `exporter_template`'s text, with or without the pod's line."""
    from prometheus_client.utils import floatToGoString

    return text.replace(floatToGoString(float(STAMP)), STAMP.decode())  # type: ignore[no-untyped-call]


def model_ids(count: int) -> dict[str, float]:
    """`count` model ids as ModelMesh names the models of KServe InferenceServices, all served at one time."""
    return {f"isvc-{number:04d}__isvc-{number * 7919 % 10**10:010d}": MODEL_SERVED_AT for number in range(count)}


def list_library_samples(text: str) -> list[object]:
    return list(library_samples(text))


def main() -> None:
    args = parse_args()
    names_pod = not args.no_pod_line
    one = as_fleet_serves(with_models(3, None, names_pod))
    if args.gc_tuned:
        from autoscaler.gcsettings import tune_for_refresh

        tune_for_refresh()
    scraped_at = 2e9 if args.clock_off else float(STAMP) + 0.5
    if args.parses_only:
        text = with_models(3, model_ids(args.models), names_pod) if args.models else one
        parse_exporter_text(text, "p", True, scraped_at)
        for _ in range(args.parses_only):
            parse_exporter_text(text, "p", True, scraped_at)
        return
    texts = [("1 GPU", one), ("8 GPUs", eight_gpus(one))]
    if args.models:
        texts.append((f"1 GPU, {args.models} models", with_models(3, model_ids(args.models), names_pod)))
    for label, text in texts:
        assert fast_samples(text) is not None
        fast = timeit.timeit(partial(fast_samples, text), number=args.runs) / args.runs
        library = timeit.timeit(partial(list_library_samples, text), number=args.runs) / args.runs
        whole = timeit.timeit(partial(parse_exporter_text, text, "p", True, scraped_at), number=args.runs) / args.runs
        print(f"{label}: fast reader {fast * 1e6:.0f} µs, prometheus_client {library * 1e6:.0f} µs "
              f"({library / fast:.1f}x); parse_exporter_text (fast path) {whole * 1e6:.0f} µs, {len(text)} bytes")


if __name__ == "__main__":
    main()
