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


def _parse(code: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as exc:
        raise ToolError(f"line {exc.lineno}: {exc.msg}") from None
    except (RecursionError, MemoryError, ValueError) as exc:
        raise ToolError(f"the code cannot be parsed ({type(exc).__name__})") from None


def tool_signature(code: str, entrypoint: str) -> ToolSignature:
    """The tool ``entrypoint`` defined at the top level of ``code``; ToolError naming the problem otherwise."""
    tree = _parse(code)
    node = next(
        (n for n in tree.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == entrypoint), None
    )
    if node is None:
        raise ToolError(f"no top-level function named {entrypoint!r}")
    return _function_signature(node, f"line {node.lineno}: {entrypoint}")


def _function_signature(
    node: ast.FunctionDef | ast.AsyncFunctionDef, where: str, method: bool = False
) -> ToolSignature:
    """A tool function's (or, ``method``, an environment method's, its ``self`` left out) signature."""
    args = node.args
    positional = list(args.args)
    if method:
        if not positional:
            raise ToolError(f"{where} takes no self: an environment's tools are methods of its instances")
        positional = positional[1:]
    if args.vararg or args.kwarg or args.posonlyargs:
        raise ToolError(
            f"{where}: a tool takes named parameters only (no *args, **kwargs or positional-only ones): "
            "the model calls it with a JSON object of arguments"
        )
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
    defaults = [None] * (len(positional) - len(args.defaults)) + list(args.defaults)
    params = []
    for arg, default in [*zip(positional, defaults), *zip(args.kwonlyargs, args.kw_defaults)]:
        kind = _annotation(arg.annotation, f"{where}, parameter {arg.arg!r}")
        if arg.arg not in described:
            raise ToolError(
                f"{where}: parameter {arg.arg!r} is not described in the docstring's Args: section "
                f"(a line '{arg.arg}: what it is')"
            )
        value = None
        if default is not None:
            try:
                value = ast.literal_eval(default)
            except ValueError:
                raise ToolError(f"{where}: the default of {arg.arg!r} must be a literal") from None
        params.append(ToolParam(arg.arg, kind, default is None, value))
    description = re.split(r"\n\s*(Args|Returns|Raises):", doc, maxsplit=1)[0].strip()
    return ToolSignature(node.name, description, doc, tuple(params))


@dataclass(frozen=True)
class EnvironmentSignature:
    """An environment class (TRL's ``environment_factory``): its public methods are the model's tools; ``reset``
    starts each rollout; ``get_reward`` (optional) scores it, as a reward column named after the class."""

    name: str  # the class's name: TRL's reward column for get_reward
    methods: tuple[ToolSignature, ...]
    has_reward: bool


def environment_signature(code: str, class_name: str) -> EnvironmentSignature:
    """The environment class ``class_name`` defined at the top level of ``code``, read without running it;
    ToolError naming the problem otherwise."""
    tree = _parse(code)
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == class_name), None)
    if node is None:
        raise ToolError(f"no top-level class named {class_name!r}")
    where = f"line {node.lineno}: class {class_name}"
    if [ast.unparse(b) for b in node.bases] not in ([], ["object"]) or node.keywords:
        raise ToolError(f"{where}: an environment class has no base classes (its tools must all be read from it)")
    if node.decorator_list:
        raise ToolError(f"{where}: an environment class has no decorators")
    methods, seen, has_reset, has_reward = [], set(), False, False
    for item in node.body:
        if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        at = f"line {item.lineno}: {class_name}.{item.name}"
        if item.name in seen:
            raise ToolError(f"{at} is defined twice")
        seen.add(item.name)
        if item.name.startswith("_") and item.name != "__init__":
            continue
        if item.decorator_list:
            raise ToolError(
                f"{at}: an environment's methods have no decorators (staticmethod, property, ...): "
                "TRL calls them on each rollout's instance"
            )
        if isinstance(item, ast.AsyncFunctionDef):
            raise ToolError(f"{at}: an environment's methods are plain functions here, not async")
        args = item.args
        named = args.posonlyargs + args.args
        if not named:
            raise ToolError(f"{at} takes no self")
        if item.name == "__init__":
            if args.vararg is None and len(named) - 1 > len(args.defaults) or any(d is None for d in args.kw_defaults):
                raise ToolError(f"{at}: TRL creates each instance with no arguments; give every parameter a default")
        elif item.name == "reset":
            if args.kwarg is None:
                raise ToolError(
                    f"{at}: reset takes **kwargs (TRL calls it with each dataset row's columns: "
                    "def reset(self, **kwargs))"
                )
            has_reset = True
        elif item.name == "get_reward":
            if len(named) > 1 or args.vararg or args.kwarg or args.kwonlyargs:
                raise ToolError(
                    f"{at}: get_reward takes no arguments besides self (it scores the rollout from the "
                    "instance's state)"
                )
            has_reward = True
        else:
            methods.append(_function_signature(item, at, method=True))
    if not has_reset:
        raise ToolError(
            f"{where} has no reset method; TRL calls reset(**row) before each rollout "
            "(def reset(self, **kwargs): it returns None, or text appended to the last user message)"
        )
    if not methods:
        raise ToolError(f"{where} has no public methods: they are the tools the model calls")
    return EnvironmentSignature(class_name, tuple(methods), has_reward)


