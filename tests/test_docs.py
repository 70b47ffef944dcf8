"""The user documentation stays complete and self-contained: every flag, variable and policy key is in
docs/configuration.md, and README.md and docs/ link only to files and headings that exist in the repository."""

from __future__ import annotations

import argparse
import functools
import os
import re
import subprocess
import sys
from dataclasses import fields
from pathlib import Path

import pytest
import yaml

from autoscaler import cli
from autoscaler.names import POLICY_ANNOTATION_PREFIX
from autoscaler.policies.config_file import load_policy_book
from autoscaler.policies.policy import RuntimePolicy
from autoscaler.serve_args import env_variables
from autoscaler.sources.targets import load_targets
from exporter.settings import build_parser as exporter_parser
from tests.support.kubectl import KUBECTL

REPO = Path(__file__).resolve().parent.parent
DOCS = [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]
CONFIGURATION = (REPO / "docs" / "configuration.md").read_text()


def subcommand(name: str) -> argparse.ArgumentParser:
    parser = cli.build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    found: argparse.ArgumentParser = commands.choices[name]
    return found


NO_TWIN = {"--version"}
"""Flags that set nothing, so have no environment variable: `modelmesh-exporter --version`."""


def long_flags(parser: argparse.ArgumentParser) -> set[str]:
    """Each flag as its row names it: a switch's off form (`--gpu` for `--no-gpu`) is in the Switches paragraph."""
    return {action.option_strings[0] for action in parser._actions if action.option_strings[0].startswith("--")}


@pytest.mark.parametrize("parser", [exporter_parser(), subcommand("serve"), subcommand("demo"),
                                    subcommand("simulate")],
                         ids=["modelmesh-exporter", "serve", "demo", "simulate"])
def test_configuration_lists_every_flag(parser: argparse.ArgumentParser) -> None:
    missing = sorted(flag for flag in long_flags(parser) if f"| `{flag}` |" not in CONFIGURATION)
    assert not missing, f"docs/configuration.md has no table row for {missing}"


def test_configuration_lists_every_environment_variable() -> None:
    exporter = ["EXPORTER_" + f.removeprefix("--").replace("-", "_").upper()
                for f in long_flags(exporter_parser()) - NO_TWIN]
    missing = sorted(v for v in [*exporter, *env_variables()] if f"`{v}`" not in CONFIGURATION)
    assert not missing, f"docs/configuration.md does not name {missing}"


def test_configuration_lists_every_policy_key_and_its_annotation() -> None:
    for field in fields(RuntimePolicy):
        annotation = POLICY_ANNOTATION_PREFIX + field.name.replace("_", "-")
        assert f"| `{field.name}` | `{annotation}` |" in CONFIGURATION, field.name


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    return {slug(m.group(1)) for m in re.finditer(r"^#+ (.+)$", text, flags=re.M)}


@pytest.mark.parametrize("path", [*DOCS, REPO / "manifests" / "README.md"], ids=lambda p: str(p.relative_to(REPO)))
def test_links_stay_inside_the_repository_and_resolve(path: Path) -> None:
    text = path.read_text()
    assert "shared/" not in text and "DESIGN" not in text, "cite docs/design.md, not the project's notes"
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if target.startswith(("http://", "https://")):
            continue
        file_part, _, anchor = target.partition("#")
        linked = (path.parent / file_part).resolve() if file_part else path
        assert linked.is_relative_to(REPO) and linked.exists(), f"{path.name}: broken link {target}"
        if anchor and linked.suffix == ".md":
            assert anchor in anchors(linked), f"{path.name}: no heading for #{anchor} in {linked.name}"


# Command lines the docs give: in shell blocks (continued with `\`) and in `code spans`, which may wrap.
COMMAND_DOCS = [*DOCS, REPO / "manifests" / "README.md"]
PROGRAMS = re.compile(r"(?:taskset -c \S+ )?(python (?:bench|tests/gpu)/\w+\.py|modelmesh-autoscaler (?:serve|demo|"
                      r"simulate)|modelmesh-exporter|kubectl (?:get|patch|apply|delete|annotate|describe|kustomize|-n))"
                      r"\b(.*)")


