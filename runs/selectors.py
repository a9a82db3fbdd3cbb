"""Reads behind the pages and their JSON endpoints."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from django.db import connection
from django.db.models import Count, Max, Q

from runs.dataset_mapping import ChatTemplate, Mapping, find_chat_template, preview_rows, render_chat
from runs.datasets import DatasetError
from runs.groups import advantage, group_stats
from runs.models import DatasetVersion, Rollout, Run
from runs.reflection import matcher

ROWS_PER_PAGE = 50
CELL_CHARS = 4000  # a longer cell is cut in the row browser (the stored row is whole)
SEARCH_BATCH_ROWS = 131072

# TRL's metric names, in the order the run page draws them (each present key gets a chart).
CHART_METRICS = ["reward", "reward_std", "kl", "entropy", "completions/mean_length", "frac_reward_zero_std",
                 "completions/clipped_ratio", "loss", "grad_norm"]


def metric_series(run: Run) -> dict:
    """{"steps": [...], "series": {metric: [value or None per step]}} for every metric TRL logged."""
    rows = list(run.step_metrics.values_list("step", "metrics"))
    steps = [step for step, _ in rows]
    keys: dict[str, None] = {}
    for _, metrics in rows:
        for key, value in metrics.items():
            if isinstance(value, (int, float)) or value is None:
                keys.setdefault(key, None)
    series = {key: [metrics.get(key) for _, metrics in rows] for key in keys}
    reward_keys = [f"rewards/{name}/mean" for name in run.reward_names]
    charts = [k for k in CHART_METRICS[:2] if k in series] + [k for k in reward_keys if k in series] + \
             [k for k in CHART_METRICS[2:] if k in series] + [k for k in series if k.startswith("val-core/")]
    return {"steps": steps, "series": series, "charts": charts}


def rollout_steps(run: Run) -> list[int]:
    """The steps that have rollouts, one index probe per step (a loose index scan): a plain DISTINCT would read
    every row of a run with millions."""
    table = Rollout._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"""
            WITH RECURSIVE s(step) AS (
                SELECT MIN(step) FROM {table} WHERE run_id = %s
                UNION ALL
                SELECT (SELECT MIN(step) FROM {table} WHERE run_id = %s AND step > s.step) FROM s
                WHERE s.step IS NOT NULL
            ) SELECT step FROM s WHERE step IS NOT NULL""", [run.pk, run.pk])
        return [row[0] for row in cursor.fetchall()]


STEP_GROUPS_PAGE = 32  # groups a step view sends at once; a step of 1024 completions (G=8) has 128


def step_view(run: Run, step: int, *, first_group: int = 0, groups: int = STEP_GROUPS_PAGE) -> dict:
    """A page of the step's groups (``step_groups``), with how many groups the step has and how many of them had
    zero variance."""
    totals = Rollout.objects.filter(run=run, step=step).aggregate(
        last=Max("group"), zero=Count("group", distinct=True, filter=Q(zero_std=True)))
    batch = None
    if (run.config or {}).get("scale_rewards") == "batch":  # the whole step's std scales every group
        batch = group_stats(list(Rollout.objects.filter(run=run, step=step, reward__isnull=False)
                                 .values_list("reward", flat=True))).std
    return {"groups": step_groups(run, step, first_group=first_group, groups=groups, batch_std=batch),
            "groups_total": 0 if totals["last"] is None else totals["last"] + 1, "zero_std_groups": totals["zero"],
            "first_group": first_group}


def step_groups(run: Run, step: int, *, first_group: int = 0, groups: int | None = None,
                batch_std: float | None = None) -> list[dict]:
    """The step's groups (all, or ``groups`` from ``first_group`` on): prompt, then its G completions ranked by
    advantage, with group mean and std (TRL's), the scale their advantages were divided by (group std, the batch's
    std, or none: ``scale_rewards``), where each completion's reflection phrases are (``spans``), and whether the
    group had zero variance. ``batch_std``: the step's, when only some groups are read."""
    qs = Rollout.objects.filter(run=run, step=step)
    if first_group or groups is not None:
        qs = qs.filter(group__gte=first_group, **({"group__lt": first_group + groups} if groups is not None else {}))
    rollouts = list(qs.order_by("group", "-advantage", "index").values(
        "group", "prompt", "prompt_key", "index", "completion", "rewards", "reward", "advantage", "length",
        "truncated", "reflections"))
    spans = matcher(tuple(run.reflection_phrases)).spans
    names = run.reward_names
    scale_rewards = (run.config or {}).get("scale_rewards", "group")
    by_group: dict[int, dict] = {}
    for r in rollouts:
        g = by_group.get(r["group"])
        if g is None:
            g = by_group[r["group"]] = {"group": r["group"], "prompt": r["prompt"], "prompt_key": r["prompt_key"],
                                        "completions": []}
        g["completions"].append({
            "index": r["index"], "completion": r["completion"], "rewards": dict(zip(names, r["rewards"])),
            "reward": r["reward"], "advantage": r["advantage"], "length": r["length"], "truncated": r["truncated"],
            "reflections": r["reflections"], "spans": spans(r["completion"]),
        })
    if batch_std is None and scale_rewards == "batch":
        batch_std = group_stats([r["reward"] for r in rollouts if r["reward"] is not None]).std
    for g in by_group.values():
        stats = group_stats([c["reward"] for c in g["completions"] if c["reward"] is not None])
        scale = None if scale_rewards == "none" else batch_std if scale_rewards == "batch" else stats.std
        g.update(mean=stats.mean, std=stats.std, zero_std=stats.zero_std, scale=scale)
        for c in g["completions"]:
            c["formula_advantage"] = advantage(c["reward"], stats.mean, scale, scale_rewards)
    return list(by_group.values())


