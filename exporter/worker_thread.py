"""The one worker thread where the exporter parses a large ModelMesh answer and renders ModelMesh's families.

Both take long enough to stall the event loop, /healthz (the liveness probe) with it: 0.2-0.8 s of CPU to parse the
largest answer, some 360 ms to render 30,000 models' series, five times that under the sidecar's 200m CPU limit.
Both also take the most memory the exporter ever holds: the answer's text and the reading parsed from it, or every
model's series as objects and as text. In one thread they never run at once, so the two peaks do not add up inside
the sidecar's 512Mi memory limit; and they allocate from one of glibc's malloc arenas, not one per thread of the
loop's default pool (memory freed in one arena is not reused by another thread). On the memory rig
(tests/exporter/test_exporter_memory_limit.py: 80,000 models, every one published) the render in the default pool
peaked at 295-342 MiB resident, here at 286-290 MiB (on the event loop, where it stalled /healthz: 272-275 MiB).
Under the CPU limit two such jobs at once would not end sooner than one after the other: the GIL and the limit
share out the same CPU. A render asked for while a parse runs waits for it, and a parse for a render.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Final, TypeVar

T = TypeVar("T")

_WORKER: Final = ThreadPoolExecutor(max_workers=1, thread_name_prefix="exporter-worker")


async def in_worker_thread(function: Callable[..., T], *args: object) -> T:
    """`function(*args)` in the worker thread, after what was handed to it before; awaited on the running loop."""
    return await asyncio.get_running_loop().run_in_executor(_WORKER, function, *args)