def documented_commands() -> list[tuple[str, str, str]]:
    """(doc, program, the rest of its line) for every command line in the user docs."""
    found = []
    for path in COMMAND_DOCS:
        text = path.read_text()
        snippets = [block.replace("\\\n", " ") for block in re.findall(r"```(?:sh|bash)\n(.*?)```", text, flags=re.S)]
        snippets = [line.split(" #")[0] for block in snippets for line in block.splitlines()]
        prose = re.sub(r"```.*?```", "", text, flags=re.S)
        snippets += [span.replace("\n", " ") for span in re.findall(r"`([^`]+)`", prose)]
        for snippet in snippets:
            match = PROGRAMS.match(snippet.strip())
            if match and "NAME" not in match.group(1):  # `python bench/NAME.py --help`: any of them, below
                found.append((str(path.relative_to(REPO)), match.group(1), match.group(2)))
    return found


def help_text(program: str, rest: str) -> str:
    if program.startswith("python "):
        command = [sys.executable, program.removeprefix("python ")]
    elif program.startswith("modelmesh-"):
        module = "exporter.cli" if program == "modelmesh-exporter" else "autoscaler.cli"
        command = [sys.executable, "-m", module, *program.split()[1:]]
    else:  # kubectl: the verb's help (the verb follows `-n NAMESPACE` where that comes first)
        words = [w for w in f"{program} {rest}".split()[1:] if not w.startswith("-")]
        command = [KUBECTL, *(words[1:2] if program == "kubectl -n" else words[:1])]
    return _help(tuple(command))


