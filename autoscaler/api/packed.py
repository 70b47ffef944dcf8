"""A `ServingSnapshot` as one flat byte string that a serving worker reads in place: swapping it in decodes nothing.

The refresh process sends each serving worker the whole snapshot after every refresh (`autoscaler.workers`). At
5,000 runtimes it is about 17 MiB of pre-rendered answers. As a pickle, a worker had to rebuild some 80,000
Python objects on its event loop (16-66 ms) and free the previous ones (about 5 ms), and every request that
arrived meanwhile waited; unpickling in a thread would not help, since `pickle.loads` holds the GIL throughout.
In this layout the blob *is* the snapshot: the refresh process writes it once to shared memory (`share`, a
memfd) and passes the descriptor down each worker's pipe (`send`); the worker maps it read-only in a thread
(`receive`), and `PackedRuntimes` answers a lookup by hashing the key into an open-addressing table inside the
blob and copying the one answer asked out. A swap is a header check and one assignment, and the old snapshot
goes with one unmapping once no request refers to it. Reading 17 MiB through the pipe instead still cost the
loop about 10 ms of stalls on a small machine (`bench/bench_snapshot_swap.py` measures every way).

Layout, little-endian, offsets from the start of the blob:

    header   magic, ready, answers per runtime, runtime count, table slots, refresh-metrics offset and length
    records  one per runtime, fixed size: key offset/length, then per answer (served metrics in `METRICS`
             order, then KEDA) status, body offset/length, age (NaN for none), then the /debug record's
             offset/length (`autoscaler.api.debug_document`)
    table    `slots` u32 entries (a power of two, at least twice the count): record number + 1, 0 when empty;
             a key lives at crc32(key) modulo slots or the next free slot after it (linear probing)
    bytes    keys ("namespace\\0deployment", UTF-8), bodies, refresh metrics

A blob only ever comes from our own refresh process (same code version) by way of a private pipe; the header check
catches a mismatch of layouts, not a hostile sender.
"""

from __future__ import annotations

import math
import mmap
import os
import struct
import tempfile
import zlib
from collections.abc import Iterator
from multiprocessing import reduction
from multiprocessing.connection import Connection
from typing import Any

from autoscaler.api.snapshot import METRICS, Answer, RuntimeAnswers, RuntimeTable, ServingSnapshot

MAGIC = b"MMSNAP02"
_HEADER = struct.Struct("<8sBBxxIIQQ")  # magic, ready, answers, count, slots, refresh metrics offset, length
_ANSWERS = len(METRICS) + 1  # the served metrics, then KEDA
_ANSWER_FORMAT = "HxxIId"  # status, body offset, body length, age (NaN: none)
_RECORD = struct.Struct("<II" + _ANSWER_FORMAT * _ANSWERS + "II")  # key, answers, /debug
_ANSWER_AT = range(2, 2 + 4 * _ANSWERS, 4)  # where each answer's fields start in a record
_SPAN = struct.Struct("<II")  # an offset and a length: a record's key (at its start) and /debug record (at its end)
_ANSWER = struct.Struct("<" + _ANSWER_FORMAT)  # one answer inside a record
_DEBUG_AT = _SPAN.size + _ANSWERS * _ANSWER.size
_SLOT = struct.Struct("<I")
_isnan = math.isnan
_LIMIT = 2**32 - 1  # offsets and lengths are u32


class PackError(ValueError):
    """A blob that is not a packed snapshot of this layout, or a snapshot too big for it."""


def _key_bytes(namespace: str, deployment: str) -> bytes:
    return f"{namespace}\0{deployment}".encode()


def _table_slots(count: int) -> int:
    slots = 8
    while slots < 2 * count:
        slots *= 2
    return slots


def pack(snapshot: ServingSnapshot) -> bytes:
    """The snapshot as one blob in the layout above (run in the refresh process, off the serving path)."""
    items = list(snapshot.runtimes.items())
    count, slots = len(items), _table_slots(len(items))
    records_at = _HEADER.size
    table_at = records_at + count * _RECORD.size
    data_at = table_at + slots * _SLOT.size
    data: list[bytes] = []
    position = data_at

    def place(blob: bytes) -> tuple[int, int]:
        nonlocal position
        data.append(blob)
        start, position = position, position + len(blob)
        return start, len(blob)

    records: list[bytes] = []
    table = [0] * slots
    for number, ((namespace, deployment), answers) in enumerate(items):
        key = _key_bytes(namespace, deployment)
        fields: list[int | float] = [*place(key)]
        for status, body, age in (*answers.metrics, answers.keda):
            fields += (status, *place(body), math.nan if age is None else age)
        fields += place(answers.debug)
        records.append(_RECORD.pack(*fields))
        slot = zlib.crc32(key) & (slots - 1)
        while table[slot]:
            slot = (slot + 1) & (slots - 1)
        table[slot] = number + 1
    metrics_at, metrics_length = place(snapshot.refresh_metrics)
    if position > _LIMIT:
        raise PackError(f"a snapshot of {position} bytes is over the packed layout's 4 GiB")
    header = _HEADER.pack(MAGIC, snapshot.ready, _ANSWERS, count, slots, metrics_at, metrics_length)
    return b"".join([header, *records, struct.pack(f"<{slots}I", *table), *data])


