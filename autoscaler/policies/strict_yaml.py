"""YAML as the user's files are read (the policy file, the targets file, an HPA manifest): a key given twice in
one mapping is a mistake, not the last one silently winning.

PyYAML keeps the last of two equal keys without a word: a policy file that sets `skew_order: 3` and, further
down the same `defaults:`, `skew_order: 4` ran on 4, whichever the user meant. Kubernetes refuses such a
manifest (strict field validation: "duplicate field"), and so do we, with the error PyYAML's own constructor
gives, so that `yaml_errors.yaml_error_text` makes it the same one line: `FILE:LINE:COLUMN: not valid YAML:
found duplicate key 'skew_order' (first at line 3)`. A merge key (`<<: *defaults`) still lets a mapping replace
what it merges: only the keys written in the mapping itself are compared.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterator
from typing import Any

import yaml
from yaml.constructor import ConstructorError
from yaml.nodes import MappingNode

_MERGE_TAG = "tag:yaml.org,2002:merge"


class UniqueKeyLoader(yaml.SafeLoader):
    """`yaml.SafeLoader` that refuses a mapping holding a key twice."""

    def construct_mapping(self, node: MappingNode, deep: bool = False) -> dict[Hashable, Any]:
        first_line: dict[Hashable, int] = {}
        for key_node, _ in node.value:
            if key_node.tag == _MERGE_TAG:
                continue
            key = self.construct_object(key_node, deep=True)
            if not isinstance(key, Hashable):
                continue  # PyYAML's own constructor refuses it, saying so
            if key in first_line:
                raise ConstructorError("while constructing a mapping", node.start_mark,
                                       f"found duplicate key {key!r} (first at line {first_line[key]})",
                                       key_node.start_mark)
            first_line[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep=deep)


def safe_load(text: str) -> Any:
    """`yaml.safe_load`, refusing a key given twice."""
    return yaml.load(text, Loader=UniqueKeyLoader)  # a SafeLoader: no arbitrary objects


def safe_load_all(text: str) -> Iterator[Any]:
    """`yaml.safe_load_all`, refusing a key given twice."""
    return yaml.load_all(text, Loader=UniqueKeyLoader)  # a SafeLoader: no arbitrary objects

