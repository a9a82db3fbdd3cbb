"""Reads of the rollouts capability: a run's metric series, its steps, and one step's groups with their advantages."""

from __future__ import annotations

from django.db import connection
from django.db.models import Avg, Count, Max, Min, Q
from grpo_web_protocol.events import parse_event, read_lines

from rewards.models import RewardFunctionVersion
from rewards.trl_inputs import is_conversational
from runs.datasets.mapping import Mapping, prompts_by_text
from runs.models import Replay, Rollout, Run
from runs.paths import event_log_path
from runs.rollouts.groups import advantage, formula, group_stats, normalize_then_sum
from runs.rollouts.reflection import matcher, utf16_length
from runs.rollouts.tokens import token_groups
from runs.series import JsonNumber, numeric_keys, step_buckets
from runs.text import as_text

# TRL's metric names, in the order the run page draws them (each present key gets a chart).
# what TRL logs under these prefixes gets a chart of its own, under TRL's name: the policy clip ratios, and the
# training/inference mismatch when vLLM generates (sampling/sampling_logp_difference, importance_sampling_ratio), and a
# run with tools: tools/call_frequency (calls per completion) and tools/failure_frequency (the share of calls that failed)
TRL_GROUPS = ("clip_ratio/", "sampling/", "tools/")
CHART_METRICS = [
    "reward",
    "reward_std",
    "kl",
    "entropy",
    "completions/mean_length",
    "frac_reward_zero_std",
    "completions/clipped_ratio",
    "loss",
    "grad_norm",
    "mean_token_accuracy",
    "learning_rate",
]  # the last two: what an SFT run's page shows beside its loss


# The Metrics tab's sections, in order: (name, the prefixes of its metrics). TRL logs its core metrics (reward, loss,
# kl, entropy...) without a prefix, as the trainer's; W&B shows them under train/. What fits no section is "other".
SECTIONS = [
    ("train", ("train/",)),
    ("rewards", ("rewards/",)),
    ("completions", ("completions/",)),
    ("eval", ("eval/", "eval_", "val-core/")),
]


def metric_section(key: str) -> str:
    for name, prefixes in SECTIONS:
        if key.startswith(prefixes):
            return name
    return "train" if "/" not in key else "other"


def chart_keys(run: Run, keys) -> tuple[list[str], list[dict]]:
    """Of a run's logged metric ``keys`` (in the order they first appear), those drawn, in order, and the same as
    [{"name", "charts"}] sections by prefix (SECTIONS)."""
    keys = list(keys)
    reward_keys = [f"rewards/{name}/mean" for name in run.reward_names]
    per_function = [f"rewards/{name}/{what}" for what in ("none_frac", "time_per_call_ms") for name in run.reward_names]
    present = set(keys)
    charts = (
        [k for k in CHART_METRICS[:2] if k in present]
        + [k for k in reward_keys if k in present]
        + [k for k in CHART_METRICS[2:] if k in present]
        + [k for k in per_function if k in present]
        + [k for k in keys if k.startswith(TRL_GROUPS)]
        + [k for k in keys if k.startswith("val-core/")]
    )
    sections = {name: [] for name, _ in SECTIONS} | {"other": []}
    for key in charts:
        sections[metric_section(key)].append(key)
    return charts, [{"name": name, "charts": keys} for name, keys in sections.items() if keys]


