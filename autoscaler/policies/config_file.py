"""The policy file: read at start (with the fix for a path that is a mounted ConfigMap's directory), what a
user may not expect of one that loads, and its edits while running, which apply at the next start."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

import yaml

from autoscaler.policies import strict_yaml
from autoscaler.policies.config import ConfigError, PolicyBook, parse_policy_book
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.policies.policy_values import FIELDS, above_range, parse_field, show_value
from autoscaler.policies.yaml_errors import yaml_error_text

log = logging.getLogger("autoscaler.policies.config")

def _file_inside(directory: str) -> str:
    """Which file of a directory to give instead: a mounted ConfigMap holds one file per key (and `..data`)."""
    try:
        names = sorted(n for n in os.listdir(directory) if not n.startswith("."))
    except OSError:
        names = []
    yaml_files = [n for n in names if n.endswith((".yaml", ".yml"))] or names
    if len(yaml_files) == 1:
        return f"give the file in it: --config {os.path.join(directory, yaml_files[0])}"
    return f"give one file in it ({', '.join(yaml_files) or 'it holds none'}), e.g. --config {directory}/policy.yaml"


def load_policy_book(
    path: str | os.PathLike[str], base: RuntimePolicy | None = None, *, announce: bool = True,
    given_by: Mapping[str, str] | None = None,
) -> PolicyBook:
    """Read the YAML config file (`defaults:` and `runtimes:`, docs/configuration.md, Policy).

    `announce`: log what a user may not expect of a file that loads (empty; a flag its `defaults:` replace);
    off for the start-up check, which only asks whether it loads. `given_by`: where each policy key of `base`
    that a flag or its variable set came from (`flag --skew-order`, `variable AUTOSCALER_SKEW_ORDER`), the
    settings the warning names; a key not in it (left at its default, or derived) is not warned about."""
    source = os.fspath(path)
    text, status = _read_text(source)
    try:
        document = strict_yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ConfigError(yaml_error_text(source, exc)) from exc
    book = parse_policy_book(document, source, base, given_by)
    if announce:
        _announce(document, source, base, given_by or {})
    book.source_file = WatchedFile(source, text, base, status)
    return book


def _read_text(source: str) -> tuple[str, tuple[int, int, int]]:
    """The file's text and (inode, mtime, size); ConfigError with what a start says of a file it cannot read
    (one wording at start and while running, `WatchedFile.notice_change`)."""
    try:
        with open(source, encoding="utf-8") as fh:
            status = os.fstat(fh.fileno())
            return fh.read(), (status.st_ino, status.st_mtime_ns, status.st_size)
    except IsADirectoryError as exc:
        raise ConfigError(f"{source}: cannot read config file: it is a directory (a mounted ConfigMap?); "
                          f"{_file_inside(source)}") from exc
    except OSError as exc:
        raise ConfigError(f"{source}: cannot read config file: {exc.strerror or exc}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{source}: not UTF-8 text ({exc.reason})") from exc


def _announce(document: object, source: str, base: RuntimePolicy | None, given_by: Mapping[str, str]) -> None:
    """An empty file, and settings the file's `defaults:` replace (the documented order, which surprises whoever
    passes `--skew-order 3` with the shipped file that restates `skew_order: 2`), named as the user set them."""
    if document is None:
        log.info("policy file %s is empty: every runtime scales on the built-in defaults and the flags", source)
        return
    _warn_above_range(document, source)
    defaults = document.get("defaults") if isinstance(document, Mapping) else None
    if base is None or not isinstance(defaults, Mapping):
        return
    for name, raw in defaults.items():
        if name in given_by and getattr(base, name) != parse_field(name, raw):
            where = given_by[name]
            log.warning("%s gives %s=%s, but %s sets defaults: {%s: %s}, which wins (the policy file comes after "
                        "the flags and their variables, docs/configuration.md, Policy); remove the key from the "
                        "file for the %s to apply", where, name, show_value(getattr(base, name)), source, name, raw,
                        where.split()[0])


def _warn_above_range(document: object, source: str) -> None:
    """Each value of the file above the range any runtime needs (`above_range`), where it is written: used as
    given, as the releases before the range took it (refused, it stopped every new replica of an upgrade)."""
    if not isinstance(document, Mapping):
        return
    layers: list[tuple[str, object]] = [("defaults", document.get("defaults"))]
    entries = document.get("runtimes")
    for i, entry in enumerate(entries if isinstance(entries, list) else []):
        if isinstance(entry, Mapping):
            layers.append((f"runtimes[{i}] ({entry.get('namespace')}/{entry.get('deployment')})", entry))
    for where, layer in layers:
        for name, raw in layer.items() if isinstance(layer, Mapping) else ():
            if name in FIELDS and (said := above_range(name, parse_field(name, raw))) is not None:
                log.warning("policy file %s: %s: %s", source, where, said)


@dataclass(slots=True)
class WatchedFile:
    """The policy file as read at start, and what `PolicyBook.notice_file_change` last saw of it."""

    path: str
    text: str
    base: RuntimePolicy | None
    status: tuple[int, int, int] | None
    """(inode, mtime, size) last seen (None: no file): the file is read again only when one of them changes."""
    warned: str | None = None
    """The content (or reading problem) last warned about (None: none since the file was last as read at start)."""
    unreadable: str | None = None
    """The reading problem the last check found (a restart's message), said once the next check finds it too."""

    def notice_change(self) -> None:
        """Warn once per new content when the file changed on disk. The file is read only at start
        (docs/configuration.md), so the warning says a restart applies it, or what would stop that restart: a
        file gone (a ConfigMap key renamed or removed), not UTF-8 or a directory too, said only once two checks in
        a row find it so (a writer that deletes then writes is not caught in between)."""
        try:
            status = os.stat(self.path)
            now: tuple[int, int, int] | None = (status.st_ino, status.st_mtime_ns, status.st_size)
        except OSError:
            now = None
        if now == self.status:
            return
        try:
            text, _ = _read_text(self.path)
        except ConfigError as exc:
            if self.unreadable != str(exc):  # first sight: seen again at the next check before it is said
                self.unreadable = str(exc)
                return
            self.status = now
            if self.warned != self.unreadable:
                self.warned = self.unreadable
                log.warning("policy file %s changed on disk and a restart would refuse it: %s. The adapter keeps "
                            "the policy it started with, and would not start with this file: fix it before any "
                            "restart", self.path, " ".join(self.unreadable.split(": ", 1)[1].split()))
            return
        self.status = now
        self.unreadable = None
        if text == self.warned:
            return
        self.warned = None if text == self.text else text
        if text == self.text:
            return
        try:
            parse_policy_book(strict_yaml.safe_load(text), self.path, self.base)
        except (yaml.YAMLError, ConfigError) as exc:
            problem = exc if isinstance(exc, ConfigError) else yaml_error_text(self.path, exc)
            log.warning("policy file %s changed on disk and the new version has a mistake: %s. The adapter keeps "
                        "the policy it started with, and would not start with this file: fix it before any "
                        "restart", self.path, " ".join(str(problem).split()))
            return
        log.warning("policy file %s changed on disk; the adapter reads it only at start, so every runtime still "
                    "scales on the policy it started with: restart the adapter to apply it (kubectl -n "
                    "modelmesh-autoscaler rollout restart deployment/modelmesh-autoscaler)", self.path)
