"""A verl launch script pasted as verl publishes it (examples/grpo_trainer/run_*.sh):

    set -x
    train_files="['$HOME/data/gsm8k/train.parquet']"
    python3 -m verl.trainer.main_ppo \\
        algorithm.adv_estimator=grpo \\
        data.train_files="$train_files" \\
        ...
        trainer.total_epochs=15 $@

read as the nested mapping its Hydra overrides set, then imported as a verl config is (runs.lifecycle.foreign_yaml).
The script is never run: its lines are read as the shell would read them (continuation lines, quotes, comments,
``$NAME`` and ``${NAME}`` outside single quotes), and each override word is parsed by Hydra's own override parser,
as verl's ``main_ppo`` receives it. What the script may hold besides the command: comments, ``set`` options,
variables set to plain values (``NAME=value``, ``export NAME=value``, read with ``${NAME:-default}`` too), and commands
that set nothing verl reads (``ulimit``, ``echo``, ``mkdir``, ``cd``: noted, not read). ``$HOME`` is read as ``~``; ``$@`` (the
script's own arguments) as none. Anything else (a loop, a condition, a command substitution, a variable never set,
a second command, a sweep, another config name) is refused, naming its line. No database here.
"""

from __future__ import annotations

import re
import shlex

LAUNCH = re.compile(r"(?m)^[^#\n]*-m\s+verl\.trainer\.main_ppo\b")
MODULE = "verl.trainer.main_ppo"
ASSIGNMENT = re.compile(r"^(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)=(.*)$", re.S)
NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BRACED = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(:?-)?")  # ${NAME}, ${NAME:-default}, ${1:-default}
SHELL_WORDS = {"for", "while", "until", "if", "case", "function", "select", "do", "done", "then", "fi", "esac"}
HOME = "/grpo-web-home"  # $HOME while the script is read (see _home)
# commands around the launch that set nothing verl reads: skipped, with a note
HARMLESS = {"ulimit", "echo", "printf", "mkdir", "nvidia-smi", "cd", "pwd", "date", "sleep"}
OPERATORS = {"|", "||", "&", "&&", ";", ";;", ">", ">>", "<", "<<", "(", ")"}


class ScriptError(Exception):
    def __init__(self, line: int, message: str):
        super().__init__(f"line {line}: {message}")


def is_launch_script(text: str) -> bool:
    """Whether ``text`` launches verl's trainer (rather than being a YAML config)."""
    return bool(LAUNCH.search(text))


def _commands(text: str) -> list[tuple[int, str]]:
    """(first line number, text) of each logical line: a line ending in a backslash goes on on the next one, as in the
    shell, but a comment line ends it (the shell reads the backslash at its end as part of the comment)."""
    out, start, parts = [], 0, []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.rstrip()
        if stripped.lstrip().startswith("#"):
            if parts:
                out.append((start, "\n".join(parts)))
                parts = []
            continue
        if not parts:
            start = number
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            parts.append(stripped[:-1])
            continue
        parts.append(line)
        out.append((start, "\n".join(parts)))
        parts = []
    if parts:
        out.append((start, "\n".join(parts)))
    return out


