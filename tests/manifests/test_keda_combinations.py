"""KEDA users and the overlays that go in place of the base. `namespaced`, `exporter-tls` and `cert-manager` each hold
the base's APIService `v1beta1.external.metrics.k8s.io`; on a cluster where KEDA owns it, `kubectl apply -k` of one of
them replaces KEDA's, and every ScaledObject in the cluster stops. The guides offered `namespaced` and `exporter-tls`
"in place of the base" without a word about KEDA. Now every passage that offers one says how a KEDA user combines it
with the component `manifests/examples/keda/component` (what the KEDA overlay adds to the base and deletes from it),
and the kustomization operations.md shows for that builds, for each such overlay, with no APIService."""

from __future__ import annotations

import functools
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from tests.manifests.support import BASE, EXAMPLES, KEDA, MANIFESTS, REPO, Object, kustomize

KEDA_COMPONENT = "examples/keda/component"
"""How the guides name it (manifests/README.md without the `manifests/` the other guides write)."""
OPERATIONS = REPO / "docs" / "operations.md"
GUIDES = (REPO / "README.md", OPERATIONS, MANIFESTS / "README.md",
          *sorted(EXAMPLES.glob("*/kustomization.yaml")))


@functools.cache
def overlays_holding_the_api_service() -> list[str]:
    """The folders of manifests/examples that render an APIService, as built (not as any list says)."""
    return sorted(d.name for d in EXAMPLES.iterdir() if (d / "kustomization.yaml").exists()
                  and any(o["kind"] == "APIService" for o in kustomize(d)))


def passages(text: str) -> Iterator[str]:
    """Paragraphs, list blocks and code blocks (blank-line separated), one table row each; a manifest's
    comments read as prose, their `#` removed."""
    for block in re.split(r"\n\s*\n", text):
        lines = block.splitlines()
        if lines and all(line.lstrip().startswith("|") for line in lines):
            yield from lines
        else:
            yield re.sub(r"\s*\n\s*(?:#\s*)?", " ", block)


def offered(passage: str, folder: str) -> bool:
    """Whether the passage tells the reader to apply `folder` in place of the base: its `kubectl apply -k`, or
    "apply ... instead", or the folder said to go "in place of" / "instead of the base"."""
    path = rf"(?:manifests/)?examples/{re.escape(folder)}/?"
    return bool(re.search(rf"apply -k {path}(?![\w/-])", passage)
                or re.search(rf"{path}`?[^.;]{{0,40}}\b(?:in place of|instead of) the base", passage)
                or re.search(rf"(?:in place of|instead of) the base[^.;]{{0,20}}{path}", passage)
                or re.search(rf"\bapply[^.;]{{0,20}}{path}`? instead\b", passage))


def test_three_overlays_hold_the_api_service() -> None:
    """Else the tests below check nothing: these are the overlays a KEDA user must not apply as they are."""
    assert overlays_holding_the_api_service() == ["cert-manager", "exporter-tls", "namespaced"]


def test_every_passage_offering_such_an_overlay_tells_keda_users_how_to_combine_it() -> None:
    silent = []
    holders = overlays_holding_the_api_service()
    for guide in GUIDES:
        for passage in passages(guide.read_text()):
            named = [f for f in holders if offered(passage, f)]
            if named and not ("KEDA" in passage and KEDA_COMPONENT in passage):
                silent.append(f"{guide.relative_to(REPO)} offers {named} without the KEDA way: {passage[:160]}")
    assert not silent, "\n".join(silent)


def documented_kustomization() -> tuple[Object, list[str]]:
    """The kustomization operations.md's KEDA section shows for combining an overlay with KEDA's component, and
    the overlays its `resources:` entry's comment says may take that entry's place."""
    text = OPERATIONS.read_text()
    blocks = [b for b in re.findall(r"```yaml\n(.*?)```", text, flags=re.S)
              if "components:" in b and "keda/component" in b]
    assert len(blocks) == 1, f"operations.md shows {len(blocks)} kustomizations adding KEDA's component"
    [resource_line] = [line for line in blocks[0].splitlines() if re.match(r"\s*- \.\./[\w-]+\s*(#|$)", line)]
    alternatives = re.findall(r"\.\./([\w-]+)", resource_line)
    return yaml.safe_load(blocks[0]), alternatives


def test_the_documented_kustomization_names_every_overlay_that_holds_the_api_service() -> None:
    _, alternatives = documented_kustomization()
    assert sorted(alternatives) == overlays_holding_the_api_service()


def keyed(objects: list[Object]) -> dict[tuple[str, str, str], Object]:
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objects}


@pytest.mark.parametrize("overlay", overlays_holding_the_api_service())
def test_each_documented_combination_is_the_overlay_as_the_keda_overlay_changes_the_base(
        overlay: str, tmp_path: Path) -> None:
    """Built where the docs put it (a folder of its own beside the overlays), with the overlay named."""
    kustomization, _ = documented_kustomization()
    kustomization["resources"] = [f"../{overlay}"]
    manifests = tmp_path / "manifests"
    shutil.copytree(MANIFESTS, manifests)
    mine = manifests / "examples" / "mine"
    mine.mkdir()
    (mine / "kustomization.yaml").write_text(yaml.safe_dump(kustomization))

    built = keyed(kustomize(mine))

    assert not [key for key in built if key[0] == "APIService"]
    base, keda = keyed(kustomize(BASE)), keyed(kustomize(KEDA))
    removed = base.keys() - keda.keys()  # the APIService and the grants of the metrics only it serves
    added = {key: obj for key, obj in keda.items() if key not in base}  # KEDA's token, RBAC, TriggerAuthentication
    expected = {key: obj for key, obj in keyed(kustomize(EXAMPLES / overlay)).items() if key not in removed}
    assert built == {**expected, **added}
