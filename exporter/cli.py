"""`modelmesh-exporter`: run the per-pod sidecar (flags and `EXPORTER_*` variables: `--help`)."""

from __future__ import annotations

import logging

from exporter.app import build_app, run
from exporter.settings import parse_settings

log = logging.getLogger("exporter")


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(argv)
    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    tls = (
        "without verifying its certificate" if settings.modelmesh_insecure
        else f"trusting {settings.modelmesh_ca_file}" if settings.modelmesh_ca_file
        else "trusting the system CAs"
    )
    log.info(
        "serving on %s:%d; reading ModelMesh at %s every %g s (%s; timeout %g s; load window %g s); "
        "GPU collector %s",
        settings.listen_host, settings.listen_port, settings.modelmesh_url, settings.modelmesh_interval_s,
        tls, settings.modelmesh_timeout_s, settings.load_window_s, "on" if settings.gpu_enabled else "off",
    )
    if settings.modelmesh_insecure and settings.modelmesh_url.startswith("https"):
        log.warning("--modelmesh-insecure: ModelMesh's certificate is not verified")
    # The access log only at DEBUG: one line per scrape otherwise fills the pod's log for nothing.
    run(build_app(settings), settings.listen_host, settings.listen_port,
        access_log=settings.log_level == "DEBUG")


if __name__ == "__main__":
    main()
