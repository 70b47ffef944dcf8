"""The docs a user follows to turn on ModelMesh's per-model metrics, which the unique-copy need term reads.

Without them the term has nothing to read and every pod needs the same for it: nothing fails, nothing says
so, and the deletion costs are as before. So the install guide must carry the step, and what it writes must be
what the shipped sidecar reads: `MM_METRICS` replaces ModelMesh's whole metrics setting, and a port or scheme
there other than the sidecar's `EXPORTER_MODELMESH_URL` leaves the exporter reading nothing at all.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlsplit

import yaml

from exporter import names

DOCS = Path(__file__).resolve().parents[1] / "docs"
SIDECAR = Path(__file__).resolve().parents[1] / "manifests" / "examples" / "exporter-sidecar-patch.yaml"


def env_blocks(doc: str) -> list[dict[str, str]]:
    """Each `internalModelMeshEnvVars` YAML block of a doc, as {variable: value}."""
    blocks = re.findall(r"```yaml\n(internalModelMeshEnvVars:\n.*?)```", (DOCS / doc).read_text(), re.S)
    return [{item["name"]: item["value"] for item in yaml.safe_load(block)["internalModelMeshEnvVars"]}
            for block in blocks]


def sidecar_modelmesh_url() -> str:
    (patch,) = [op for op in yaml.safe_load(SIDECAR.read_text()) if op["op"] == "add"]
    (value,) = [env["value"] for env in patch["value"]["env"] if env["name"] == "EXPORTER_MODELMESH_URL"]
    return str(value)


def test_the_install_guide_turns_on_per_model_metrics_as_the_sidecar_reads_them() -> None:
    url = urlsplit(sidecar_modelmesh_url())
    for doc in ("operations.md", "design.md"):
        (env,) = env_blocks(doc)
        kind, _, options = env["MM_METRICS"].partition(":")
        settings = dict(option.split("=", 1) for option in options.split(";"))
        assert kind == "prometheus", doc
        assert settings.get("per_model_metrics") == "true", doc
        assert (settings.get("scheme", "https"), int(settings.get("port", 2112))) == (url.scheme, url.port), doc


def test_the_install_guide_says_how_to_see_the_series_and_how_to_turn_it_off() -> None:
    text = (DOCS / "operations.md").read_text()
    section = text.split("### 2. Per runtime: the exporter sidecar", 1)[1].split("\n### ", 1)[0]
    assert f"grep {names.MODEL_LAST_SERVED_TIMESTAMP}" in section
    assert "EXPORTER_MODEL_RECENCY_HORIZON" in section and "need_weight_unique" in section