def _expand(text: str, line: int, variables: dict[str, str], notes: list[str]) -> str:
    """``text`` with its variables replaced by their values, outside single quotes, as the shell would."""
    out, i, quote, opened = [], 0, "", line
    while i < len(text):
        ch = text[i]
        here = line + text.count("\n", 0, i)
        if ch == "\\" and quote != "'":
            out.append(text[i : i + 2])
            i += 2
            continue
        if ch == "#" and not quote and (i == 0 or text[i - 1].isspace()):
            end = text.find("\n", i)
            if end < 0:
                break
            i = end  # a comment runs to the end of its line
            continue
        if ch in "'\"" and quote in ("", ch):
            quote, opened = ("", opened) if quote else (ch, here)
        elif ch == "`" and quote != "'":
            raise ScriptError(here, "a command substitution (`...`) is the shell's: write its value instead")
        elif ch == "$" and quote != "'":
            rest = text[i + 1 :]
            if rest.startswith("("):
                raise ScriptError(here, "a command substitution ($(...)) is the shell's: write its value instead")
            if rest[:1] in ("@", "*"):
                notes.append(f"line {here}: ${rest[0]} (the script's own arguments) read as none")
                i += 2
                continue
            braced = rest.startswith("{")
            match = (BRACED if braced else NAME).match(rest)
            shown = rest.split()[0] if rest.split() else ""
            if not match:
                raise ScriptError(here, f"${shown} is not a variable this import can read: write its value instead")
            name, length, default = match.group(1) if braced else match.group(0), match.end(), None
            if braced:
                end = _closing(rest, match.end())
                if end is None or (match.group(2) is None and end != match.end()):
                    raise ScriptError(here, f"${shown} is not a variable this import can read: write its value instead")
                if match.group(2) is not None:  # ${NAME:-default}: the default when NAME is not set
                    inner = _expand(rest[match.end() : end], here, variables, notes)
                    default = " ".join(shlex.split(inner)) if inner.strip() else ""
                length = end + 1
            if name in variables:
                value = variables[name]
            elif default is not None:
                value = default
                notes.append(f"line {here}: ${{{name}}} is not set in the script: its default {default!r} is read")
            elif name == "HOME":
                value = HOME  # an absolute path to Hydra's grammar (which refuses ~), ~ again in the mapping
                if not any("$HOME" in note for note in notes):
                    notes.append("$HOME: read as ~ (the home folder of whoever runs it)")
            else:
                raise ScriptError(
                    here, f"${name} is not set in the script: set it above the command or write its value"
                )
            out.append(value.replace("\\", "\\\\").replace('"', '\\"') if quote == '"' else shlex.quote(value))
            i += 1 + length
            continue
        out.append(ch)
        i += 1
    if quote:
        raise ScriptError(opened, f"a {quote} quote is never closed")
    return "".join(out)


def _closing(text: str, start: int) -> int | None:
    """The index of the brace that closes the ``${`` before ``start``, nested ``${...}`` and quotes skipped."""
    depth, quote, i = 1, "", start
    while i < len(text):
        ch = text[i]
        if ch == "\\" and quote != "'":
            i += 2
            continue
        if ch in "'\"" and quote in ("", ch):
            quote = "" if quote else ch
        elif not quote and text.startswith("${", i):
            depth += 1
            i += 1
        elif not quote and ch == "}":
            depth -= 1
            if depth == 0:
                return i
        i += 1
    return None


