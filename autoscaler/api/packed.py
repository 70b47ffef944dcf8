"""A `ServingSnapshot` as one flat byte string that a serving worker reads in place: swapping it in decodes nothing.

The refresh process sends each serving worker the whole snapshot after every refresh (`autoscaler.workers`). At
5,000 runtimes it is about 17 MiB of pre-rendered answers. As a pickle, a worker had to rebuild some 80,000
Python objects on its event loop (16-66 ms) and free the previous ones (about 5 ms), and every request that
arrived meanwhile waited; unpickling in a thread would not help, since `pickle.loads` holds the GIL throughout.
In this layout the blob *is* the snapshot: the refresh process writes it once to shared memory (`share`, a
memfd) and passes the descriptor down each worker's pipe (`send`); the worker maps it read-only in a thread
(`receive`), and `PackedRuntimes` answers a lookup by finding the runtime's record in an index and copying the one
answer asked out. The index is a dict from "namespace\\0deployment" to record number, built by C loops alone
over the two name columns in the receiving thread, in chunks that let the serving loop take the GIL between
them: a dict lookup costs a request a fraction of what hashing into a table inside the blob did
(`bench/bench_request_cost.py`). Its keys are strings, not tuples, whose thousands of new objects would wake
the garbage collector. A swap is then the index, a header check and one assignment, and the old snapshot goes
with one unmapping once no request refers to it. Reading 17 MiB through the pipe instead still cost the loop
about 10 ms of stalls on a small machine (`bench/bench_snapshot_swap.py` measures every way).

Layout, little-endian, offsets from the start of the blob:

    header   magic, ready, answers per runtime, runtime count, refresh-metrics offset and length, namespaces
             offset and length, deployments offset and length
    records  one per runtime, fixed size: per answer (served metrics in `METRICS` order, then KEDA) status,
             body offset/length, age (NaN for none), then the /debug record's offset/length
             (`autoscaler.api.debug_document`)
    bytes    the namespaces and the deployments of the records in their order, each column joined by "\\0"
             (UTF-8; no name holds one), bodies, refresh metrics

A blob only ever comes from our own refresh process (same code version) by way of a private pipe; the header check
catches a mismatch of layouts, not a hostile sender.
"""

from __future__ import annotations

import errno
import itertools
import math
import mmap
import os
import socket
import struct
import tempfile
import traceback
from collections.abc import Iterator
from multiprocessing import reduction
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Final

from autoscaler.api.snapshot import METRICS, Answer, RuntimeAnswers, RuntimeTable, ServingSnapshot

MAGIC = b"MMSNAP03"
_HEADER = struct.Struct("<8sBBxxIQQQQQQ")  # magic, ready, answers, count, refresh metrics, namespaces, deployments
_ANSWERS = len(METRICS) + 1  # the served metrics, then KEDA
_ANSWER_FORMAT = "HxxIId"  # status, body offset, body length, age (NaN: none)
_RECORD = struct.Struct("<" + _ANSWER_FORMAT * _ANSWERS + "II")  # answers, /debug
_ANSWER_AT = range(0, 4 * _ANSWERS, 4)  # where each answer's fields start in a record
_SPAN = struct.Struct("<II")  # an offset and a length: a record's /debug record (at its end)
_ANSWER = struct.Struct("<" + _ANSWER_FORMAT)  # one answer inside a record
_DEBUG_AT = _ANSWERS * _ANSWER.size
_isnan = math.isnan
_LIMIT = 2**32 - 1  # offsets and lengths are u32
_NAME_SEPARATOR = "\0"
_INDEX_CHUNK = 500
"""Runtimes indexed between two chances for the serving loop to take the GIL (about 0.2 ms each)."""


class PackError(ValueError):
    """A blob that is not a packed snapshot of this layout, or a snapshot too big for it."""


def pack(snapshot: ServingSnapshot) -> bytes:
    """The snapshot as one blob in the layout above (run in the refresh process, off the serving path)."""
    items = list(snapshot.runtimes.items())
    count = len(items)
    position = _HEADER.size + count * _RECORD.size
    data: list[bytes] = []

    def place(blob: bytes) -> tuple[int, int]:
        nonlocal position
        data.append(blob)
        start, position = position, position + len(blob)
        return start, len(blob)

    namespaces = place(_NAME_SEPARATOR.join(namespace for (namespace, _), _ in items).encode())
    deployments = place(_NAME_SEPARATOR.join(deployment for (_, deployment), _ in items).encode())
    records: list[bytes] = []
    for _, answers in items:
        fields: list[int | float] = []
        for status, body, age in (*answers.metrics, answers.keda):
            fields += (status, *place(body), math.nan if age is None else age)
        fields += place(answers.debug)
        records.append(_RECORD.pack(*fields))
    metrics_at, metrics_length = place(snapshot.refresh_metrics)
    if position > _LIMIT:
        raise PackError(f"a snapshot of {position} bytes is over the packed layout's 4 GiB")
    header = _HEADER.pack(MAGIC, snapshot.ready, _ANSWERS, count, metrics_at, metrics_length, *namespaces,
                          *deployments)
    return b"".join([header, *records, *data])


