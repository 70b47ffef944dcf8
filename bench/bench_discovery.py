"""What cluster-mode discovery costs at fleet size, for runtimes side by side in one namespace as modelmesh-serving
places them: the inventory (which pods belong to which runtime), rebuilt after every pod change, and one HPA
event (the HPA controller writing an HPA's status, the usual event) in the HPA watch.

Builds the Deployments' runtime records and the pods' records in memory (the watches' network cost is theirs)
and times `build_inventory`, interleaved with a plain loop that only reads every pod's labels once: the ratio is
the figure to compare across machines. Matching every pod of the namespace against every runtime's selector
cost runtimes x pods (16 s at 2,000 runtimes of 2 pods, 1 December 2026); the index on the runtime's `name`
label made it linear for ModelMesh's selectors, and the rarest label of each selector for any (a tenant whose
Deployments all select `{a: x, z: <i>}`, beside as many pods labelled `a: x` that no controller owns, cost
3.7 s a rebuild at 3,000 of each, 5 December 2026: the second table). The HPA watch is fed through the
callbacks its list and watch call; rebuilding the bounds of every HPA at each event cost 23 ms an event at
5,000 HPAs. Plain script, no asserts:

    python bench/bench_discovery.py [--runtimes 1000,5000] [--pods 2] [--runs 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def parse_args() -> argparse.Namespace:
    """The flags, parsed before the modules a run needs are imported (below), so that `--help` and a
    mistyped flag are answered at once."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runtimes", default="1000,5000", help="comma list of fleet sizes (runtimes)")
    parser.add_argument("--pods", type=int, default=2, help="pods per runtime")
    parser.add_argument("--runs", type=int, default=5)
    return parser.parse_args()


if __name__ == "__main__":
    parse_args()


from kubernetes.aio.client import ApiClient, Configuration  # noqa: E402

from autoscaler.model import RuntimeKey  # noqa: E402
from autoscaler.sources.kube_hpas import HpaWatch  # noqa: E402
from autoscaler.sources.kube_objects import PodRecord, RuntimeRecord, build_inventory  # noqa: E402

NAMESPACE = "modelmesh-serving"


def fleet(runtimes: int, pods: int) -> tuple[dict[RuntimeKey, RuntimeRecord], list[PodRecord]]:
    """`runtimes` Deployments of modelmesh-serving's shape in one namespace, `pods` Ready pods each."""
    records: dict[RuntimeKey, RuntimeRecord] = {}
    pod_records: list[PodRecord] = []
    for i in range(runtimes):
        key = RuntimeKey(NAMESPACE, f"modelmesh-serving-rt{i}")
        selector = {"modelmesh-service": "modelmesh-serving", "name": key.deployment}
        records[key] = RuntimeRecord(key, selector, pods)
        pod_records.extend(
            PodRecord(f"{key.deployment}-5d9c8b7f6-{j:05d}", NAMESPACE, {**selector, "pod-template-hash": "5d9c8b7f6"},
                      True, f"10.{i // 250}.{i % 250}.{j}", 1_700_000_000.0)
            for j in range(pods))
    return records, pod_records


def shared_label_fleet(runtimes: int) -> tuple[dict[RuntimeKey, RuntimeRecord], list[PodRecord]]:
    """`runtimes` zero-replica Deployments of one tenant selecting `{a: x, z: <i>}` (no `name` label, the same
    first key), and as many Ready pods no controller owns labelled `a: x`: none is any runtime's."""
    records = {RuntimeKey(NAMESPACE, f"d{i}"): RuntimeRecord(RuntimeKey(NAMESPACE, f"d{i}"), {"a": "x", "z": str(i)}, 0)
               for i in range(runtimes)}
    pods = [PodRecord(f"p{j}", NAMESPACE, {"a": "x", "z": "none"}, True, f"10.{j // 250}.{j % 250}.1", 1.0)
            for j in range(runtimes)]
    return records, pods


def hpa_event_s(runtimes: int, events: int = 200) -> float:
    """CPU seconds the HPA watch spends on one status-only event, with one HPA (on a RuntimeScale, as the
    shipped one) per runtime."""
    watch = HpaWatch(lambda: ApiClient(Configuration()), [NAMESPACE])
    hpas = [{"metadata": {"namespace": NAMESPACE, "name": f"modelmesh-serving-rt{i}-autoscaler"},
             "spec": {"minReplicas": 1, "maxReplicas": 10, "scaleTargetRef": {"kind": "RuntimeScale", "name": f"rt{i}"},
                      "metrics": [{"type": "External", "external": {"metric": {
                          "name": "modelmesh_desired_replicas",
                          "selector": {"matchLabels": {"deployment": f"modelmesh-serving-rt{i}"}}}}}]},
             "status": {"currentReplicas": 2, "desiredReplicas": 2}} for i in range(runtimes)]
    watch._replace(NAMESPACE, hpas)  # the list
    started = time.process_time()
    for i in range(events):
        watch._apply(NAMESPACE, "MODIFIED", hpas[i % runtimes])  # the watch: its status written again
    return (time.process_time() - started) / events


def plain_loop(pods: list[PodRecord]) -> int:
    return sum(len(pod.labels) for pod in pods)


def timed(records: dict[RuntimeKey, RuntimeRecord], pods: list[PodRecord], runs: int) -> tuple[float, float]:
    """Median CPU seconds of an inventory build and of the plain loop over the same pods, interleaved."""
    builds, loops = [], []
    for _ in range(runs):
        started = time.process_time()
        build_inventory(records, pods, 9187)
        builds.append(time.process_time() - started)
        started = time.process_time()
        plain_loop(pods)
        loops.append(time.process_time() - started)
    return statistics.median(builds), statistics.median(loops)


def main() -> None:
    args = parse_args()
    print(f"one namespace; {args.pods} pods a runtime; median of {args.runs} runs, CPU time")
    print("| runtimes (pods) | inventory build | plain loop over the pods | build / plain loop "
          "| one HPA status event |")
    print("|---|---|---|---|---|")
    for runtimes in (int(n) for n in args.runtimes.split(",")):
        records, pods = fleet(runtimes, args.pods)
        inventory = build_inventory(records, pods, 9187)
        assert sum(len(runtime.pods) for runtime in inventory.values()) == len(pods)  # every pod found once
        build, loop = timed(records, pods, args.runs)
        print(f"| {runtimes:,} ({len(pods):,}) | {build * 1e3:.1f} ms | {loop * 1e3:.2f} ms | "
              f"{build / loop if loop else float('inf'):.0f}x | {hpa_event_s(runtimes) * 1e6:.0f} µs |")
    print()
    print("one tenant's Deployments selecting {a: x, z: <i>}, as many unowned pods labelled a: x")
    print("| runtimes (pods) | inventory build | plain loop over the pods | build / plain loop |")
    print("|---|---|---|---|")
    for runtimes in (int(n) for n in args.runtimes.split(",")):
        records, pods = shared_label_fleet(runtimes)
        build, loop = timed(records, pods, args.runs)
        print(f"| {runtimes:,} ({len(pods):,}) | {build * 1e3:.1f} ms | {loop * 1e3:.2f} ms | "
              f"{build / loop if loop else float('inf'):.0f}x |")


if __name__ == "__main__":
    main()
