"""Reads of the datasets capability: a version's row browser (paged, searchable), the prompt preview as the model
will see it (its chat template applied), the versions of a dataset newest first."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from django.db.models import Count

from runs.datasets.importing import DatasetError, column_kind
from runs.datasets.mapping import ChatTemplate, Mapping, find_chat_template, preview_rows, render_chat
from runs.models import DatasetVersion
from runs.paths import DEMO_MODELS, is_hub_id, model_access_problems, resolve_model

ROWS_PER_PAGE = 50


CELL_CHARS = 4000  # a longer cell is cut in the row browser (the stored row is whole)


SEARCH_BATCH_ROWS = 131072


@dataclass
class RowsPage:
    rows: list[tuple[int, list[str]]]  # (row number from 1, cells as text)
    total: int  # rows in the version, or rows matching the search
    number: int
    pages: int


def dataset_rows(version: DatasetVersion, *, q: str = "", page: int = 1, per_page: int = ROWS_PER_PAGE) -> RowsPage:
    """One page of a version's rows, optionally only those whose text contains ``q`` (case-insensitive).

    Reads only the row groups that hold the page; a search scans the text columns once per query and keeps the
    matching row numbers (the file never changes), so turning pages of a search is as quick as without one."""
    if q:
        matches = _search(version.path, q)
        total = len(matches)
    else:
        matches, total = None, version.row_count
    pages = max(1, -(-total // per_page))
    number = min(max(page, 1), pages)
    start = (number - 1) * per_page
    wanted = (
        matches[start : start + per_page] if matches is not None else np.arange(start, min(start + per_page, total))
    )
    rows = _take_rows(version.path, wanted, version.columns)
    return RowsPage(rows=rows, total=total, number=number, pages=pages)


def _text_columns(schema: pa.Schema) -> list[str]:
    return [f.name for f in schema if column_kind(f.type) in ("text", "messages")]


@lru_cache(maxsize=16)
def _search(path: str, q: str) -> np.ndarray:
    pf = pq.ParquetFile(path)
    columns = _text_columns(pf.schema_arrow)
    found, offset = [], 0
    for batch in pf.iter_batches(batch_size=SEARCH_BATCH_ROWS, columns=columns):
        hit = None
        for values in batch.columns:
            if pa.types.is_list(values.type) or pa.types.is_large_list(values.type):  # messages: their contents
                content = pc.struct_field(pc.list_flatten(values), "content")
                inner = pc.fill_null(pc.match_substring(content, q, ignore_case=True), False)
                parents = pc.list_parent_indices(values).to_numpy()[inner.to_numpy(zero_copy_only=False)]
                mask = np.zeros(batch.num_rows, dtype=bool)
                mask[parents] = True
            else:
                mask = pc.fill_null(pc.match_substring(values, q, ignore_case=True), False).to_numpy(
                    zero_copy_only=False
                )
            hit = mask if hit is None else hit | mask
        if hit is not None:
            found.append((np.flatnonzero(hit) + offset).astype(np.int32))  # 4 bytes a match in the cache
        offset += batch.num_rows
    return np.concatenate(found) if found else np.zeros(0, dtype=np.int32)


def _take_rows(path: str, wanted: np.ndarray, columns: list[str]) -> list[tuple[int, list[str]]]:
    """The rows at ``wanted`` (sorted row indices), reading only the row groups that hold them."""
    if not len(wanted):
        return []
    pf = pq.ParquetFile(path)
    meta = pf.metadata
    starts = np.cumsum([0] + [meta.row_group(i).num_rows for i in range(meta.num_row_groups)])
    groups = np.searchsorted(starts, wanted, side="right") - 1
    out = []
    for group in np.unique(groups):
        table = pf.read_row_group(int(group))
        local = wanted[groups == group] - starts[group]
        for index, row in zip(wanted[groups == group], table.take(pa.array(local)).to_pylist()):
            out.append((int(index) + 1, [_cell(row.get(c)) for c in columns]))
    return out


def _cell(value) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS] + f"… ({len(text) - CELL_CHARS} more characters)"


@dataclass
class Preview:
    rows: list[dict]  # {"row", "prompt", "messages" (or None), "rendered" (chat template applied, or None), "rewards"}
    notes: list[str]


def dataset_preview(version: DatasetVersion, mapping: Mapping, *, model: str = "", user=None, n: int = 5) -> Preview:
    """The first rows as the model will see them; with a model ``user`` may read (runs.paths.model_access_problems),
    conversational prompts through its chat template.

    Raises DatasetError when the mapping cannot be applied (a missing column...)."""
    notes = []
    try:
        missing = [c for c in mapping.needed_columns() if c not in version.columns]
    except ValueError as exc:  # a stray brace in the template
        raise DatasetError([f"template: {exc}"]) from None
    if missing:
        raise DatasetError([f"column '{c}' does not exist (columns: {', '.join(version.columns)})" for c in missing])
    try:
        rows = preview_rows(version.path, mapping, n=n)
    except (KeyError, TypeError, pa.ArrowInvalid) as exc:  # e.g. an empty cell where the template needs text
        raise DatasetError([f"the mapping cannot be applied to the first rows ({type(exc).__name__}: {exc})"]) from None
    template = _chat_template(model) if model and not model_access_problems(model, user=user) else None
    if model and template is None:
        notes.append(
            f"no chat template found for '{model}' (a local model folder, 'tiny', or a hub id already in "
            f"this machine's Hugging Face cache)"
        )
    conversational = bool(rows) and isinstance(rows[0]["prompt"], list)
    if template and not conversational:
        notes.append("standard prompts reach the model as written; the chat template applies to conversational ones")
    for row in rows:
        row["messages"] = row["prompt"] if isinstance(row["prompt"], list) else None
        row["rendered"] = render_chat(template, row["messages"]) if template and row["messages"] else None
    return Preview(rows=rows, notes=notes)


def _chat_template(model: str) -> ChatTemplate | None:
    if model in DEMO_MODELS or not is_hub_id(model):  # a folder; a hub id is never one (runs.paths.is_hub_id)
        resolved = Path(resolve_model(model))
        return find_chat_template(resolved) if resolved.is_dir() else None
    try:  # a hub id: only what this machine already has, the web process never downloads
        from huggingface_hub import try_to_load_from_cache  # only for hub ids; it is slow to import

        for name in ("chat_template.jinja", "tokenizer_config.json"):
            cached = try_to_load_from_cache(model, name)
            if isinstance(cached, str):
                return find_chat_template(Path(cached).parent)
    except Exception:  # a malformed id
        return None
    return None


def dataset_versions(dataset) -> list[DatasetVersion]:
    # explicitly newest first: Django drops Meta.ordering from a query with GROUP BY (the count)
    return list(dataset.versions.annotate(run_count=Count("runs")).select_related("based_on").order_by("-number"))