def metric_series(run: Run, smooth: float = 0.0) -> dict:
    """{"steps": [...], "series": {metric: [value or None per step]}} for every metric TRL logged; "charts": the
    metrics drawn, in order, and "sections": [{"name", "charts"}] the same by prefix (SECTIONS); "version": what of
    the event log was ingested when read (attempt.bytes), so a page can tell whether a later push is news. With
    ``smooth`` (0 to below 1), "smoothed" holds each series after TensorBoard's smoothing (smooth_ema). Every point:
    for the API and the detectors; the run page reads metric_catalog and metric_buckets."""
    version = f"{run.attempt}.{run.event_offset}"  # read before the rows: never newer than they are
    rows = list(run.step_metrics.values_list("step", "metrics"))
    steps = [step for step, _ in rows]
    keys: dict[str, None] = {}
    for _, metrics in rows:
        for key, value in metrics.items():
            if isinstance(value, (int, float)) or value is None:
                keys.setdefault(key, None)
    series = {key: [metrics.get(key) for _, metrics in rows] for key in keys}
    charts, sections = chart_keys(run, keys)
    out = {
        "steps": steps,
        "series": series,
        "charts": charts,
        "sections": sections,
        "smooth": smooth,
        "version": version,
        "latest_reward": latest_reward(run, rows),
    }
    if smooth:
        out["smoothed"] = {key: smooth_ema(values, smooth) for key, values in series.items()}
    return out


def latest_reward(run: Run, rows: list[tuple[int, dict]] | None = None) -> dict | None:
    """The newest reward of any kind: {"step", "value", "source"}, source "metrics" (the last logged ``reward``) or
    "rollouts" (the mean reward of the newest rollout batch, when no metric is as new: a trainer logging metrics
    every 10 steps stores a batch each step). ``rows``: the run's (step, metrics), when the caller has read them.
    None when neither holds a reward."""
    if rows is None:  # the newest logged reward, found by the database (a run may hold 100,000 steps)
        found = (
            run.step_metrics.annotate(v=JsonNumber("metrics", "reward"))
            .exclude(v=None)
            .order_by("-step")
            .values_list("step", "v")
            .first()
        )
        newest = found and (found[0], found[1])
    else:
        logged = [(step, m["reward"]) for step, m in rows if isinstance(m.get("reward"), (int, float))]
        newest = logged and max(logged)
    batch = Rollout.objects.filter(run=run).aggregate(step=Max("step"))["step"]
    if batch is not None and (not newest or batch > newest[0]):
        mean = Rollout.objects.filter(run=run, step=batch).aggregate(value=Avg("reward"))["value"]
        if mean is not None:
            return {"step": batch, "value": mean, "source": "rollouts"}
    return {"step": newest[0], "value": newest[1], "source": "metrics"} if newest else None


def run_formula(run: Run) -> str:
    """The run's advantage formula, with the epsilon of whoever computed its advantages (Run.advantages_by)."""
    config = run.config or {}
    return formula(config.get("scale_rewards"), config.get("multi_objective_aggregation"), run.advantage_epsilon)


def metric_catalog(run: Run) -> dict:
    """What the run page needs before it draws: the charts and sections (as metric_series), the steps logged
    ({"first", "last", "count"}), the latest reward of any kind (latest_reward) and the data version. No series:
    each chart asks metric_buckets for its own, bucketed."""
    version = f"{run.attempt}.{run.event_offset}"  # read before the rows: never newer than they are
    rows = run.step_metrics.all()
    charts, sections = chart_keys(run, numeric_keys(rows))
    span = rows.aggregate(first=Min("step"), last=Max("step"), count=Count("step"))
    return {
        "charts": charts,
        "sections": sections,
        "steps": span,
        "latest_reward": latest_reward(run),
        "version": version,
    }


def metric_buckets(run: Run, key: str, *, first: int | None = None, last: int | None = None, buckets: int, smooth=0.0):
    """``key``'s series between steps ``first`` and ``last`` (the run's first and last logged step where not given),
    bucketed in the database (runs.series.step_buckets: min, max and last value per bucket); with ``smooth``,
    "smoothed": TensorBoard's smoothing of the buckets' last values."""
    rows = run.step_metrics.all()
    if first is None or last is None:
        span = rows.aggregate(first=Min("step"), last=Max("step"))
        first = span["first"] if first is None else first
        last = span["last"] if last is None else last
    if first is None or last is None or last < first:
        out = {"step": [], "last": [], "min": [], "max": [], "width": 1, "exact": True}
    else:
        out = step_buckets(rows, key, first=first, last=last, buckets=buckets)
    out.update(metric=key, **{"from": first, "to": last})
    if smooth:
        out["smoothed"] = smooth_ema(out["last"], smooth)
        out["smooth"] = smooth
    return out


