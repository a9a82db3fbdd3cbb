"""How a stored dataset becomes the training program's input: which column is the prompt (TRL's standard text or
conversational messages), an optional system prompt and {column} template, which columns reach the reward
functions, and the train/eval split. No Django models here: functions take a Parquet path and a Mapping.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path

import jinja2
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from jinja2.ext import loopcontrols
from jinja2.sandbox import ImmutableSandboxedEnvironment

from runs.datasets.importing import MAX_ERRORS, DatasetError, column_kind, prompt_ok, prompt_problem
from runs.text import as_text

# Names TRL itself passes to reward functions (GRPOTrainer._calculate_rewards): a column may not take them.
RESERVED = (
    "prompt",
    "prompts",
    "completion",
    "completions",
    "completion_ids",
    "trainer_state",
    "log_extra",
    "log_metric",
    "environments",
)
TEMPLATE_KINDS = ("text", "integer", "number", "boolean")
TRAIN_VALUE = "train"  # with a split column, rows holding this value train; every other value is evaluation
_TEMPLATE_TOKEN = re.compile(r"\{\{|\}\}|\{([^{}]*)\}|[{}]")


@dataclass(frozen=True)
class Mapping:
    prompt_column: str = "prompt"
    prompt_format: str = "standard"  # TRL's "standard" (prompt is text) or "conversational" (a list of messages)
    system_prompt: str = ""
    prompt_template: str = ""  # "Solve: {question}"; blank: the prompt column as it is
    reward_columns: tuple[str, ...] = field(default_factory=tuple)
    split: str = "none"  # none | fraction | column
    eval_fraction: float = 0.0
    split_seed: int = 0
    split_column: str = ""

    @classmethod
    def of(cls, version) -> "Mapping":
        """The mapping a dataset version (runs.models.DatasetVersion) stores in its fields."""
        return cls(
            prompt_column=version.prompt_column,
            prompt_format=version.prompt_format,
            system_prompt=version.system_prompt,
            prompt_template=version.prompt_template,
            reward_columns=tuple(version.reward_columns),
            split=version.split,
            eval_fraction=version.eval_fraction,
            split_seed=version.split_seed,
            split_column=version.split_column,
        )

    def as_fields(self) -> dict:
        data = asdict(self)
        data["reward_columns"] = list(self.reward_columns)
        return data

    def needed_columns(self) -> list[str]:
        columns = template_fields(self.prompt_template) if self.prompt_template else [self.prompt_column]
        columns += [c for c in self.reward_columns if c not in columns]
        return columns


def default_mapping(prompt_column: str, columns: list[str], column_types: dict[str, str]) -> Mapping:
    return Mapping(
        prompt_column=prompt_column,
        prompt_format="conversational" if column_types.get(prompt_column) == "messages" else "standard",
        reward_columns=tuple(c for c in columns if c != prompt_column and c not in RESERVED),
    )


# --- the {column} template ----------------------------------------------------------------------------------------


def template_fields(template: str) -> list[str]:
    """The column names a template reads, in order; ValueError for a stray brace. {{ and }} are literal braces."""
    names: list[str] = []
    for match in _TEMPLATE_TOKEN.finditer(template):
        token = match.group(0)
        if token in ("{{", "}}"):
            continue
        if match.group(1) is None:
            raise ValueError(
                f"unmatched '{token}' at character {match.start() + 1}; write {token}{token} for a literal brace"
            )
        if not match.group(1):
            raise ValueError(f"empty field '{{}}' at character {match.start() + 1}; name a column")
        if match.group(1) not in names:
            names.append(match.group(1))
    return names


def render_template(template: str, row: dict) -> str:
    """Plain substitution (never str.format, which would let a template reach into attributes)."""

    def sub(match):
        token = match.group(0)
        if token == "{{":
            return "{"
        if token == "}}":
            return "}"
        value = row[match.group(1)]
        return value if isinstance(value, str) else json.dumps(value)

    return _TEMPLATE_TOKEN.sub(sub, template)


# --- prompts ------------------------------------------------------------------------------------------------------


def build_prompt(mapping: Mapping, row: dict):
    """The prompt as the trainer receives it: text (standard) or a list of {role, content} (conversational)."""
    body = render_template(mapping.prompt_template, row) if mapping.prompt_template else row[mapping.prompt_column]
    system = mapping.system_prompt.strip()
    if isinstance(body, list):
        messages = [{k: v for k, v in m.items() if v is not None} for m in body]
        if system and messages[0].get("role") != "system":
            messages.insert(0, {"role": "system", "content": system})
        return messages
    if mapping.prompt_format == "conversational":
        return ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": body}]
    return f"{system}\n\n{body}" if system else body


def training_row(mapping: Mapping, row: dict, extra_columns: tuple[str, ...] = ()) -> dict:
    out = {"prompt": build_prompt(mapping, row)}
    for column in (*mapping.reward_columns, *extra_columns):
        out[column] = row[column]
    return out


# --- checks -------------------------------------------------------------------------------------------------------


@dataclass
class MappingCheck:
    errors: list[str]
    train_rows: int = 0
    eval_rows: int = 0


def check_mapping(path: str | Path, mapping: Mapping, columns: list[str], column_types: dict[str, str]) -> MappingCheck:
    """Problems that would stop training, each naming the column (and the row where one row is at fault)."""
    errors: list[str] = []
    if mapping.prompt_format not in ("standard", "conversational"):
        errors.append(f"prompt format must be standard or conversational, not {mapping.prompt_format!r}")
    if mapping.prompt_template:
        try:
            fields = template_fields(mapping.prompt_template)
        except ValueError as exc:
            return MappingCheck([f"template: {exc}"])
        if not fields:
            errors.append("template: name at least one {column}, or leave the template blank")
        for name in fields:
            if name not in columns:
                errors.append(f"template: column '{name}' does not exist (columns: {', '.join(columns)})")
            elif column_types.get(name) not in TEMPLATE_KINDS:
                errors.append(f"template: column '{name}' holds {column_types.get(name)}; a template needs text")
            else:
                errors += _null_rows(path, name, "is empty; the template needs it")
    elif mapping.prompt_column not in columns:
        errors.append(f"prompt column '{mapping.prompt_column}' does not exist (columns: {', '.join(columns)})")
    else:
        kind = column_types.get(mapping.prompt_column)
        if kind == "messages" and mapping.prompt_format == "standard":
            errors.append(f"column '{mapping.prompt_column}' holds messages; choose the conversational format")
        errors += _prompt_rows(path, mapping.prompt_column)
    for column in mapping.reward_columns:
        if column not in columns:
            errors.append(f"reward column '{column}' does not exist")
        elif column in RESERVED:
            errors.append(
                f"reward column '{column}': TRL passes its own '{column}' to reward functions; rename the column"
            )
    if errors:
        return MappingCheck(errors[:MAX_ERRORS])
    try:
        mask = eval_mask(path, mapping)
    except DatasetError as exc:
        return MappingCheck(exc.errors)
    eval_rows = int(mask.sum())
    train_rows = len(mask) - eval_rows
    if not train_rows:
        return MappingCheck([f"the split leaves no rows to train on ({eval_rows} rows for evaluation)"])
    return MappingCheck([], train_rows=train_rows, eval_rows=eval_rows)


def _null_rows(path, column: str, problem: str) -> list[str]:
    values = pq.read_table(path, columns=[column]).column(column)
    if not values.null_count:
        return []
    rows = pc.indices_nonzero(pc.is_null(values)).to_pylist()[:MAX_ERRORS]
    return [f"row {i + 1}: column '{column}' {problem}" for i in rows]


def _prompt_rows(path, column: str) -> list[str]:
    """The prompt column checked vectorised; rows named only where a batch fails (the column may be a new choice)."""
    errors, offset = [], 0
    for batch in pq.ParquetFile(path).iter_batches(columns=[column], batch_size=65536):
        values = batch.column(0)
        if not prompt_ok(values):
            for i, value in enumerate(values.to_pylist()):
                problem = prompt_problem(value, column)
                if problem:
                    errors.append(f"row {offset + i + 1}: {problem}")
                if len(errors) >= MAX_ERRORS:
                    return errors
        offset += batch.num_rows
    return errors


def eval_mask(path, mapping: Mapping) -> np.ndarray:
    """True for rows held out for evaluation; the same mapping always gives the same rows."""
    rows = pq.ParquetFile(path).metadata.num_rows
    if mapping.split == "none":
        return np.zeros(rows, dtype=bool)
    if mapping.split == "fraction":
        if not 0 < mapping.eval_fraction < 1:
            raise DatasetError(["eval fraction must be between 0 and 1"])
        return np.random.default_rng(mapping.split_seed).random(rows) < mapping.eval_fraction
    if mapping.split == "column":
        try:
            values = pq.read_table(path, columns=[mapping.split_column]).column(0)
        except (KeyError, pa.ArrowInvalid):
            raise DatasetError([f"split column '{mapping.split_column}' does not exist"]) from None
        if column_kind(values.type) not in TEMPLATE_KINDS:
            raise DatasetError([f"split column '{mapping.split_column}' must hold text"])
        train = pc.fill_null(pc.equal(pc.cast(values, pa.string()), TRAIN_VALUE), False)
        if not pc.any(train).as_py():
            raise DatasetError([f"split column '{mapping.split_column}' has no row with the value '{TRAIN_VALUE}'"])
        return ~train.to_numpy(zero_copy_only=False)
    raise DatasetError([f"split must be none, fraction or column, not {mapping.split!r}"])


# --- output -------------------------------------------------------------------------------------------------------


def preview_rows(path, mapping: Mapping, n: int = 5) -> list[dict]:
    """The first rows as the trainer will receive them: {"row", "prompt", "rewards"}."""
    needed = mapping.needed_columns()
    table = pq.ParquetFile(path).iter_batches(batch_size=n, columns=needed)
    batch = next(table, None)
    out = []
    for i, row in enumerate(batch.to_pylist() if batch is not None else []):
        out.append(
            {"row": i + 1, "prompt": build_prompt(mapping, row), "rewards": {c: row[c] for c in mapping.reward_columns}}
        )
    return out


def prompts_by_text(path, mapping: Mapping, texts: set[str]) -> dict[str, object]:
    """The prompts as the trainer received them (text, or a list of messages), keyed by their stored text
    (``runs.text.as_text``: how a rollout keeps its prompt), for those of ``texts`` the version holds; it reads the
    rows until it has found them all."""
    wanted, found = set(texts), {}
    for batch in pq.ParquetFile(path).iter_batches(columns=mapping.needed_columns(), batch_size=16384):
        for row in batch.to_pylist():
            prompt = build_prompt(mapping, row)
            text = as_text(prompt)
            if text in wanted:
                found[text] = prompt
                wanted.discard(text)
        if not wanted:
            break
    return found


def write_training_jsonl(
    path, mapping: Mapping, out: Path, split: str = "train", extra_columns: tuple[str, ...] = ()
) -> Path:
    """A split as JSON lines, one ``{"prompt": ..., <reward columns>...}`` a row: what workers.training.train reads.

    ``split``: "train" (the rows not held out), "eval" (the held-out rows, for workers.training.evaluate) or "all".
    ``extra_columns``: further columns written as they are (an SFT run's ``completion`` or ``messages``)."""
    extra_columns = tuple(c for c in extra_columns if c not in mapping.needed_columns())
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    held_out = eval_mask(path, mapping)
    if split == "eval":
        held_out = ~held_out
    elif split == "all":
        held_out[:] = False
    part = out.with_suffix(".part")
    offset = 0
    with open(part, "w", encoding="utf-8") as fh:
        columns = mapping.needed_columns() + list(extra_columns)
        for batch in pq.ParquetFile(path).iter_batches(columns=columns, batch_size=16384):
            for i, row in enumerate(batch.to_pylist()):
                if not held_out[offset + i]:
                    fh.write(
                        json.dumps(training_row(mapping, row, extra_columns), ensure_ascii=False, default=str) + "\n"
                    )
            offset += batch.num_rows
    os.replace(part, out)
    return out


# --- chat templates, rendered as transformers renders them, without transformers ----------------------------------


@dataclass
class ChatTemplate:
    source: str
    template: str
    special_tokens: dict[str, str]


def find_chat_template(model_dir: Path) -> ChatTemplate | None:
    """The model folder's chat template (chat_template.jinja, or tokenizer_config.json's 'chat_template')."""
    config_path = model_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text()) if config_path.is_file() else {}
    specials = {}
    for key in ("bos_token", "eos_token", "pad_token", "unk_token"):
        value = config.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            specials[key] = value
    jinja_file = model_dir / "chat_template.jinja"
    if jinja_file.is_file():
        return ChatTemplate(str(jinja_file), jinja_file.read_text(), specials)
    template = config.get("chat_template")
    if isinstance(template, list):  # named templates: [{"name": "default", "template": ...}, ...]
        template = next((t.get("template") for t in template if t.get("name") == "default"), None)
    if isinstance(template, str):
        return ChatTemplate(str(config_path), template, specials)
    return None


def render_chat(template: ChatTemplate, messages: list[dict]) -> str:
    """Apply the template with add_generation_prompt=True, as TRL does for conversational prompts.

    A sandboxed, immutable Jinja environment with the globals transformers gives templates."""

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = lambda fmt: datetime.now().strftime(fmt)
    try:
        return env.from_string(template.template).render(
            messages=messages, add_generation_prompt=True, tools=None, documents=None, **template.special_tokens
        )
    except jinja2.exceptions.TemplateError as exc:
        raise DatasetError([f"the chat template ({template.source}) fails: {exc}"]) from None