def _words(text: str, line: int) -> list[tuple[int, str]]:
    """(line number, word) of a logical line, quotes removed; a shell operator is a word of its own. Each physical
    line is read alone (to name each word's line) unless a quote spans lines."""

    def split(piece: str) -> list[str]:
        lexer = shlex.shlex(piece, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        lexer.commenters = ""  # comments are gone (_expand)
        return list(lexer)

    try:
        return [(line + k, word) for k, piece in enumerate(text.split("\n")) for word in split(piece)]
    except ValueError:
        pass
    try:
        return [(line, word) for word in split(text)]
    except ValueError as exc:
        raise ScriptError(line, f"the shell could not read this line ({exc})") from None


def script_overrides(text: str) -> tuple[list[tuple[int, str]], list[str]]:
    """The override words of the script's verl command, each with its line, and notes on what was read around them.
    Raises ScriptError naming the line of what is not a variable, a ``set``, a comment or the command."""
    variables: dict[str, str] = {}
    notes: list[str] = []
    command: list[tuple[int, str]] | None = None
    for line, logical in _commands(text):
        statement = re.match(r"\s*([A-Za-z]+)(?![\w=.-])", logical)
        if statement and statement.group(1) in SHELL_WORDS:
            raise ScriptError(line, f"{statement.group(1)!r}: a shell statement, which this import does not run; "
                              "paste the command with its values written out")  # fmt: skip
        expanded = _expand(logical, line, variables, notes)
        words = _words(expanded, line)
        if not words:
            continue
        first = words[0][1]  # a shell statement was refused above, as the shell knows one: before expansion
        if first == "set":
            continue
        if first in HARMLESS and not any(w == MODULE for _, w in words):
            notes.append(f"line {line}: {first} ...: a shell command of its own, which sets no config key: not read")
            continue
        if len(words) == 1 or (first == "export" and len(words) == 2):
            match = ASSIGNMENT.match(" ".join(w for _, w in words))
            if match and "=" in words[-1][1]:
                variables[match.group(1)] = match.group(2)
                if first == "export":
                    notes.append(f"line {line}: {match.group(1)} is an environment variable of verl's process, not a "
                                 "config key: not read")  # fmt: skip
                continue
        index = next((k for k, (_, w) in enumerate(words[:-1]) if w == "-m" and words[k + 1][1] == MODULE), None)
        if index is None:
            if first.endswith("=") and len(words) > 1 and words[1][1] == "(":
                raise ScriptError(words[0][0], f"{first[:-1]}=( ... ): a shell array, which this import does not "
                                  "read; write its overrides in the command instead")  # fmt: skip
            if "=" in first and "." in first.split("=", 1)[0]:
                raise ScriptError(words[0][0], f"{first!r} looks like an override, but the command above has ended "
                                  "(a comment or a line without a closing backslash ends it, as in the shell)")  # fmt: skip
            raise ScriptError(words[0][0], f"{first!r}: not verl's trainer ({MODULE}); this import reads the verl "
                              "command, its variables and set options only")  # fmt: skip
        if command is not None:
            raise ScriptError(words[0][0], "a second verl command: paste one run's script")
        launcher = [w for _, w in words[:index]]
        if not launcher or not re.fullmatch(r"python[0-9.]*", launcher[-1].rsplit("/", 1)[-1]):
            notes.append(f"line {line}: launched by {' '.join(launcher)!r}: the launcher is not a config key")
        command = []
        for number, word in words[index + 2 :]:
            if word in OPERATORS or re.fullmatch(r"[0-9]*[<>]&?[0-9-]*", word):
                notes.append(f"line {number}: what follows {word!r} is the shell's (a pipe or a redirection): not read")
                break
            command.append((number, word))
    if command is None:
        raise ScriptError(1, f"no {MODULE} command")
    return command, notes


def launch_script_mapping(text: str) -> tuple[dict, list[str], list[str]]:
    """(the nested mapping the script's overrides set, notes, errors): what a verl YAML of the same values holds."""
    try:
        words, notes = script_overrides(text)
    except ScriptError as exc:
        return {}, [], [str(exc)]
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.core.override_parser.types import OverrideType
    from hydra.errors import HydraException

    parser = OverridesParser.create()
    data: dict = {}
    errors: list[str] = []
    for line, word in words:
        if word.startswith("--"):
            errors.append(f"line {line}: {word}: Hydra's own option; this import reads verl's ppo_trainer config "
                          "and its overrides only")  # fmt: skip
            continue
        try:
            (override,) = parser.parse_overrides([word])
        except HydraException as exc:
            errors.append(f"line {line}: {word}: not a Hydra override ({str(exc).splitlines()[0]})")
            continue
        key = override.key_or_group
        if override.is_sweep_override():
            errors.append(f"line {line}: {key}: a sweep (several values) runs several jobs; give one value")
            continue
        if override.type == OverrideType.DEL or override.package is not None or "/" in key:
            errors.append(f"line {line}: {word}: deletes a key or picks a config group; only key=value is read")
            continue
        if override.type != OverrideType.CHANGE:
            notes.append(f"line {line}: {word}: read as {key}={word.split('=', 1)[1]} (the + adds a key verl's "
                         "config lacks)")  # fmt: skip
        node, parts = data, key.split(".")
        for depth, part in enumerate(parts[:-1]):
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                errors.append(f"line {line}: {key}: {'.'.join(parts[: depth + 1])} was set to a value above")
                break
        else:
            if isinstance(node.get(parts[-1]), dict):
                errors.append(f"line {line}: {key}: set above as a section of keys")
            else:
                if parts[-1] in node:
                    notes.append(f"line {line}: {key} is set twice; the last value is read, as Hydra does")
                node[parts[-1]] = override.value()
    data = _home(data)
    if not data and not errors:
        errors.append(f"the {MODULE} command sets no key=value override")
    return data, notes, errors


def _home(value):
    """``value`` with $HOME's stand-in written as ``~`` again."""
    if isinstance(value, dict):
        return {k: _home(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_home(v) for v in value]
    if isinstance(value, str) and HOME in value:
        return value.replace(HOME, "~")
    return value