def unpack(blob: bytes | memoryview) -> ServingSnapshot:
    """The snapshot over `blob`, read in place: checks the header, copies nothing else."""
    if len(blob) < _HEADER.size:
        raise PackError(f"a packed snapshot is at least {_HEADER.size} bytes; got {len(blob)}")
    magic, ready, answers, count, slots, metrics_at, metrics_length = _HEADER.unpack_from(blob)
    if magic != MAGIC or answers != _ANSWERS:
        raise PackError(f"not a packed snapshot of this version (magic {magic!r}, {answers} answers a runtime)")
    end = _HEADER.size + count * _RECORD.size + slots * _SLOT.size
    if end > len(blob) or metrics_at + metrics_length > len(blob) or slots & (slots - 1):
        raise PackError(f"packed snapshot truncated or malformed ({len(blob)} bytes, {count} runtimes)")
    return ServingSnapshot(bool(ready), PackedRuntimes(blob, count, slots),
                           bytes(blob[metrics_at:metrics_at + metrics_length]))


class PackedRuntimes(RuntimeTable):
    """(namespace, deployment) -> `RuntimeAnswers`, looked up in the blob on each access.

    A lookup copies out only what is asked (`answer`: one body, `debug_record`), so no request holds a reference
    into the blob beyond its own answer, and the blob is freed when the next snapshot replaces this one."""

    __slots__ = ("_blob", "_count", "_slots", "_table_at")

    def __init__(self, blob: bytes | memoryview, count: int, slots: int) -> None:
        self._blob, self._count, self._slots = blob, count, slots
        self._table_at = _HEADER.size + count * _RECORD.size

    def _record(self, number: int) -> tuple[Any, ...]:
        return _RECORD.unpack_from(self._blob, _HEADER.size + number * _RECORD.size)

    def _find(self, key: bytes) -> int:
        """Where the runtime's record starts in the blob, -1 for none."""
        blob, mask, table_at = self._blob, self._slots - 1, self._table_at
        slot = zlib.crc32(key) & mask
        while True:
            entry: int = _SLOT.unpack_from(blob, table_at + slot * 4)[0]
            if not entry:
                return -1
            at = _HEADER.size + (entry - 1) * _RECORD.size
            start, length = _SPAN.unpack_from(blob, at)
            if blob[start:start + length] == key:
                return at
            slot = (slot + 1) & mask

    def answer(self, key: tuple[str, str], which: int) -> Answer | None:
        at = self._find(_key_bytes(*key))
        if at < 0:
            return None
        status, start, length, age = _ANSWER.unpack_from(self._blob, at + _SPAN.size + which * _ANSWER.size)
        return status, bytes(self._blob[start:start + length]), None if _isnan(age) else age

    def debug_record(self, key: tuple[str, str]) -> bytes | None:
        at = self._find(_key_bytes(*key))
        if at < 0:
            return None
        start, length = _SPAN.unpack_from(self._blob, at + _DEBUG_AT)
        return bytes(self._blob[start:start + length])

    def _answers(self, record: tuple[Any, ...]) -> RuntimeAnswers:
        blob, nan = self._blob, _isnan
        answers = [(record[at], bytes(blob[record[at + 1]:record[at + 1] + record[at + 2]]),
                    None if nan(record[at + 3]) else record[at + 3]) for at in _ANSWER_AT]
        return RuntimeAnswers(tuple(answers[:-1]), answers[-1], bytes(blob[record[-2]:record[-2] + record[-1]]))

    def __getitem__(self, key: tuple[str, str]) -> RuntimeAnswers:
        answers = self.get(key)
        if answers is None:
            raise KeyError(key)
        return answers

    def get(self, key: tuple[str, str], default: object = None) -> RuntimeAnswers | None:  # type: ignore[override]
        at = self._find(_key_bytes(*key))
        return default if at < 0 else self._answers(_RECORD.unpack_from(self._blob, at))  # type: ignore[return-value]

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[tuple[str, str]]:
        blob = self._blob
        for number in range(self._count):
            record = self._record(number)
            start, length = record[0], record[1]
            namespace, deployment = bytes(blob[start:start + length]).decode().split("\0")
            yield namespace, deployment



# Handing a blob over: in shared memory, so a worker maps it rather than reading 17 MiB through its pipe.

def share(blob: bytes) -> int:
    """A file descriptor of an anonymous in-memory file (memfd) holding `blob`; the caller closes it. Where
    there is no memfd (not Linux: a developer's machine), an unlinked temporary file does the same job."""
    if hasattr(os, "memfd_create"):
        fd = os.memfd_create("mm-autoscaler-snapshot", os.MFD_CLOEXEC)
    else:  # pragma: no cover - Linux has memfd
        with tempfile.TemporaryFile(prefix="mm-autoscaler-snapshot-") as file:
            fd = os.dup(file.fileno())
    try:
        view, done = memoryview(blob), 0
        while done < len(blob):
            done += os.write(fd, view[done:])
    except BaseException:
        os.close(fd)
        raise
    return fd


def send(pipe: Connection, fd: int) -> None:
    """Pass the shared snapshot `fd` to the process at the other end of `pipe` (SCM_RIGHTS); blocking."""
    reduction.send_handle(pipe, fd, 0)


def receive(pipe: Connection) -> ServingSnapshot:
    """The next snapshot `send` passed over `pipe`, mapped read-only and read in place; blocking.

    The mapping lives as long as the snapshot: it is unmapped when the next one has replaced it and the last
    request that looked it up has copied its answer out. `EOFError` when the sender has gone."""
    fd = reduction.recv_handle(pipe)
    try:
        mapped = mmap.mmap(fd, os.fstat(fd).st_size, prot=mmap.PROT_READ)
    finally:
        os.close(fd)
    return unpack(memoryview(mapped))
