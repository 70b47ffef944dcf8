"""Write `crd_schemas.json`: the served versions' structural schemas (descriptions left out) of the foreign
custom resources the examples ship, from the CRD files of their projects, for `test_foreign_objects.py`.

    python tests/manifests/make_crd_schemas.py SOURCE=CRD.yaml ... > tests/manifests/crd_schemas.json

SOURCE says where the CRD came from (repository, commit and path), kept in the file for the next update.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import yaml


def without_descriptions(schema: Any) -> Any:
    if isinstance(schema, dict):
        return {k: without_descriptions(v) for k, v in schema.items() if k != "description"}
    if isinstance(schema, list):
        return [without_descriptions(item) for item in schema]
    return schema


def main(arguments: list[str]) -> None:
    sources, schemas = [], {}
    for argument in arguments:
        source, path = argument.rsplit("=", 1)
        sources.append(source)
        for crd in yaml.safe_load_all(Path(path).read_text()):
            if not crd or crd.get("kind") != "CustomResourceDefinition":
                continue
            for version in crd["spec"]["versions"]:
                if version.get("served"):
                    key = f"{crd['spec']['group']}/{version['name']} {crd['spec']['names']['kind']}"
                    schemas[key] = without_descriptions(version["schema"]["openAPIV3Schema"])
    json.dump({"sources": sources, "schemas": schemas}, sys.stdout, separators=(",", ":"), sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main(sys.argv[1:])