# --- datasets ---------------------------------------------------------------------------------------------------

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
    wanted = matches[start:start + per_page] if matches is not None else np.arange(start, min(start + per_page, total))
    rows = _take_rows(version.path, wanted, version.columns)
    return RowsPage(rows=rows, total=total, number=number, pages=pages)


def _text_columns(schema: pa.Schema) -> list[str]:
    from runs.datasets import column_kind

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
                    zero_copy_only=False)
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


def dataset_preview(version: DatasetVersion, mapping: Mapping, *, model: str = "", n: int = 5) -> Preview:
    """The first rows as the model will see them; with a model, conversational prompts through its chat template.

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
    template = _chat_template(model) if model else None
    if model and template is None:
        notes.append(f"no chat template found for '{model}' (a local model folder, 'tiny', or a hub id already in "
                     f"this machine's Hugging Face cache)")
    conversational = bool(rows) and isinstance(rows[0]["prompt"], list)
    if template and not conversational:
        notes.append("standard prompts reach the model as written; the chat template applies to conversational ones")
    for row in rows:
        row["messages"] = row["prompt"] if isinstance(row["prompt"], list) else None
        row["rendered"] = render_chat(template, row["messages"]) if template and row["messages"] else None
    return Preview(rows=rows, notes=notes)


def _chat_template(model: str) -> ChatTemplate | None:
    from workers.supervisor import resolve_model

    resolved = Path(resolve_model(model))
    if resolved.is_dir():
        return find_chat_template(resolved)
    if model.startswith((".", "/", "~")) or model.count("/") > 1:
        return None
    try:  # a hub id: only what this machine already has, the web process never downloads
        from huggingface_hub import try_to_load_from_cache

        for name in ("chat_template.jinja", "tokenizer_config.json"):
            cached = try_to_load_from_cache(model, name)
            if isinstance(cached, str):
                return find_chat_template(Path(cached).parent)
    except Exception:  # a malformed id
        return None
    return None


def dataset_versions(dataset) -> list[DatasetVersion]:
    return list(dataset.versions.annotate(run_count=Count("runs")).select_related("based_on"))
