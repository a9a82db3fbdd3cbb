"""A tool's signature read from its source without running it: the name, the documented parameters and their types,
as transformers' ``get_json_schema`` (which TRL uses to show tools to the model) needs them.

The web process validates a tool with :func:`tool_signature` when it is saved and when a run attaches it; the training
program builds from the same signature a stand-in Python function (:func:`stand_in`) whose name, type hints and
docstring are the user's and whose body forwards the call to the sandbox. The user's code itself runs only there.

No Django here: the training program imports this module.
"""

from __future__ import annotations

import ast
import inspect
import re
from dataclasses import dataclass

# The annotations a tool parameter may have: what get_json_schema turns into JSON schema types. Only these names are
# ever turned into Python objects (the annotation text is matched, never evaluated).
TYPES = {"str": str, "int": int, "float": float, "bool": bool, "list": list, "dict": dict}
# transformers' Google-style docstring reading: an "Args:" block of "name: description" lines
ARGS_BLOCK = re.compile(r"\n\s*Args:\n\s*(.*?)[\n\s]*(Returns:|Raises:|\Z)", re.DOTALL)
ARG_LINE = re.compile(r"^\s*(\w+)\s*(?:\([^)]*\))?:\s*(.+)$")
MAX_TOOL_RESULT_CHARS = 16384  # a tool result longer than this is a failure (ResultTooLarge), not context filler


class ToolError(ValueError):
    """The code is not a tool TRL can offer the model; the message says why (with the line where there is one)."""


@dataclass(frozen=True)
class ToolParam:
    name: str
    type: str  # a key of TYPES
    required: bool
    default: object = None  # a literal, when not required


@dataclass(frozen=True)
class ToolSignature:
    name: str  # the function's name: what the model calls
    description: str  # the docstring's first part
    docstring: str
    params: tuple[ToolParam, ...]


def _annotation(node: ast.expr | None, where: str) -> str:
    if node is None:
        raise ToolError(f"{where} has no type hint; give one of {', '.join(TYPES)}")
    text = ast.unparse(node)
    base = text.split("[", 1)[0]
    if base not in TYPES:
        raise ToolError(f"{where}: the type hint {text!r} is not one of {', '.join(TYPES)}")
    return base


def tool_signature(code: str, entrypoint: str) -> ToolSignature:
    """The tool ``entrypoint`` defined at the top level of ``code``; ToolError naming the problem otherwise."""
    try:
        tree = ast.parse(code)
    except SyntaxError as exc:
        raise ToolError(f"line {exc.lineno}: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise ToolError(f"the code cannot be parsed ({type(exc).__name__})") from None
    node = next((n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
                 and n.name == entrypoint), None)
    if node is None:
        raise ToolError(f"no top-level function named {entrypoint!r}")
    where = f"line {node.lineno}: {entrypoint}"
    args = node.args
    if args.vararg or args.kwarg or args.posonlyargs:
        raise ToolError(f"{where}: a tool takes named parameters only (no *args, **kwargs or positional-only ones): "
                        "the model calls it with a JSON object of arguments")
    doc = ast.get_docstring(node)
    if not doc:
        raise ToolError(f"{where} has no docstring; the model reads what the tool does, and each parameter, from it")
    described = {}
    block = ARGS_BLOCK.search("\n" + doc)
    if block:
        for line in block.group(1).splitlines():
            m = ARG_LINE.match(line)
            if m:
                described[m.group(1)] = m.group(2)
    positional = args.args
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = []
    for arg, default in [*zip(positional, defaults), *zip(args.kwonlyargs, args.kw_defaults)]:
        kind = _annotation(arg.annotation, f"{where}, parameter {arg.arg!r}")
        if arg.arg not in described:
            raise ToolError(f"{where}: parameter {arg.arg!r} is not described in the docstring's Args: section "
                            f"(a line '{arg.arg}: what it is')")
        value = None
        if default is not None:
            try:
                value = ast.literal_eval(default)
            except ValueError:
                raise ToolError(f"{where}: the default of {arg.arg!r} must be a literal") from None
        params.append(ToolParam(arg.arg, kind, default is None, value))
    description = re.split(r"\n\s*(Args|Returns|Raises):", doc, maxsplit=1)[0].strip()
    return ToolSignature(entrypoint, description, doc, tuple(params))


def stand_in(signature: ToolSignature, invoke):
    """A plain function with the tool's name, signature, type hints and docstring (what get_json_schema reads),
    whose body is ``invoke(arguments)``: TRL calls it with the model's arguments and shows the model its result."""
    def tool(**arguments):
        return invoke(arguments)

    tool.__name__ = tool.__qualname__ = signature.name
    tool.__doc__ = signature.docstring
    tool.__annotations__ = {**{p.name: TYPES[p.type] for p in signature.params}, "return": str}
    tool.__signature__ = inspect.Signature([
        inspect.Parameter(p.name, inspect.Parameter.KEYWORD_ONLY, annotation=TYPES[p.type],
                          default=inspect.Parameter.empty if p.required else p.default)
        for p in signature.params], return_annotation=str)
    return tool
