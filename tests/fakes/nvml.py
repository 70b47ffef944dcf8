"""A fake NVML: `fake_nvml.c` built as `libnvidia-ml.so.1` and driven through a state file.

The real `pynvml` loads it through its real ctypes paths, so the exporter's NVML code runs unchanged and
sees the real `pynvml.NVMLError_*` classes with real codes. The library re-reads its state file (named by
the `FAKE_NVML_STATE` environment variable) on every call, so a test changes readings and faults while an
exporter runs, in this process or in a subprocess:

    fake = FakeNvml.create(tmp_path, gpus=2)
    fake.install(monkeypatch)                          # in-process: pynvml.nvmlLib = CDLL(fake library)
    subprocess.Popen([...], env={**os.environ, **fake.env()})   # or a child: LD_LIBRARY_PATH + state
    fake.set_gpu(0, util=75, mem_used=2 << 30)
    fake.set_gpu(1, error=NVML_ERROR_GPU_IS_LOST)
    fake.set(now_us=...) / fake.set_time(seconds)     # fixed NVML clock for sample timestamps
    fake.set_gpu(0, hang="samples"); fake.wait_until_hung(); ...; fake.set_gpu(0, hang="")   # a hung driver call

"Library missing" is `hide_nvml_library(monkeypatch)` in-process, or a child without `fake.env()`.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import tempfile
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Final

import pynvml
import pytest

STATE_ENV: Final = "FAKE_NVML_STATE"
"""Environment variable the fake library reads its state file path from."""
LIBRARY_NAME: Final = "libnvidia-ml.so.1"
SOURCE: Final = Path(__file__).with_name("fake_nvml.c")

GPU_IS_LOST: Final[int] = pynvml.NVML_ERROR_GPU_IS_LOST
NOT_SUPPORTED: Final[int] = pynvml.NVML_ERROR_NOT_SUPPORTED
NO_PERMISSION: Final[int] = pynvml.NVML_ERROR_NO_PERMISSION
"""What nvmlDeviceGetHandleByIndex_v2 answers for a GPU that nvmlDeviceGetCount_v2 counts but this process may
not talk to (nvml.h: count_v2 "returns count of all devices in the system even if" so)."""
DRIVER_NOT_LOADED: Final[int] = pynvml.NVML_ERROR_DRIVER_NOT_LOADED
LIBRARY_NOT_FOUND: Final[int] = pynvml.NVML_ERROR_LIBRARY_NOT_FOUND
INSUFFICIENT_SIZE: Final[int] = pynvml.NVML_ERROR_INSUFFICIENT_SIZE
UNKNOWN: Final[int] = pynvml.NVML_ERROR_UNKNOWN
TIMEOUT: Final[int] = pynvml.NVML_ERROR_TIMEOUT

GIB: Final = 1 << 30


def build_library(cache_root: Path | None = None) -> Path:
    """Compile `fake_nvml.c` once per source version; return the path of `libnvidia-ml.so.1`.

    The cache key is the source's hash, so an edit rebuilds and parallel runs share one build (each writes
    to a private file and renames it into place).
    """
    digest = hashlib.sha256(SOURCE.read_bytes()).hexdigest()[:16]
    root = cache_root or Path(tempfile.gettempdir()) / "modelmesh-fake-nvml"
    directory = root / digest
    library = directory / LIBRARY_NAME
    if library.exists():
        return library
    directory.mkdir(parents=True, exist_ok=True)
    partial = directory / f".{LIBRARY_NAME}.{os.getpid()}"
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-o", str(partial), str(SOURCE)],
        check=True, capture_output=True, text=True,
    )
    partial.replace(library)
    return library


def reset_pynvml(monkeypatch: pytest.MonkeyPatch) -> None:
    """Give pynvml a clean global state for this test; monkeypatch restores the old one afterwards.

    pynvml keeps the loaded library (`nvmlLib`), a cache of function pointers looked up in it, and an
    init reference count at module level: without this, a test would call the previous test's library.
    """
    monkeypatch.setattr(pynvml, "nvmlLib", None)
    monkeypatch.setattr(pynvml, "_nvmlGetFunctionPointer_cache", {})
    monkeypatch.setattr(pynvml, "_nvmlLib_refcount", 0)


def hide_nvml_library(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make `libnvidia-ml.so.1` unloadable in this process, as on a node without the NVIDIA driver.

    pynvml then raises NVMLError_LibraryNotFound from nvmlInit, even on a machine with a real GPU.
    """
    reset_pynvml(monkeypatch)

    def refuse(name: str, *_args: object, **_kwargs: object) -> ctypes.CDLL:
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(pynvml, "CDLL", refuse)


