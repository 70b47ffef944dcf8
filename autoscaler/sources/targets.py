"""Static discovery from a targets file, for running without Kubernetes (the demo, local tests).

```yaml
runtimes:
  - namespace: default
    deployment: modelmesh-serving-demo
    pods:
      - {name: demo-0, url: "http://127.0.0.1:9187/metrics"}
```
Every listed pod counts as Ready. A mistake in the file at start (a key it does not read among them, with a
"did you mean" hint) stops start-up with a message that names the file and the entry. The file is read again
when it changes (the demo adds and removes pods this way); a broken edit is logged and the last good inventory
kept.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import yaml

from autoscaler.kube_names import runtime_key_problem
from autoscaler.log_lists import few
from autoscaler.model import RuntimeKey
from autoscaler.policies import strict_yaml
from autoscaler.policies.policy_values import did_you_mean
from autoscaler.policies.yaml_errors import yaml_error_text
from autoscaler.sources.base import PodTarget, RuntimeInventory
from exporter.flag_values import without_password

log = logging.getLogger(__name__)


class TargetsFileError(ValueError):
    """The targets file is missing or malformed."""


_TOP_KEYS: Final = ("runtimes",)
_RUNTIME_KEYS: Final = ("namespace", "deployment", "annotations", "pods")
_POD_KEYS: Final = ("name", "url")
_POD_KEY_NOTES: Final[Mapping[str, str]] = {"ready": "every listed pod counts as Ready"}
"""Keys a user may expect a pod entry to take, with what the file does instead."""
_NO_NOTES: Final[Mapping[str, str]] = {}


def _text(entry: dict[str, Any], key: str, where: str) -> str:
    value = entry.get(key)
    if not isinstance(value, str) or not value:
        raise TargetsFileError(f"{where}: '{key}' must be a non-empty string")
    return value


def _check_keys(entry: dict[Any, Any], known: tuple[str, ...], where: str, what: str = "key",
                notes: Mapping[str, str] = _NO_NOTES) -> None:
    """Refuse a key the file does not read: dropped without a word, a misspelt `annotatons:` left the runtime's
    policy annotations unapplied. The hint is the policy file's (`did_you_mean`), else the keys it takes, with
    what the file does instead of a key a user may expect (`notes`)."""
    for key in entry:
        if key in known:
            continue
        hint = "" if str(key) in notes else did_you_mean(str(key), known)
        if hint:
            raise TargetsFileError(f"{where}: unknown {what} {key!r}{hint}")
        note = f"; {notes[str(key)]}" if str(key) in notes else ""
        raise TargetsFileError(f"{where}: unknown {what} {key!r} (expected {', '.join(map(repr, known))}{note})")


def _read_document(path: Path) -> object:
    """The file's YAML, or a `TargetsFileError` in one line (`FILE:LINE:COLUMN: not valid YAML: ...`, as the
    policy file says it)."""
    try:
        return strict_yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as error:
        raise TargetsFileError(f"cannot read targets file {path}: {error.strerror}") from error
    except UnicodeDecodeError as error:
        raise TargetsFileError(f"targets file {path} is not UTF-8 text ({error.reason})") from error
    except yaml.YAMLError as error:
        raise TargetsFileError(yaml_error_text(path, error)) from error


def _pods(entry: dict[str, Any], key: RuntimeKey, where: str) -> tuple[PodTarget, ...]:
    """The pods of one runtime entry, each checked."""
    pods_entry = entry.get("pods")
    if not isinstance(pods_entry, list):
        raise TargetsFileError(f"{where}: 'pods' must be a list")
    pods: list[PodTarget] = []
    for pod_index, pod in enumerate(pods_entry):
        pod_where = f"{where}.pods[{pod_index}]"
        if not isinstance(pod, dict):
            raise TargetsFileError(f"{pod_where} must be a mapping with 'name' and 'url'")
        _check_keys(pod, _POD_KEYS, pod_where, notes=_POD_KEY_NOTES)
        url = _text(pod, "url", pod_where)
        if not url.startswith(("http://", "https://")):
            raise TargetsFileError(f"{pod_where}: url must start with http:// or https://, got {url!r}")
        name = _text(pod, "name", pod_where)
        if any(existing.name == name for existing in pods):
            raise TargetsFileError(f"{pod_where}: pod {name!r} is listed twice in runtime {key}")
        pods.append(PodTarget(name=name, ready=True, url=url))
    return tuple(pods)


def _runtime(entry: object, where: str) -> RuntimeInventory:
    """One `runtimes:` entry, checked."""
    if not isinstance(entry, dict):
        raise TargetsFileError(f"{where} must be a mapping")
    _check_keys(entry, _RUNTIME_KEYS, where)
    key = RuntimeKey(_text(entry, "namespace", where), _text(entry, "deployment", where))
    if (problem := runtime_key_problem(key.namespace, key.deployment)) is not None:
        raise TargetsFileError(f"{where}: {problem}")
    pods = _pods(entry, key, where)
    annotations = entry.get("annotations") or {}
    if not isinstance(annotations, dict):
        raise TargetsFileError(f"{where}: 'annotations' must be a mapping")
    return RuntimeInventory(key=key, pods=pods, replicas=len(pods),
                            annotations={str(k): str(v) for k, v in annotations.items()})


def load_targets(path: Path) -> dict[RuntimeKey, RuntimeInventory]:
    """Every runtime of the file; `TargetsFileError` names the file, the entry and the mistake."""
    document = _read_document(path)
    if isinstance(document, dict):
        _check_keys(document, _TOP_KEYS, str(path), "top-level key")
    if not isinstance(document, dict) or not isinstance(document.get("runtimes"), list):
        raise TargetsFileError(f"{path}: expected a mapping with a 'runtimes' list")
    inventory: dict[RuntimeKey, RuntimeInventory] = {}
    for index, entry in enumerate(document["runtimes"]):
        runtime = _runtime(entry, f"{path}: runtimes[{index}]")
        if runtime.key in inventory:
            raise TargetsFileError(f"{path}: runtimes[{index}]: runtime {runtime.key} is listed twice")
        inventory[runtime.key] = runtime
    return inventory


_Stamp = tuple[int, int, int, int]
"""(device, inode, mtime_ns, size): a new inode is a file renamed into place, whole; the same inode with a new
mtime or size is a file written in place, which may be caught half-written."""


class StaticTargetsDiscovery:
    """A `PodDiscovery` over a fixed inventory read from a targets file."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._inventory: dict[RuntimeKey, RuntimeInventory] = {}
        self._stamp: _Stamp | None = None
        self._pending: _Stamp | None = None

    def healthy_for(self, namespace: str) -> bool:
        """A targets file, once read, is never out of date for any namespace."""
        return True

    def _file_stamp(self) -> _Stamp | None:
        try:
            stat = self._path.stat()
        except OSError:
            return None
        return stat.st_dev, stat.st_ino, stat.st_mtime_ns, stat.st_size

    async def start(self) -> None:
        self._stamp = self._file_stamp()
        self._inventory = load_targets(self._path)

    def inventory(self) -> dict[RuntimeKey, RuntimeInventory]:
        """The inventory, read again first if the file changed since and is whole (one `stat` per call otherwise)."""
        stamp = self._file_stamp()
        if stamp is not None and stamp != self._stamp and self._settled(stamp):
            self._stamp = stamp
            try:
                inventory = load_targets(self._path)
            except TargetsFileError as error:
                log.warning("targets file changed but cannot be used; keeping the last good one: %s", error)
            else:
                _log_changes(self._path, self._inventory, inventory)
                self._inventory = inventory
        return self._inventory

    def _settled(self, stamp: _Stamp) -> bool:
        """Whether a changed file may be read now. One renamed into place (a ConfigMap's symlink swap, an atomic
        writer: a new inode) is whole, so at once. One written in place may be caught mid-write, still valid YAML
        with runtimes missing, which dropped them for a refresh (their HPAs got 404) and brought them back with
        no memory; so it is read only once two checks in a row find it unchanged."""
        if self._stamp is None or stamp[:2] != self._stamp[:2]:
            return True
        settled, self._pending = stamp == self._pending, stamp
        return settled

    async def close(self) -> None:
        return None