def rollout_steps(run: Run) -> list[int]:
    """The steps that have rollouts, one index probe per step (a loose index scan): a plain DISTINCT would read
    every row of a run with millions."""
    table = Rollout._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"""
            WITH RECURSIVE s(step) AS (
                SELECT MIN(step) FROM {table} WHERE run_id = %s
                UNION ALL
                SELECT (SELECT MIN(step) FROM {table} WHERE run_id = %s AND step > s.step) FROM s
                WHERE s.step IS NOT NULL
            ) SELECT step FROM s WHERE step IS NOT NULL""",
            [run.pk, run.pk],
        )
        return [row[0] for row in cursor.fetchall()]


STEP_GROUPS_PAGE = 32  # groups a step view sends at once; a step of 1024 completions (G=8) has 128


def batch_step(run: Run, step: int) -> int:
    """The step whose stored generation batch optimizer step ``step`` trained on. A batch is stored once, at the
    first step that trains on it; with steps_per_generation above gradient_accumulation_steps, or num_iterations > 1,
    the next steps train on it again (TRL's completions table shows it at each of them): the latest batch stored at
    or before ``step``."""
    if Rollout.objects.filter(run=run, step=step).exists():
        return step
    earlier = Rollout.objects.filter(run=run, step__lt=step).order_by("-step").values_list("step", flat=True).first()
    return step if earlier is None else earlier


# A completion longer than this reaches a page as a preview (``completion_preview``): its opening and its end. A
# group of 16 reasoning traces of 30 KB each is half a megabyte of text, a page of 32 groups fifteen; the page opens
# one in full when asked (run_step_completion_json), without loading the others.
LONG_COMPLETION_CHARS = 4000
PREVIEW_HEAD_CHARS = 600
PREVIEW_TAIL_CHARS = 1500


def completion_preview(text: str) -> dict | None:
    """None for a completion a page shows whole; else its opening (``head``), its end (``tail``: the answer and the
    last of the reasoning), where the tail starts in UTF-16 units (``tail_at``: reflection spans are in those), and
    its length (``chars``, UTF-16 units too)."""
    if len(text) <= LONG_COMPLETION_CHARS:
        return None
    head, tail = text[:PREVIEW_HEAD_CHARS], text[-PREVIEW_TAIL_CHARS:]
    total = utf16_length(text)
    return {"chars": total, "head": head, "tail": tail, "tail_at": total - utf16_length(tail)}


def step_view(
    run: Run, step: int, *, first_group: int = 0, groups: int = STEP_GROUPS_PAGE, previews: bool = False
) -> dict:
    """A page of the groups optimizer step ``step`` trained on (``step_groups``), with how many groups there are and
    how many of them had zero variance; ``batch_step``: the step they were stored at (``batch_step()``);
    ``token_groups``: those whose per-token values this step's update kept (runs.rollouts.tokens). ``previews``: a
    long completion comes as its ``preview`` (``completion_preview``), its ``completion`` None."""
    requested, step = step, batch_step(run, step)
    totals = Rollout.objects.filter(run=run, step=step).aggregate(
        last=Max("group"), zero=Count("group", distinct=True, filter=Q(zero_std=True))
    )
    batch = None
    if (run.config or {}).get("scale_rewards") == "batch":  # the whole step's std scales every group
        batch = group_stats(
            list(Rollout.objects.filter(run=run, step=step, reward__isnull=False).values_list("reward", flat=True))
        ).std
    return {
        "groups": step_groups(run, step, first_group=first_group, groups=groups, batch_std=batch, previews=previews),
        "groups_total": 0 if totals["last"] is None else totals["last"] + 1,
        "zero_std_groups": totals["zero"],
        "first_group": first_group,
        "batch_step": step if step != requested else None,
        # the groups whose per-token values the update at this step kept (the token-level view)
        "token_groups": token_groups(run, requested),
    }


