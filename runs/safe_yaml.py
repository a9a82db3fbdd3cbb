"""YAML from users (run configs, recipes) read within limits: a document whose aliases expand it past
``MAX_VALUES`` values (a "billion laughs": 486 bytes that stored 8 MB), or that nests past ``MAX_DEPTH``, is refused
as invalid YAML naming the line, before anything is built from it. Aliases within the limits keep working."""

from __future__ import annotations

import yaml

MAX_VALUES = 100_000  # scalars, sequences and mappings, each alias counted as what it stands for
MAX_DEPTH = 64  # TRL, open-r1, Oumi and verl configs nest a few levels
# A config file's size in bytes (UTF-8): the API, the CLI, the upload and the textarea refuse a larger one whole
# (published configs are a few KB; a cut file would train on what comes before the cut)
MAX_BYTES = 1024 * 1024


def too_large(size: int) -> str:
    """The refusal of a config of ``size`` bytes over MAX_BYTES, naming both."""
    return f"the config is {size:,} bytes, over the limit of {MAX_BYTES:,} bytes; nothing of it was read"


def text_size(text: str) -> int:
    """``text``'s size in bytes as a file holds it (UTF-8; a lone surrogate counts as its 3 bytes)."""
    return len(text.encode("utf-8", "surrogatepass"))


def _check(root: yaml.Node) -> None:
    """The document's size with every alias expanded, and its depth, without expanding it: each node's expanded size
    is computed once (an alias is the same node object as its anchor)."""
    size: dict[int, int] = {}
    depth: dict[int, int] = {}
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, done = stack.pop()
        if id(node) in size:
            continue
        children = _children(node)
        if not done:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in size)
            continue
        size[id(node)] = min(MAX_VALUES + 1, 1 + sum(size[id(c)] for c in children))
        depth[id(node)] = 1 + max((depth[id(c)] for c in children), default=0)
        if size[id(node)] > MAX_VALUES:
            raise yaml.MarkedYAMLError(
                None, None, f"it expands to more than {MAX_VALUES:,} values through its aliases", node.start_mark
            )
        if depth[id(node)] > MAX_DEPTH:
            raise yaml.MarkedYAMLError(None, None, f"it nests deeper than {MAX_DEPTH} levels", node.start_mark)


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def load_yaml(text: str):
    """``yaml.safe_load(text)`` within the limits above; yaml.YAMLError (or RecursionError, for nesting Python's
    own parser cannot follow) otherwise."""
    loader = yaml.SafeLoader(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _check(node)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def nesting_depth(value, limit: int = MAX_DEPTH) -> int:
    """How deep lists and dicts nest in ``value`` (a JSON body), counted without recursion and up to ``limit`` + 1:
    enough to refuse a body before YAML's recursive dumper or parser is given it."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, (list, dict)):
            deepest = max(deepest, depth)
            if depth > limit:
                return depth
            stack.extend((child, depth + 1) for child in (item.values() if isinstance(item, dict) else item))
    return deepest