def _log_changes(path: Path, old: dict[RuntimeKey, RuntimeInventory],
                 new: dict[RuntimeKey, RuntimeInventory]) -> None:
    """One line per reload that changed anything, so a runtime that drops out or comes back, a pod scraped at
    another URL (its exporter moved, a port fixed) or a runtime's policy annotations edited, is never silent.
    URLs as every log shows them: a password in one as `***`."""
    def urls(inventory: dict[RuntimeKey, RuntimeInventory]) -> dict[str, str | None]:
        return {f"{key}/{pod.name}": pod.url for key, entry in inventory.items() for pod in entry.pods}

    before, after = urls(old), urls(new)
    moved = {f"{pod} ({_shown(before[pod])} -> {_shown(url)})"
             for pod, url in after.items() if pod in before and before[pod] != url}
    changes = [(what, sorted(names)) for what, names in (
        ("added runtimes", {str(key) for key in new.keys() - old.keys()}),
        ("removed runtimes", {str(key) for key in old.keys() - new.keys()}),
        ("added pods", after.keys() - before.keys()), ("removed pods", before.keys() - after.keys()),
        ("pods with a changed URL", moved),
        ("runtimes with changed annotations",
         {str(key) for key, entry in new.items() if key in old and old[key].annotations != entry.annotations}),
    ) if names]
    if changes:
        log.info("targets file %s read again: %s", path,
                 "; ".join(f"{what} {few(names)}" for what, names in changes))  # a fleet's names: a few, counted


def _shown(url: str | None) -> str:
    return "none" if url is None else without_password(url)