def stand_in(signature: ToolSignature, invoke):
    """A plain function with the tool's name, signature, type hints and docstring (what get_json_schema reads),
    whose body is ``invoke(arguments)``: TRL calls it with the model's arguments and shows the model its result."""

    def tool(**arguments):
        return invoke(arguments)

    tool.__name__ = tool.__qualname__ = signature.name
    tool.__doc__ = signature.docstring
    tool.__annotations__ = {**{p.name: TYPES[p.type] for p in signature.params}, "return": str}
    tool.__signature__ = inspect.Signature(
        [
            inspect.Parameter(
                p.name,
                inspect.Parameter.KEYWORD_ONLY,
                annotation=TYPES[p.type],
                default=inspect.Parameter.empty if p.required else p.default,
            )
            for p in signature.params
        ],
        return_annotation=str,
    )
    return tool


def stand_in_class(signature: EnvironmentSignature, backend):
    """A class with the environment's name whose public methods have the user's names, signatures and docstrings
    (what TRL lists as tools and get_json_schema reads) and forward to ``backend``, which holds the real instances
    (in the sandbox): ``backend.new()`` gives an instance id, ``backend.reset(id, row)``,
    ``backend.call(id, method, arguments)`` and ``backend.reward(id)`` act on it."""

    def init(self):
        self._instance = backend.new()

    def reset(self, **kwargs):
        return backend.reset(self._instance, kwargs)

    namespace = {
        "__init__": init,
        "reset": reset,
        "__module__": __name__,
        "__doc__": f"{signature.name}: the user's environment, run in the sandbox",
    }
    for method in signature.methods:
        namespace[method.name] = _forwarding_method(method, backend)
    if signature.has_reward:

        def get_reward(self):
            return backend.reward(self._instance)

        namespace["get_reward"] = get_reward
    return type(signature.name, (), namespace)


def _forwarding_method(method: ToolSignature, backend):
    def forward(self, **arguments):
        return backend.call(self._instance, method.name, arguments)

    forward.__name__ = forward.__qualname__ = method.name
    forward.__doc__ = method.docstring
    forward.__annotations__ = {**{p.name: TYPES[p.type] for p in method.params}, "return": str}
    forward.__signature__ = inspect.Signature(
        [
            inspect.Parameter("self", inspect.Parameter.POSITIONAL_OR_KEYWORD),
            *(
                inspect.Parameter(
                    p.name,
                    inspect.Parameter.KEYWORD_ONLY,
                    annotation=TYPES[p.type],
                    default=inspect.Parameter.empty if p.required else p.default,
                )
                for p in method.params
            ),
        ],
        return_annotation=str,
    )
    return forward
