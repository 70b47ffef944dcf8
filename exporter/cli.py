"""`modelmesh-exporter`: run the per-pod sidecar."""

from __future__ import annotations

import logging

from aiohttp import web

from exporter.app import build_app
from exporter.settings import parse_settings

log = logging.getLogger("exporter")


def main(argv: list[str] | None = None) -> None:
    settings = parse_settings(argv)
    logging.basicConfig(
        level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
    log.info(
        "serving on %s:%d; reading ModelMesh at %s every %.0f s (load window %.0f s); GPU collector %s",
        settings.listen_host, settings.listen_port, settings.modelmesh_url, settings.modelmesh_interval_s,
        settings.load_window_s, "on" if settings.gpu_enabled else "off",
    )
    web.run_app(build_app(settings), host=settings.listen_host, port=settings.listen_port, print=None)


if __name__ == "__main__":
    main()