@functools.cache
def _help(command: tuple[str, ...]) -> str:
    result = subprocess.run([*command, "--help"], capture_output=True, text=True, timeout=60, cwd=REPO,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    assert result.returncode == 0, f"{' '.join(command)} --help: {result.stderr}"
    return result.stdout


def test_the_docs_give_command_lines_to_check() -> None:
    programs = {program for _, program, _ in documented_commands()}
    assert {"modelmesh-autoscaler simulate", "python bench/bench_fleet.py", "kubectl patch"} <= programs, programs


@pytest.mark.parametrize(("doc", "program", "rest"), documented_commands(),
                         ids=[f"{d}:{p} {r[:40]}" for d, p, r in documented_commands()])
def test_every_flag_of_a_documented_command_is_in_its_help(doc: str, program: str, rest: str) -> None:
    flags = set(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", rest))
    text = help_text(program, rest)
    missing = sorted(flag for flag in flags if not re.search(rf"(?<![\w-]){flag}(?![\w-])", text))
    assert not missing, f"{doc}: `{program}{rest}` names {missing}, which its --help does not have"


HEAVY_LIBRARIES = {"aiohttp", "cryptography", "kubernetes", "numpy", "prometheus_client"}
PARSED_AFTER_IMPORTS = {"bench_fleet.py", "bench_modelmesh_text.py", "bench_simulate.py"}
"""Benchmarks that still read their flags after their modules load: a flag's type, default or help is theirs
(`bench_simulate.py`'s flag types are the simulator's, the others' help names their constants)."""


@pytest.mark.parametrize("script", sorted((REPO / "bench").glob("bench_*.py")), ids=lambda p: p.name)
def test_every_benchmark_answers_help_and_refuses_an_unknown_flag(script: Path) -> None:
    """docs/performance.md: `python bench/NAME.py --help` gives its options (and runs nothing). A mistyped flag
    is refused before the libraries a run needs load (`-X importtime` lists every module loaded): it waited
    0.3-0.6 CPU-s for them, as `--help` did."""
    shown = _help((sys.executable, f"bench/{script.name}"))  # as the docs run it, and read once per session
    assert shown.startswith("usage: "), shown
    refused = subprocess.run([sys.executable, "-X", "importtime", f"bench/{script.name}", "--no-such-flag"],
                             capture_output=True, text=True, timeout=60, cwd=REPO,
                             env={**os.environ, "PYTHONPATH": str(REPO)})
    assert refused.returncode == 2 and "unrecognized arguments: --no-such-flag" in refused.stderr, refused.stderr
    loaded = {line.rpartition("|")[2].strip() for line in refused.stderr.splitlines()
              if line.startswith("import time:")}
    assert "argparse" in loaded, refused.stderr  # what the refusal needed was listed
    if script.name not in PARSED_AFTER_IMPORTS:
        assert not (heavy := loaded & HEAVY_LIBRARIES), heavy


def deployment_flags() -> set[str]:
    """The flags `manifests/base/deployment.yaml` gives the adapter."""
    deployment = yaml.safe_load((REPO / "manifests" / "base" / "deployment.yaml").read_text())
    container = next(c for c in deployment["spec"]["template"]["spec"]["containers"]
                     if c.get("args", [None])[0] == "serve")
    return {arg.split("=")[0] for arg in container["args"][1:]}


@pytest.mark.parametrize("path", [REPO / "docs" / "configuration.md", REPO / "manifests" / "README.md"],
                         ids=lambda p: str(p.relative_to(REPO)))
def test_the_flags_the_docs_say_the_deployment_passes_are_the_ones_it_passes(path: Path) -> None:
    sentence = re.search(r"(?:deployment\.yaml`|the Deployment) passes (.*?)\.(?:\s|$)", path.read_text(), flags=re.S)
    assert sentence, f"{path.name} no longer says which flags the Deployment passes: update this test"
    said = set(re.findall(r"`(--[\w-]+)`", sentence.group(1)))
    assert said == deployment_flags(), (f"{path.name} says the Deployment passes {sorted(said)}; it passes "
                                        f"{sorted(deployment_flags())}")


def documented_defaults(section: str) -> dict[str, str]:
    """flag -> the `default` cell of its row in the table under the heading `section` of configuration.md."""
    text = CONFIGURATION.split(f"### {section}\n", 1)[1].split("\n#", 1)[0]
    rows = [[cell.strip() for cell in line.strip().strip("|").split("|")]
            for line in text.splitlines() if line.startswith("|")]
    column = rows[0].index("default")
    return {row[0].strip("`"): row[column] for row in rows[2:] if row[0].startswith("`--")}


def help_default(action: argparse.Action) -> str | None:
    text = (action.help or "").replace("%(default)s", str(action.default)).replace("%%", "%")
    found = re.search(r"default:? ([^;)]*)", text)
    return found.group(1) if found else None


@pytest.mark.parametrize(("section", "parser"), [("modelmesh-exporter", exporter_parser()),
                                                 ("modelmesh-autoscaler serve", subcommand("serve")),
                                                 ("modelmesh-autoscaler demo", subcommand("demo")),
                                                 ("modelmesh-autoscaler simulate", subcommand("simulate"))],
                         ids=["modelmesh-exporter", "serve", "demo", "simulate"])
def test_the_defaults_in_configuration_md_are_the_ones_help_prints(section: str,
                                                                    parser: argparse.ArgumentParser) -> None:
    documented = documented_defaults(section)
    wrong = []
    for action in parser._actions:
        flag = next((s for s in action.option_strings if s.startswith("--")), "--help")
        printed, cell = help_default(action), documented.get(flag, "")
        if flag == "--help" or printed is None:
            continue
        quoted, number = re.search(r"`([^`]+)`", cell), re.search(r"\d+(?:\.\d+)?", cell)
        printed_number = (re.findall(r"\d+(?:\.\d+)?", printed) or [None])[0]
        if quoted:  # a value: compared where --help prints one too, not words ("all four")
            differs = " " not in printed and quoted.group(1) != printed
        else:
            differs = number is not None and number.group(0) != printed_number
        if differs:
            wrong.append(f"{flag}: docs {cell!r}, --help {printed!r}")
    assert not wrong, "\n".join(wrong)


@functools.cache
def section_titles(path: Path) -> list[str]:
    """Headings and bold run-in paragraph titles (`**Sizing.** The adapter ...`), lower case."""
    text = re.sub(r"```.*?```", "", path.read_text(), flags=re.S)
    titles = re.findall(r"^#+ (.+)$", text, flags=re.M) + re.findall(r"^\*\*([^*]+?)\.?\*\*", text, flags=re.M)
    return [title.replace("`", "").lower() for title in titles]


def section_references() -> list[tuple[str, str, str]]:
    """(file, doc, section) for every `docs/X.md, Section` a source file, manifest or doc cites in words."""
    found = []
    tracked = subprocess.run(["git", "ls-files"], capture_output=True, text=True, cwd=REPO, check=True).stdout
    for name in tracked.split():
        if not name.endswith((".py", ".yaml", ".md", ".c")):
            continue
        for match in re.finditer(r"((?:docs/)?[a-z]+\.md|README\.md), ([A-Z][\w'/ -]+)",
                                 (REPO / name).read_text()):
            doc = match.group(1) if match.group(1).startswith(("docs/", "README")) else f"docs/{match.group(1)}"
            if (REPO / doc).exists():
                found.append((name, doc, match.group(2).strip()))
    return found


def test_sections_cited_in_words_exist() -> None:
    """Comments, messages and manifests send readers to `docs/operations.md, Sizing`: that title must be there."""
    references = section_references()
    assert len(references) > 10
    missing = [f"{name}: {doc}, {section}" for name, doc, section in references
               if not any(section.lower() in title for title in section_titles(REPO / doc))]
    assert not missing, "no such heading or bold paragraph title:\n" + "\n".join(missing)


def test_every_variable_the_docs_name_is_read() -> None:
    """A variable the docs name but no code reads would be silently ignored where a user sets it."""
    exporter = {"EXPORTER_" + f.removeprefix("--").replace("-", "_").upper()
                for f in long_flags(exporter_parser()) - NO_TWIN}
    known = exporter | set(env_variables()) | {"AUTOSCALER_SOME_FLAG", "EXPORTER_SOME_FLAG"}  # the naming rule
    named = {(path.name, name) for path in COMMAND_DOCS
             for name in re.findall(r"\b((?:AUTOSCALER|EXPORTER)_[A-Z0-9_]+)\b", path.read_text())}
    unknown = sorted(f"{doc}: {name}" for doc, name in named if name not in known)
    assert not unknown, f"no such variable: {unknown}"


def test_the_documented_selector_installs_the_example_without_its_hpa_and_nothing_less() -> None:
    """README and manifests/README: with the KEDA overlay, `kubectl apply -k manifests/examples -l
    app.kubernetes.io/component!=hpa` installs the runtime, its RuntimeScale and NetworkPolicy but not the HPA
    (KEDA makes one; two on the RuntimeScale stop both). `!=` also selects objects without the label."""
    command = "kubectl apply -k manifests/examples -l app.kubernetes.io/component!=hpa"
    assert all(command in (REPO / doc).read_text().replace("\n", " ") for doc in ("README.md", "manifests/README.md"))
    built = subprocess.run([KUBECTL, "kustomize", str(REPO / "manifests" / "examples")], capture_output=True,
                           text=True, check=True, timeout=60).stdout
    objects = [d for d in yaml.safe_load_all(built) if d]
    component = [o["metadata"].get("labels", {}).get("app.kubernetes.io/component") for o in objects]
    left_out = [o["kind"] for o, label in zip(objects, component, strict=True) if label == "hpa"]
    assert left_out == ["HorizontalPodAutoscaler"]
    assert {"ServingRuntime", "RuntimeScale"} <= {o["kind"] for o in objects}


def figure_rows(text: str, heading: str) -> list[str]:
    """The body rows of the first table under `heading`."""
    section = text.split(f"\n{heading}\n", 1)[1].split("\n#", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("|")]
    return rows[2:]


@pytest.mark.parametrize(("doc", "heading"), [("README.md", "## Performance"),
                                              ("docs/performance.md", "## Other figures")])
def test_every_figure_names_the_benchmark_that_measures_it(doc: str, heading: str) -> None:
    """A figure a user cannot reproduce is a claim: each row names its script, and the script is there."""
    rows = figure_rows((REPO / doc).read_text(), heading)
    assert rows
    previous: list[str] = []
    for row in rows:
        scripts = re.findall(r"\b(bench/\w+\.py|tests/gpu/\w+\.py)", row)
        if not scripts and row.rstrip(" |").endswith("same"):  # "same" as the row above
            scripts = previous
        assert scripts, f"{doc}: no benchmark named for {row[:80]}"
        assert all((REPO / s).exists() for s in scripts), row[:80]
        previous = scripts


def yaml_examples() -> list[tuple[str, str]]:
    return [(str(path.relative_to(REPO)), block) for path in COMMAND_DOCS
            for block in re.findall(r"```ya?ml\n(.*?)```", path.read_text(), flags=re.S)]


@pytest.mark.parametrize(("doc", "block"), yaml_examples(), ids=[f"{d}:{b[:30]}" for d, b in yaml_examples()])
def test_every_yaml_example_parses_and_every_policy_or_targets_example_loads(doc: str, block: str,
                                                                             tmp_path: Path) -> None:
    """A user copies these into a file: each is YAML, and a policy or targets file loads as `serve` reads it."""
    documents = [d for d in yaml.safe_load_all(block) if d is not None]
    assert documents, f"{doc}: an empty YAML example"
    example = tmp_path / "example.yaml"
    example.write_text(block)
    entries = documents[0].get("runtimes") or [] if isinstance(documents[0], dict) else []
    if "defaults" in documents[0] or (entries and not any("pods" in entry for entry in entries)):
        load_policy_book(example)  # both keys are optional: `runtimes:` alone, without pods, is a policy file
    elif "runtimes" in documents[0]:
        assert load_targets(example)
