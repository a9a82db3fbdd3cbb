"""Lint a reward function as it is typed: syntax errors, undefined and unused names (pyflakes), and a missing
entrypoint, each with its line and column. The code is parsed, never run: running it is the sandbox's job."""

from __future__ import annotations

import ast

from pyflakes import checker, messages

from rewards.services import MAX_SOURCE_BYTES

ERRORS = (
    messages.UndefinedName,
    messages.UndefinedLocal,
    messages.UndefinedExport,
    messages.DuplicateArgument,
    messages.ReturnOutsideFunction,
    messages.YieldOutsideFunction,
    messages.ContinueOutsideLoop,
    messages.BreakOutsideLoop,
)


def diagnostic(line: int, col: int, message: str, severity: str = "error") -> dict:
    return {"line": max(1, int(line or 1)), "col": max(0, int(col or 0)), "severity": severity, "message": message}


def lint(code: str, entrypoint: str, *, kind: str = "reward") -> list[dict]:
    """Problems in ``code``, first line 1 and first column 0, in order; [] when there are none. The entrypoint of an
    environment (``kind``) is a top-level class, TRL's environment_factory; of a reward or a tool, a function."""
    size = len(code.encode("utf-8", "surrogatepass"))
    if size > MAX_SOURCE_BYTES:
        return [diagnostic(1, 0, f"the code is {size} bytes; the limit is {MAX_SOURCE_BYTES}")]
    try:
        tree = ast.parse(code, filename="reward.py")
    except SyntaxError as exc:
        return [diagnostic(exc.lineno, (exc.offset or 1) - 1, f"syntax error: {exc.msg}")]
    except (RecursionError, MemoryError, ValueError) as exc:  # nested too deeply, or a NUL byte
        return [diagnostic(1, 0, f"the code cannot be parsed ({type(exc).__name__})")]
    found = []
    try:
        report = checker.Checker(tree, filename="reward.py")
    except RecursionError:
        return [diagnostic(1, 0, "the code is nested too deeply to check")]
    for m in sorted(report.messages, key=lambda m: (m.lineno, m.col)):
        severity = "error" if isinstance(m, ERRORS) else "warning"
        found.append(diagnostic(m.lineno, m.col, m.message % m.message_args, severity))
    wanted, what = (
        ((ast.ClassDef,), "class") if kind == "environment" else ((ast.FunctionDef, ast.AsyncFunctionDef), "function")
    )
    if entrypoint and entrypoint not in {n.name for n in tree.body if isinstance(n, wanted)}:
        found.append(diagnostic(1, 0, f"no top-level {what} named '{entrypoint}' (the entrypoint)"))
    return found
