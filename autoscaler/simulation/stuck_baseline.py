"""mean-hpa stuck below its target by pods ModelMesh places no copy on: found in a replay, and said.

After a jump in load an HPA on mean GPU busy adds a pod. ModelMesh sends a model's requests only to pods that
hold a copy of it, and its rate check may place none on the new pod (kserve/modelmesh's own rule: rate_check.py),
so the pod stays idle and the mean reads 67% with two pods full and one idle, under the 80% target: the HPA
adds no more, and the full pods queue for as long as the load lasts (a reviewer's trace: 3 h, 97% of requests
delayed). That is the built-in ModelMesh HPA's own behaviour, but every ratio against mean-hpa divides by it,
and "skew-aware 0.029x the delays of mean-hpa" read as a measure of skew-aware alone. The report says when
and for how long it happened, so that the reader knows what the ratios measure against.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from autoscaler.simulation.engine import Timeline
from autoscaler.simulation.hpa_spec import TOLERANCE
from autoscaler.simulation.idle_watch import IDLE_BUSY, BucketUse
from autoscaler.simulation.timestamps import moment_text, span_text

LONG_S: Final = 600.0
"""A stretch at least this long is said: a new pod waits for its first copies a minute or two, not ten."""
FULL_SHARE: Final = 0.5
"""A bucket in which some pod ran full for at least this share of its ticks had pods queueing."""

MOST_DELAYS: Final = 0.5
"""From this share of the policy's delays in its stuck stretches, the note says its ratios measure against them."""
NONE_OF_THE_DELAYS: Final = 0.005
"""Below this share (said "0%") the stretches are none of what the ratios divide by, and the words leave the note
out: a reviewer's day read a paragraph on what the ratios measure against, ending "0% of mean-hpa's delayed
requests came then". report.json keeps it, with its share."""

WHY: Final = ("an HPA on mean utilization counts an idle pod like any other, and ModelMesh placed no copy of the "
              "queued models on it (a model's requests go only to pods that hold it), so the pod it added served "
              "nothing and the mean stayed under what scales up")


def _stuck(use: BucketUse, delayed: float, replicas: int, max_replicas: int, scales_up_above: float) -> bool:
    """A bucket in which an idle pod held the mean down while the others queued and the HPA could add pods."""
    return (use.idle_pods > 0 and use.full_share >= FULL_SHARE and delayed > 0 and replicas < max_replicas
            and use.mean_busy <= scales_up_above)


def stretches(timeline: Timeline, max_replicas: int, scales_up_above: float) -> list[tuple[int, int]]:
    """The runs of stuck buckets at least `LONG_S` long, as (first bucket, bucket after the last)."""
    runs: list[tuple[int, int]] = []
    start: int | None = None
    flags = [_stuck(use, delayed, replicas, max_replicas, scales_up_above)
             for use, delayed, replicas in zip(timeline.pods_use, timeline.delayed, timeline.replicas, strict=True)]
    for index, stuck in enumerate([*flags, False]):  # the False closes a run that lasts to the end
        if stuck and start is None:
            start = index
        elif not stuck and start is not None:
            if (index - start) * timeline.bucket_s >= LONG_S:
                runs.append((start, index))
            start = None
    return runs


def stuck_note(timeline: Timeline, max_replicas: int, target: float, duration_s: float,
               start_s: float) -> dict[str, Any] | None:
    """report.json's note on a policy's replay (`timeline`) held under its mean-busy `target` by idle pods (None:
    it never was). `start_s`: the trace's first timestamp, so that the longest stretch is also given in the
    trace's own times (`from_timestamp_s`, `to_timestamp_s`), which a user finds in the file and the other
    notes name."""
    scales_up_above = target * (1.0 + TOLERANCE)
    runs = stretches(timeline, max_replicas, scales_up_above)
    if not runs:
        return None
    step = timeline.bucket_s
    all_delayed = sum(timeline.delayed)  # the policy's delayed requests, bucket by bucket
    first, end = max(runs, key=lambda run: run[1] - run[0])
    uses = timeline.pods_use[first:end]
    most = max(range(first, end), key=lambda i: timeline.pods_use[i].idle_pods)  # the bucket to name
    delayed = sum(sum(timeline.delayed[a:b]) for a, b in runs)
    from_s, to_s = round(first * step, 1), round(min(end * step, duration_s), 1)
    return {
        "seconds": round(sum(min(b * step, duration_s) - a * step for a, b in runs), 1),
        "stretches": len(runs),
        "longest": {"from_s": from_s, "to_s": to_s, "from_timestamp_s": start_s + from_s,
                    "to_timestamp_s": start_s + to_s,
                    "mean_gpu_busy": round(sum(u.mean_busy for u in uses) / len(uses), 3)},
        "idle_pods": timeline.pods_use[most].idle_pods,
        "replicas": timeline.replicas[most],
        "target_gpu_busy": target,
        "scales_up_above": round(scales_up_above, 3),
        "delayed_requests": round(delayed),
        "delayed_share": round(delayed / all_delayed, 3) if all_delayed else 0.0,
        "why": WHY,
    }


def stuck_text(report: Mapping[str, Any], policy: str) -> str | None:
    """The note in words, for the printed notes and report.md (None where `policy` was never stuck, or its stuck
    stretches carried none of its delays)."""
    note = report["policies"].get(policy, {}).get("stuck_below_target")
    if note is None or note["delayed_share"] < NONE_OF_THE_DELAYS:
        return None
    longest = note["longest"]
    # The trace's own times, as the other notes say them: hours from its start to three digits read "from 101 h
    # to 101 h" for a 20-minute stretch
    stretch = (f"from {moment_text(longest['from_timestamp_s'])} to {moment_text(longest['to_timestamp_s'])}, "
               f"{span_text(longest['from_s'])} into the trace")
    where = stretch if note["stretches"] == 1 else f"in {note['stretches']} stretches, the longest {stretch}"
    return (f"Note: {policy} was stuck below its {note['target_gpu_busy']:.0%} target for "
            f"{span_text(note['seconds'])} ({where}): {note['idle_pods']} of its {note['replicas']} pods "
            f"Ready and idle (under {IDLE_BUSY:.0%} busy) while the others queued requests, the mean GPU busy at "
            f"{longest['mean_gpu_busy']:.0%}, and it scales up only above {note['scales_up_above']:.0%} (the target "
            f"and the HPA's {TOLERANCE:.0%} tolerance). ModelMesh placed no copy of the queued models on the idle "
            f"pod (a model's requests go only to pods that hold it), so the pod the HPA added served nothing. "
            f"{note['delayed_share']:.0%} of {policy}'s delayed requests came then: " + (
                f"the ratios against {policy} measure against this stuck baseline, which is how the built-in "
                f"ModelMesh HPA (on mean utilization) behaves, not a measure of the other policies alone."
                if note["delayed_share"] >= MOST_DELAYS else
                f"a small part of what the ratios against {policy} divide by."))