def unpack(blob: bytes | memoryview) -> ServingSnapshot:
    """The snapshot over `blob`, read in place: checks the header and indexes the names; copies nothing else."""
    if len(blob) < _HEADER.size:
        raise PackError(f"a packed snapshot is at least {_HEADER.size} bytes; got {len(blob)}")
    (magic, ready, answers, count, metrics_at, metrics_length, namespaces_at, namespaces_length, deployments_at,
     deployments_length) = _HEADER.unpack_from(blob)
    if magic != MAGIC or answers != _ANSWERS:
        raise PackError(f"not a packed snapshot of this version (magic {magic!r}, {answers} answers a runtime)")
    if (_HEADER.size + count * _RECORD.size > len(blob) or metrics_at + metrics_length > len(blob)
            or namespaces_at + namespaces_length > len(blob) or deployments_at + deployments_length > len(blob)):
        raise PackError(f"packed snapshot truncated or malformed ({len(blob)} bytes, {count} runtimes)")

    def column(at: int, length: int) -> list[str]:
        return bytes(blob[at:at + length]).decode().split(_NAME_SEPARATOR) if count else []

    try:  # C loops only, in chunks: the event loop's thread never waits long for the GIL
        keys = map(_NAME_SEPARATOR.join, zip(column(namespaces_at, namespaces_length),
                                             column(deployments_at, deployments_length), strict=True))
        index: dict[str, int] = {}
        for first in range(0, count, _INDEX_CHUNK):
            numbers = range(first, min(count, first + _INDEX_CHUNK))
            index.update(zip(itertools.islice(keys, len(numbers)), numbers, strict=True))
            # A C loop holds the GIL to its end: let the event loop's thread run between chunks. sched_yield, not
            # time.sleep(0): under libfaketime (LD_PRELOAD) that failed with EINVAL, and every worker stopped.
            os.sched_yield()
        if next(keys, None) is not None:
            raise ValueError("more names than runtimes")
    except (ValueError, UnicodeDecodeError) as error:
        raise PackError(f"packed snapshot malformed: the names do not match its {count} runtimes") from error
    if len(index) != count:
        raise PackError(f"packed snapshot malformed: {count} runtimes but {len(index)} distinct names")
    return ServingSnapshot(bool(ready), PackedRuntimes(blob, index),
                           bytes(blob[metrics_at:metrics_at + metrics_length]))


class PackedRuntimes(RuntimeTable):
    """(namespace, deployment) -> `RuntimeAnswers`, looked up in the blob on each access.

    A lookup copies out only what is asked (`answer`: one body, `debug_record`), so no request holds a reference
    into the blob beyond its own answer, and the blob is freed when the next snapshot replaces this one."""

    __slots__ = ("_blob", "_index")

    def __init__(self, blob: bytes | memoryview, index: dict[str, int]) -> None:
        self._blob, self._index = blob, index

    def _at(self, key: tuple[str, str]) -> int:
        """Where the runtime's record starts in the blob, -1 for none."""
        number = self._index.get(_NAME_SEPARATOR.join(key))
        return -1 if number is None else _HEADER.size + number * _RECORD.size

    def answer(self, key: tuple[str, str], which: int) -> Answer | None:
        number = self._index.get(_NAME_SEPARATOR.join(key))
        if number is None:
            return None
        at = _HEADER.size + number * _RECORD.size + which * _ANSWER.size
        status, start, length, age = _ANSWER.unpack_from(self._blob, at)
        return status, bytes(self._blob[start:start + length]), None if _isnan(age) else age

    def debug_record(self, key: tuple[str, str]) -> bytes | None:
        at = self._at(key)
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
        at = self._at(key)
        return default if at < 0 else self._answers(_RECORD.unpack_from(self._blob, at))  # type: ignore[return-value]

    def __len__(self) -> int:
        return len(self._index)

    def __iter__(self) -> Iterator[tuple[str, str]]:
        for key in self._index:
            namespace, deployment = key.split(_NAME_SEPARATOR)
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


PIPE_ENDED: Final = (EOFError, BrokenPipeError, ConnectionResetError)
"""What `receive` raises when the sender has gone: the pipe's end, and nothing else."""


OUT_OF_FILES: Final = (errno.EMFILE, errno.ENFILE)
"""The errors of a process, or a node, with no file descriptor to spare."""