def step_groups(
    run: Run,
    step: int,
    *,
    first_group: int = 0,
    groups: int | None = None,
    batch_std: float | None = None,
    previews: bool = False,
) -> list[dict]:
    """The step's groups (all, or ``groups`` from ``first_group`` on): prompt, then its G completions ranked by
    advantage, with group mean and std (TRL's), the scale their advantages were divided by (group std, the batch's
    std, or none: ``scale_rewards``), where each completion's reflection phrases are (``spans``), and whether the
    group had zero variance. ``batch_std``: the step's, when only some groups are read."""
    qs = Rollout.objects.filter(run=run, step=step)
    if first_group or groups is not None:
        qs = qs.filter(group__gte=first_group, **({"group__lt": first_group + groups} if groups is not None else {}))
    rollouts = list(
        qs.order_by("group", "-advantage", "index").values(
            "id",
            "group",
            "prompt",
            "prompt_key",
            "index",
            "completion",
            "rewards",
            "reward",
            "advantage",
            "length",
            "truncated",
            "reflections",
            "messages",
        )
    )
    spans = matcher(tuple(run.reflection_phrases)).spans
    names = run.reward_names
    scale_rewards = (run.config or {}).get("scale_rewards", "group")
    by_formula = {}
    if (run.config or {}).get("multi_objective_aggregation") == "normalize_then_sum":
        # the sum is normalised over the whole step: read every row of it, not only this page's groups
        step_rows = list(
            Rollout.objects.filter(run=run, step=step).order_by("index").values_list("index", "group", "rewards")
        )
        values = normalize_then_sum(
            [(g, r) for _, g, r in step_rows], [float(x.get("weight", 1.0)) for x in run.rewards]
        )
        by_formula = {index: v for (index, _, _), v in zip(step_rows, values)}
    by_group: dict[int, dict] = {}
    for r in rollouts:
        g = by_group.get(r["group"])
        if g is None:
            g = by_group[r["group"]] = {
                "group": r["group"],
                "prompt": r["prompt"],
                "prompt_key": r["prompt_key"],
                "completions": [],
            }
        preview = completion_preview(r["completion"]) if previews else None
        g["completions"].append(
            {
                "id": r["id"],
                "index": r["index"],
                "completion": None if preview else r["completion"],
                "preview": preview,
                "rewards": dict(zip(names, r["rewards"])),
                "reward": r["reward"],
                "advantage": r["advantage"],
                "length": r["length"],
                "truncated": r["truncated"],
                "reflections": r["reflections"],
                "spans": spans(r["completion"]),
                "messages": r["messages"],
            }
        )
    if batch_std is None and scale_rewards == "batch":
        batch_std = group_stats([r["reward"] for r in rollouts if r["reward"] is not None]).std
    for g in by_group.values():
        stats = group_stats([c["reward"] for c in g["completions"] if c["reward"] is not None])
        scale = None if scale_rewards == "none" else batch_std if scale_rewards == "batch" else stats.std
        g.update(mean=stats.mean, std=stats.std, zero_std=stats.zero_std, scale=scale)
        for c in g["completions"]:
            c["formula_advantage"] = (
                by_formula[c["index"]]
                if by_formula
                else advantage(c["reward"], stats.mean, scale, scale_rewards, run.advantage_epsilon)
            )
    return list(by_group.values())


