"""The import rules that keep the house's plan: decisions do no I/O, and arrows between packages run one way.

Read from the source with `ast` (every `import`, at module level or inside a function), so a rule breaks the
moment someone writes the import, whether or not a test happens to execute it.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

IO_LIBRARIES = ("aiohttp", "kubernetes", "prometheus_api_client", "requests", "urllib3", "socket", "ssl", "pynvml")

FORBIDDEN: dict[str, tuple[str, ...]] = {
    "autoscaler.policies": (
        "autoscaler.kube", "autoscaler.sources", "autoscaler.api", "autoscaler.actuation", "autoscaler.demo",
        "autoscaler.simulation", "autoscaler.refresher", "autoscaler.server", "autoscaler.selfmetrics",
        "autoscaler.selfmetrics_api", "autoscaler.selfmetrics_reads", "autoscaler.selfmetrics_runtimes",
        "autoscaler.selfmetrics_deletion_costs", "autoscaler.selfmetrics_bridge", "exporter", *IO_LIBRARIES,
    ),
    "autoscaler.kube": ("autoscaler.sources", "autoscaler.api", "autoscaler.actuation", "autoscaler.policies"),
    "autoscaler.sources": ("autoscaler.api", "autoscaler.actuation"),
    "autoscaler.api": ("autoscaler.sources", "autoscaler.actuation"),
    "autoscaler.actuation": ("autoscaler.api",),
    "exporter": ("autoscaler",),
}

SHARED: tuple[str, ...] = ("exporter.signal_ceilings", "exporter.recency_horizon_range")
"""Modules every layer may import: plain data both ends of the wire agree on (the signals' ceilings, which the
exporter and the policies both refuse readings by; the longest per-model recency, which the exporter's horizon and
the policies' `target_lru_age_s` both take), in modules that import the standard library alone."""


def module_name(path: Path, root: Path) -> str:
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path, root: Path) -> set[str]:
    """Every module `path` imports, absolute, including relative imports resolved against its package."""
    tree = ast.parse(path.read_text(), filename=str(path))
    name = module_name(path, root)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                prefix = ".".join(base)
                module = f"{prefix}.{node.module}" if node.module else prefix
            else:
                module = node.module or ""
            found.add(module)
            found.update(f"{module}.{alias.name}" for alias in node.names)
    return found


def violations(package: str, forbidden: tuple[str, ...], root: Path = ROOT) -> list[str]:
    found = []
    for path in sorted((root / package.replace(".", "/")).rglob("*.py")):
        for imported in sorted(imports_of(path, root)):
            shared = any(imported == module or imported.startswith(module + ".") for module in SHARED)
            if not shared and any(imported == bad or imported.startswith(bad + ".") for bad in forbidden):
                found.append(f"{module_name(path, root)} imports {imported}")
    return found


@pytest.mark.parametrize("package", sorted(FORBIDDEN))
def test_package_imports_only_what_its_layer_allows(package: str) -> None:
    assert violations(package, FORBIDDEN[package]) == []


def test_the_rule_fails_when_a_policy_imports_the_kubernetes_layer(tmp_path: Path) -> None:
    """The check itself can fail: a policy module that reaches for `autoscaler.kube` is reported."""
    policies = tmp_path / "autoscaler" / "policies"
    policies.mkdir(parents=True)
    (policies / "__init__.py").write_text("")
    (policies / "leaky.py").write_text(
        "def f():\n    from autoscaler.kube.client import KubeClient\n    import aiohttp\n")
    found = violations("autoscaler.policies", FORBIDDEN["autoscaler.policies"], tmp_path)
    assert found == ["autoscaler.policies.leaky imports aiohttp",
                     "autoscaler.policies.leaky imports autoscaler.kube.client",
                     "autoscaler.policies.leaky imports autoscaler.kube.client.KubeClient"]


@pytest.mark.parametrize("module", SHARED)
def test_a_module_every_layer_may_import_imports_the_standard_library_alone(module: str) -> None:
    """Were it to import anything else (an I/O library, another of the project's modules), every layer would,
    through it."""
    path = ROOT / (module.replace(".", "/") + ".py")
    imported = {name.partition(".")[0] for name in imports_of(path, ROOT)}
    assert imported <= set(sys.stdlib_module_names) | {"__future__"}, imported