@dataclass
class FakeGpu:
    """One GPU as the fake reports it; field names are the state file's `gpu.I.<field>` keys."""

    uuid: str
    name: str = "NVIDIA H100 80GB HBM3"
    util: int = 0
    """Percent busy, returned by nvmlDeviceGetUtilizationRates and carried by every new sample."""
    mem_util: int = 0
    mem_used: int = 0
    mem_total: int = 80 * GIB
    mig: int = 0
    """-1: not MIG-capable; 0: MIG off; K > 0: MIG on with K MIG devices."""
    mig_created: int = -1
    """MIG devices created yet of the `mig` (-1: all); 0 is a GPU just switched into MIG mode, before its GPU
    instances are created: MIG on, no MIG device."""
    error: int = 0
    """NVML code every call on this GPU returns, e.g. GPU_IS_LOST (15); 0 for success."""
    handle_error: int = 0
    samples_error: int = 0
    util_error: int = 0
    memory_error: int = 0
    mig_handle_error: int = 0
    """Returned by nvmlDeviceGetMigDeviceHandleByIndex for this GPU's existing MIG devices."""
    minor: int = -1
    """Device minor number, the N of /dev/nvidiaN (nvmlDeviceGetMinorNumber); -1: the GPU's index."""
    mig_generation: int = 0
    """MIG devices re-created so far: a new generation gives them new UUIDs at the same slots (destroyed and created
    again), 0 the UUIDs `MIG-<GPU UUID without GPU->-<slot>`."""
    hang: str = ""
    """A call group ("samples", "utilization", "memory") that blocks on this GPU until this no longer names it, as
    a hung GPU holds the driver call for seconds; it then answers from the state as it is then. `hung()` counts
    the calls held."""


