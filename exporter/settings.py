"""The exporter's settings: one typed field per flag, each flag with an `EXPORTER_*` environment twin.

Sidecars are configured from a pod spec, where environment variables are easier to template than
arguments; both work and a flag wins over its variable.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ExporterSettings:
    listen_host: str = "0.0.0.0"
    listen_port: int = 9187
    modelmesh_url: str = "https://127.0.0.1:2112/metrics"
    modelmesh_insecure: bool = False
    modelmesh_ca_file: Path | None = None
    modelmesh_timeout_s: float = 2.0
    modelmesh_interval_s: float = 5.0
    load_window_s: float = 30.0
    gpu_enabled: bool = True
    gpu_uuids: tuple[str, ...] = ()
    gpu_window_s: float = 10.0
    gpu_interval_s: float = 1.0
    log_level: str = "INFO"


def _env(name: str, default: str | None) -> str | None:
    return os.environ.get(f"EXPORTER_{name}", default)


def _env_flag(name: str) -> bool:
    return (_env(name, "") or "").strip().lower() in {"1", "true", "yes", "on"}


def _host_port(value: str) -> tuple[str, int]:
    host, sep, port = value.rpartition(":")
    if not sep or not port.isdigit() or not 0 <= int(port) < 65536:
        raise argparse.ArgumentTypeError(f"expected HOST:PORT, got {value!r}")
    return host.strip("[]") or "0.0.0.0", int(port)


def _positive(value: str) -> float:
    try:
        number = float(value)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {value!r}") from error
    if number <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {value}")
    return number


def build_parser() -> argparse.ArgumentParser:
    defaults = ExporterSettings()
    parser = argparse.ArgumentParser(
        prog="modelmesh-exporter",
        description=(
            "Per-pod sidecar for KServe ModelMesh runtimes: samples the GPU through NVML and the local "
            "ModelMesh container's own metrics, and publishes per-pod load, queue and cache metrics in the "
            "Prometheus text format at /metrics (health at /healthz). Every flag can also be set with the "
            "environment variable shown in brackets; a flag wins over its variable."
        ),
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    parser.add_argument(
        "--listen", type=_host_port, default=_env("LISTEN", f"{defaults.listen_host}:{defaults.listen_port}"),
        help="HOST:PORT to serve /metrics and /healthz on [EXPORTER_LISTEN]",
    )
    mm = parser.add_argument_group("ModelMesh")
    mm.add_argument(
        "--modelmesh-url", default=_env("MODELMESH_URL", defaults.modelmesh_url),
        help="the local ModelMesh container's metrics URL (https by default in ModelMesh) [EXPORTER_MODELMESH_URL]",
    )
    tls = mm.add_mutually_exclusive_group()
    tls.add_argument(
        "--modelmesh-insecure", action="store_true", default=_env_flag("MODELMESH_INSECURE"),
        help="do not verify ModelMesh's https certificate (it is self-signed by default) "
        "[EXPORTER_MODELMESH_INSECURE=true]",
    )
    tls.add_argument(
        "--modelmesh-ca-file", type=Path, default=_env("MODELMESH_CA_FILE", None),
        help="CA bundle that signs ModelMesh's https certificate [EXPORTER_MODELMESH_CA_FILE]",
    )
    mm.add_argument(
        "--modelmesh-timeout", type=_positive, default=_env("MODELMESH_TIMEOUT", str(defaults.modelmesh_timeout_s)),
        help="seconds to wait for one ModelMesh scrape before counting a timeout [EXPORTER_MODELMESH_TIMEOUT]",
    )
    mm.add_argument(
        "--modelmesh-interval", type=_positive,
        default=_env("MODELMESH_INTERVAL", str(defaults.modelmesh_interval_s)),
        help="seconds between ModelMesh scrapes [EXPORTER_MODELMESH_INTERVAL]",
    )
    mm.add_argument(
        "--load-window", type=_positive, default=_env("LOAD_WINDOW", str(defaults.load_window_s)),
        help="seconds over which request rate, queue delay and cache-miss rate are computed [EXPORTER_LOAD_WINDOW]",
    )
    gpu = parser.add_argument_group("GPU (NVML)")
    gpu.add_argument(
        "--no-gpu", action="store_true", default=_env_flag("NO_GPU"),
        help="turn the GPU collector off (CPU-only runtimes) [EXPORTER_NO_GPU=true]",
    )
    gpu.add_argument(
        "--gpu-uuids", default=_env("GPU_UUIDS", ""),
        help="comma-separated GPU UUIDs to report; empty = every GPU visible to this container "
        "[EXPORTER_GPU_UUIDS]",
    )
    gpu.add_argument(
        "--gpu-window", type=_positive, default=_env("GPU_WINDOW", str(defaults.gpu_window_s)),
        help="seconds of NVML utilization samples averaged into the busy ratio [EXPORTER_GPU_WINDOW]",
    )
    gpu.add_argument(
        "--gpu-interval", type=_positive, default=_env("GPU_INTERVAL", str(defaults.gpu_interval_s)),
        help="seconds between NVML reads, done in the background, never inside a scrape [EXPORTER_GPU_INTERVAL]",
    )
    parser.add_argument(
        "--log-level", default=_env("LOG_LEVEL", defaults.log_level),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"], help="log level [EXPORTER_LOG_LEVEL]",
    )
    return parser


def parse_settings(argv: list[str] | None = None) -> ExporterSettings:
    parser = build_parser()
    args = parser.parse_args(argv)
    # Environment defaults bypass argparse's type conversion; convert them the same way here.
    listen = args.listen if isinstance(args.listen, tuple) else _host_port(args.listen)
    try:
        timeout, interval, window = (
            _positive(str(args.modelmesh_timeout)), _positive(str(args.modelmesh_interval)),
            _positive(str(args.load_window)),
        )
        gpu_window, gpu_interval = _positive(str(args.gpu_window)), _positive(str(args.gpu_interval))
    except argparse.ArgumentTypeError as error:
        parser.error(str(error))
    return ExporterSettings(
        listen_host=listen[0],
        listen_port=listen[1],
        modelmesh_url=args.modelmesh_url,
        modelmesh_insecure=bool(args.modelmesh_insecure),
        modelmesh_ca_file=Path(args.modelmesh_ca_file) if args.modelmesh_ca_file else None,
        modelmesh_timeout_s=timeout,
        modelmesh_interval_s=interval,
        load_window_s=window,
        gpu_enabled=not args.no_gpu,
        gpu_uuids=tuple(u.strip() for u in str(args.gpu_uuids).split(",") if u.strip()),
        gpu_window_s=gpu_window,
        gpu_interval_s=gpu_interval,
        log_level=args.log_level,
    )