def whole_number(text: str, digits: int = 12) -> int | None:
    """``text`` as a non-negative id (ASCII digits only: "²" is a digit to str.isdigit, not to int), else None."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= digits else None


REPLAY_FIELDS = ("rollout_id", "index", "new_rewards", "new_reward", "new_advantage", "old_rank", "new_rank")


def replay_rewards_shown(replay: Replay) -> list[dict]:
    """The replay's reward list as a person names it: a user's function with its version's number ("accuracy v3"),
    never the version's internal id; a built-in by its name. Each entry keeps its weight and version_id."""
    ids = [r["version_id"] for r in replay.rewards if r.get("version_id")]
    numbers = dict(RewardFunctionVersion.objects.filter(pk__in=ids).values_list("pk", "number"))
    shown = []
    for r in replay.rewards:
        number = numbers.get(r.get("version_id"))
        label = f"{r['name']} v{number}" if number else r["name"]
        if r.get("stored"):  # a run trained elsewhere, without this function's source
            label += " (stored rewards: its source did not come with the run)"
        elif r.get("edited"):
            label += " (edited source)"
        shown.append({**r, "version": number, "label": label})
    return shown


def replay_values(run: Run, replay_id: str, **rows) -> list[dict] | None:
    """``?replay=N`` on the group view or the browser: the run's replay N's values for its rows that match ``rows``
    (``step=``, ``rollout_id__in=``); None when ``replay_id`` names no replay of the run."""
    pk = whole_number(replay_id)
    replay = run.replays.filter(pk=pk).first() if pk is not None else None
    return None if replay is None else list(replay.rows.filter(**rows).values(*REPLAY_FIELDS))


# --- datasets ---------------------------------------------------------------------------------------------------


def smooth_ema(values: list[float | None], weight: float) -> list[float | None]:
    """TensorBoard's smoothing: an exponential moving average, debiased so the first points are not pulled toward 0.

    s_n = (1 - w) * sum_i w^(n - i) * y_i / (1 - w^n) over the n values so far; 0 leaves the values as they are. A
    missing value stays missing and is skipped."""
    out: list[float | None] = []
    last, n = 0.0, 0
    for y in values:
        if y is None:
            out.append(None)
            continue
        last = last * weight + (1 - weight) * y
        n += 1
        out.append(last / (1 - weight**n))
    return out


def reward_inputs(run: Run, rows: list[dict]) -> tuple[list, list]:
    """Stored rollouts (dicts with ``prompt``, ``completion`` and ``messages``) as TRL passed them to the reward
    functions: (prompts, completions). A conversational completion is its stored turns; a conversational prompt is
    stored as text, so it is found again in the run's dataset version (one text that is not there, as one user
    message)."""
    completions = [r["messages"] if r.get("messages") is not None else r["completion"] for r in rows]
    prompts = [r["prompt"] for r in rows]
    if not any(is_conversational(c) for c in completions):
        return prompts, completions
    version = run.dataset_version
    if version is None:  # a run trained elsewhere: its event log holds the prompts as its client or files gave them
        found = prompts_in_event_log(run, set(prompts))
    else:
        found = prompts_by_text(version.path, Mapping.of(version), set(prompts))
    return [found.get(p) or [{"role": "user", "content": p}] for p in prompts], completions


EVENT_LOG_CHUNK = 32 * 1024 * 1024  # bytes of event log read at a time


def prompts_in_event_log(run: Run, texts: set[str]) -> dict[str, object]:
    """The conversational prompts of a run trained elsewhere as its event logs hold them (the messages TRL passed
    its reward functions), keyed by their stored text (``as_text``), for those of ``texts`` they hold; it reads the
    logs, latest attempt first, until it has found them all."""
    wanted, found = set(texts), {}
    for attempt in range(run.attempt, 0, -1):
        path, offset = event_log_path(run, attempt), 0
        while wanted:
            lines, offset = read_lines(path, offset, EVENT_LOG_CHUNK)
            if not lines:
                break
            for line in lines:
                if b'"rollouts"' not in line:
                    continue
                event = parse_event(line)
                if event.get("type") != "rollouts":
                    continue
                for row in event.get("rows") or ():
                    prompt = row.get("prompt") if isinstance(row, dict) else None
                    if isinstance(prompt, list) and (text := as_text(prompt)) in wanted:
                        found[text] = prompt
                        wanted.discard(text)
    return found