class SnapshotSkipped(Exception):
    """A snapshot the sender passed that this process had no file descriptor for: the kernel dropped the descriptor
    (MSG_CTRUNC), or mapping it needed one more. The process is at its open-file limit (a connection flood), not
    broken: it keeps the snapshot it has, and takes the next once a file is free. `error` is the shortage, EMFILE
    (this process's limit) or ENFILE (the node's)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(_said(error))
        self.error = error


class SnapshotNotTaken(Exception):
    """A snapshot the sender passed that this process could not take, the sender still there; says the call that
    failed (the innermost line of its traceback: `recvmsg`, `mmap`, or a call in `unpack`) and its error. Told apart
    from the pipe's end (`PIPE_ENDED`): under libfaketime a worker's `time.sleep(0)` in `unpack` failed with EINVAL,
    and every worker reported a live refresh process as gone."""

    def __init__(self, error: Exception) -> None:
        frames = traceback.extract_tb(error.__traceback__)
        where = f"{frames[-1].line} ({Path(frames[-1].filename).name}:{frames[-1].lineno})" if frames else "receive"
        super().__init__(f"{where} failed: {_said(error)}")
        self.error = error


def _said(error: Exception) -> str:
    """An error as an operator searches for it: `[Errno 22] EINVAL: Invalid argument` for an OSError."""
    if isinstance(error, OSError) and error.errno is not None:
        return f"[Errno {error.errno}] {errno.errorcode.get(error.errno, '?')}: {error.strerror}"
    return repr(error)


def receive(pipe: Connection) -> ServingSnapshot:
    """The next snapshot `send` passed over `pipe`, mapped read-only and read in place; blocking.

    The mapping lives as long as the snapshot: it is unmapped when the next one has replaced it and the last
    request that looked it up has copied its answer out. One of `PIPE_ENDED` when the sender has gone;
    `SnapshotSkipped` when this process had no file descriptor for it (the snapshot is consumed: the next
    `receive` waits for the next one); `SnapshotNotTaken` for any other failure."""
    try:
        fd = _received_descriptor(pipe)
        try:
            mapped = mmap.mmap(fd, os.fstat(fd).st_size, prot=mmap.PROT_READ)  # it takes a descriptor of its own
        finally:
            os.close(fd)
        return unpack(memoryview(mapped))
    except (*PIPE_ENDED, SnapshotSkipped):
        raise
    except OSError as error:
        if error.errno in OUT_OF_FILES:
            raise SnapshotSkipped(error) from error
        raise SnapshotNotTaken(error) from error
    except (RuntimeError, ValueError) as error:  # RuntimeError: not one descriptor came; ValueError: PackError
        raise SnapshotNotTaken(error) from error


_DESCRIPTOR_SPACE: Final = socket.CMSG_SPACE(struct.calcsize("i"))


def _received_descriptor(pipe: Connection) -> int:
    """The descriptor `send` passed (`multiprocessing.reduction.sendfds`' message: one byte and the descriptor).

    Not `reduction.recv_handle`: it first duplicates the pipe's descriptor into a socket object, which a process
    at its open-file limit cannot, and reads a descriptor the kernel dropped for want of a free one (MSG_CTRUNC) as
    `RuntimeError('received 0 items of ancdata')`, which stopped the worker, and the adapter with it."""
    sock = socket.socket(fileno=pipe.fileno())  # the pipe's own descriptor, not a duplicate
    try:
        message, ancillary, flags, _ = sock.recvmsg(1, _DESCRIPTOR_SPACE)
        if not message and not ancillary:
            raise EOFError
        if reduction.ACKNOWLEDGE:  # pragma: no cover - macOS: the sender waits for it
            sock.send(b"A")
    finally:
        sock.detach()
    if flags & socket.MSG_CTRUNC:
        raise SnapshotSkipped(_shortage(pipe.fileno()))
    if len(ancillary) != 1 or ancillary[0][:2] != (socket.SOL_SOCKET, socket.SCM_RIGHTS):
        raise RuntimeError(f"received {len(ancillary)} items of ancillary data, not one descriptor")
    (fd,) = struct.unpack("i", ancillary[0][2][:struct.calcsize("i")])
    return int(fd)


def _shortage(fd: int) -> OSError:
    """Why the kernel dropped a descriptor passed to this process, which it does not say (MSG_CTRUNC alone): a
    descriptor asked for at once (a duplicate of `fd`) fails the same way, with its errno (EMFILE: this process's
    limit, ENFILE: the node's). One that comes (a file freed meanwhile) is given back, and the process's limit
    named."""
    try:
        os.close(os.dup(fd))
    except OSError as error:
        if error.errno in OUT_OF_FILES:
            return error
    return OSError(errno.EMFILE, os.strerror(errno.EMFILE))