@dataclass
class FakeNvml:
    """Controller of the fake library's state; every setter rewrites the state file at once."""

    library_path: Path
    state_path: Path
    gpus: list[FakeGpu] = field(default_factory=list)
    init_error: int = 0
    count_error: int = 0
    now_us: int = 0
    """Fixed NVML clock for sample timestamps (µs since the epoch); 0 uses the real clock."""
    sample_period_us: int = 166_667
    sample_buffer: int = 120
    driver_version: str = "550.54.15"
    _lib: ctypes.CDLL | None = field(default=None, repr=False)

    @classmethod
    def create(cls, directory: Path, gpus: int = 1) -> FakeNvml:
        """A fake with `gpus` idle GPUs (UUIDs `GPU-fa4e0000-...-00000000000I`), its state in `directory`."""
        fake = cls(library_path=build_library(), state_path=directory / "fake-nvml.state")
        fake.gpus = [FakeGpu(uuid=default_uuid(i)) for i in range(gpus)]
        fake.write()
        return fake

    def env(self) -> dict[str, str]:
        """Environment for a child process: the fake first on the library path, and its state file."""
        search = [str(self.library_path.parent)]
        if inherited := os.environ.get("LD_LIBRARY_PATH"):
            search.append(inherited)
        return {STATE_ENV: str(self.state_path), "LD_LIBRARY_PATH": os.pathsep.join(search)}

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Load the fake into this process's pynvml, with pynvml's globals reset and counters zeroed."""
        reset_pynvml(monkeypatch)
        monkeypatch.setenv(STATE_ENV, str(self.state_path))
        self._lib = ctypes.CDLL(str(self.library_path))
        self._lib.fake_nvml_calls.restype = ctypes.c_ulong
        self._lib.fake_nvml_calls.argtypes = [ctypes.c_char_p]
        self._lib.fake_nvml_hung.restype = ctypes.c_ulong
        self._lib.fake_nvml_reset()  # the library stays loaded across tests: clear its counters
        monkeypatch.setattr(pynvml, "nvmlLib", self._lib)

    def calls(self, function: str = "") -> int:
        """NVML calls made in this process since `install` (one group, e.g. "init" or "samples", or all).

        Groups: init, shutdown, count, handle, uuid, name, utilization, memory, samples, mig, driver.
        """
        if self._lib is None:
            raise RuntimeError("calls() counts in-process calls: install() the fake first")
        return int(self._lib.fake_nvml_calls(function.encode()))

    def hung(self) -> int:
        """NVML calls in this process held by a GPU's `hang` right now."""
        if self._lib is None:
            raise RuntimeError("hung() counts in-process calls: install() the fake first")
        return int(self._lib.fake_nvml_hung())

    def wait_until_hung(self, calls: int = 1, timeout_s: float = 10.0) -> None:
        """Return once `calls` calls are held by a `hang` (a pass running in another thread has reached it)."""
        deadline = time.monotonic() + timeout_s
        while self.hung() < calls:
            if time.monotonic() > deadline:
                raise AssertionError(f"no NVML call held after {timeout_s} s ({self.hung()} of {calls})")
            time.sleep(0.001)

    def set(self, **settings: int | str) -> None:
        """Change top-level settings (init_error, count_error, now_us, sample_period_us, ...) and write."""
        for name, value in settings.items():
            if name not in _TOP_LEVEL:
                raise TypeError(f"unknown fake NVML setting {name!r}")
            setattr(self, name, value)
        self.write()

    def set_time(self, seconds: float) -> None:
        """Fix NVML's clock (sample timestamps) at `seconds` since the epoch, to match a test's clock."""
        self.set(now_us=round(seconds * 1_000_000))

    def set_gpu(self, index: int, **readings: int | str) -> None:
        """Change fields of GPU `index` (util, mem_used, error, samples_error, mig, ...) and write."""
        gpu = self.gpus[index]
        for name, value in readings.items():
            if name not in _GPU_FIELDS:
                raise TypeError(f"unknown fake GPU field {name!r}")
            setattr(gpu, name, value)
        self.write()

    def add_gpu(self, **readings: int | str) -> int:
        """Attach another GPU (a hot-plug or a driver reload that finds one more); returns its index."""
        self.gpus.append(FakeGpu(uuid=default_uuid(len(self.gpus))))
        index = len(self.gpus) - 1
        self.set_gpu(index, **readings)
        return index

    def write(self) -> None:
        """Write the whole state atomically, so the library never reads half a file."""
        lines = [f"{name} {getattr(self, name)}" for name in _TOP_LEVEL]
        lines.append(f"count {len(self.gpus)}")
        for index, gpu in enumerate(self.gpus):
            lines.extend(f"gpu.{index}.{name} {getattr(gpu, name)}" for name in _GPU_FIELDS)
        partial = self.state_path.with_name(self.state_path.name + ".partial")
        partial.write_text("\n".join(lines) + "\n")
        partial.replace(self.state_path)


def default_uuid(index: int) -> str:
    return f"GPU-fa4e0000-0000-0000-0000-{index:012d}"


_TOP_LEVEL: Final = (
    "init_error", "count_error", "now_us", "sample_period_us", "sample_buffer", "driver_version",
)
_GPU_FIELDS: Final = tuple(f.name for f in fields(FakeGpu))
