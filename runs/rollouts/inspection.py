"""Reads behind the inspection pages: the self-reflection tracker, one prompt's history and the prompts that flipped,
and the run's health signals. Each is computed in the database (one grouped query) and returned as JSON-ready
dicts; the pages draw them with Plotly and tests assert on them."""

from __future__ import annotations

import math
import statistics
from urllib.parse import urlencode

from django.core.cache import cache
from django.db.models import Count, F, FloatField, Max, Min, Q, Sum
from django.db.models.functions import Cast
from django.db.models.lookups import GreaterThan
from django.urls import reverse

from runs.models import Evaluation, Rollout, Run
from runs.rollouts.criteria import criterion_for
from runs.rollouts.detectors import run_detectors
from runs.rollouts.reflection import matcher
from runs.rollouts.selectors import metric_series

FLIPPED_SHOWN = 200


# --- self-reflection ---------------------------------------------------------------------------------------------


def _tag_q(bit: int) -> Q:
    return Q(GreaterThan(F("reflection_mask").bitand(bit), 0))


def _pearson(n, sx, sy, sxy, sxx, syy) -> float | None:
    """Pearson's r from sums (None when either side does not vary)."""
    cov = n * sxy - sx * sy
    var = (n * sxx - sx * sx) * (n * syy - sy * sy)
    return cov / math.sqrt(var) if n > 1 and var > 0 else None


def reflection_tracker(run: Run) -> dict:
    """Per step: the share of completions holding a reflection phrase (all, and per phrase), and the mean reward and
    length of completions with and without one. Overall: the first step each appears, and the correlation of
    "holds a phrase" with reward and with length, both pooled and within steps (the within-step figure leaves out
    that both rise as training goes on)."""
    length = Cast("length", FloatField())
    refl = Q(reflective=True)
    has_reward = Q(reward__isnull=False)
    phrases = list(run.reflection_phrases)
    aggregates = {
        "n": Count("id"),
        "x": Count("id", filter=refl),
        "rn": Count("reward"),
        "rx": Count("reward", filter=refl),
        "ry": Sum("reward"),
        "rxy": Sum("reward", filter=refl),
        "ryy": Sum(F("reward") * F("reward"), filter=has_reward),
        "ly": Sum(length),
        "lxy": Sum(length, filter=refl),
        "lyy": Sum(length * length),
    }
    bit = matcher(tuple(phrases)).bit
    for i, phrase in enumerate(phrases):
        aggregates[f"p{i}"] = Count("id", filter=_tag_q(bit(phrase)))
    rows = list(Rollout.objects.filter(run=run).order_by().values("step").annotate(**aggregates).order_by("step"))

    steps, share, per_phrase = [], [], {p: [] for p in phrases}
    reward_with, reward_without, length_with, length_without = [], [], [], []
    for r in rows:
        steps.append(r["step"])
        share.append(r["x"] / r["n"])
        for i, phrase in enumerate(phrases):
            per_phrase[phrase].append(r[f"p{i}"] / r["n"])
        rxy, ry = r["rxy"] or 0.0, r["ry"] or 0.0
        reward_with.append(rxy / r["rx"] if r["rx"] else None)
        reward_without.append((ry - rxy) / (r["rn"] - r["rx"]) if r["rn"] - r["rx"] else None)
        lxy, ly = r["lxy"] or 0.0, r["ly"] or 0.0
        length_with.append(lxy / r["x"] if r["x"] else None)
        length_without.append((ly - lxy) / (r["n"] - r["x"]) if r["n"] - r["x"] else None)

    def pooled(n, x, y, xy, yy):
        return _pearson(
            sum(r[n] for r in rows),
            sum(r[x] for r in rows),
            sum(r[y] or 0 for r in rows),
            sum(r[xy] or 0 for r in rows),
            sum(r[x] for r in rows),
            sum(r[yy] or 0 for r in rows),
        )

    def within(n, x, y, xy, yy):
        # deviations from each step's own means, summed over steps
        cov = var_x = var_y = 0.0
        for r in rows:
            if not r[n]:
                continue
            cov += (r[xy] or 0) - r[x] * (r[y] or 0) / r[n]
            var_x += r[x] - r[x] ** 2 / r[n]
            var_y += (r[yy] or 0) - (r[y] or 0) ** 2 / r[n]
        return cov / math.sqrt(var_x * var_y) if var_x > 1e-12 and var_y > 1e-12 else None

    first = {p: next((s for s, v in zip(steps, per_phrase[p]) if v > 0), None) for p in phrases}
    total = sum(r["n"] for r in rows)
    return {
        "phrases": phrases,
        "steps": steps,
        "share": share,
        "per_phrase": per_phrase,
        "reward_with": reward_with,
        "reward_without": reward_without,
        "length_with": length_with,
        "length_without": length_without,
        "completions": total,
        "reflective": sum(r["x"] for r in rows),
        "first_step": next((s for s, v in zip(steps, share) if v > 0), None),
        "first_step_per_phrase": first,
        "correlation": {
            "reward": pooled("rn", "rx", "ry", "rxy", "ryy"),
            "length": pooled("n", "x", "ly", "lxy", "lyy"),
            "reward_within_step": within("rn", "rx", "ry", "rxy", "ryy"),
            "length_within_step": within("n", "x", "ly", "lxy", "lyy"),
        },
    }


# --- prompts -----------------------------------------------------------------------------------------------------


def _criterion(run: Run, solved_by: str, threshold: float):
    return criterion_for([run], solved_by, threshold)  # CriterionError (a ValueError) names a bad choice


def prompt_history(run: Run, key: str, *, solved_by: str = "", threshold: float = 1.0) -> dict | None:
    """One prompt across the steps that sampled it: completions, mean reward and solve rate per step."""
    criterion = _criterion(run, solved_by, threshold)
    first = Rollout.objects.filter(run=run, prompt_key=key).values("prompt").first()
    if first is None:
        return None
    rows = list(
        Rollout.objects.filter(run=run, prompt_key=key)
        .order_by()
        .values("step")
        .annotate(
            n=Count("id"), reward_sum=Sum("reward"), scored=Count("reward"), solved=Count("id", filter=criterion.q(run))
        )
        .order_by("step")
    )
    return {
        "key": key,
        "prompt": first["prompt"],
        "criterion": criterion.as_dict(),
        "steps": [r["step"] for r in rows],
        "completions": [r["n"] for r in rows],
        "mean_reward": [r["reward_sum"] / r["scored"] if r["scored"] else None for r in rows],
        "solve_rate": [r["solved"] / r["n"] for r in rows],
    }


def flipped_prompts(run: Run, *, solved_by: str = "", threshold: float = 1.0) -> dict:
    """Prompts that went from all-wrong (no completion of the group solved it) to mixed or all-right at a later
    step: when it flipped, to what, and how it stands at its last step. Cached until the run ingests more."""
    criterion = _criterion(run, solved_by, threshold)
    # what has been stored so far, read from the key's index: the last step and how many rows it holds
    last = Rollout.objects.filter(run=run).order_by("-step").values_list("step", flat=True).first()
    at_last = Rollout.objects.filter(run=run, step=last).count() if last is not None else 0
    cache_key = (
        f"flipped:{run.pk}:{run.created_at.timestamp()}:{run.event_offset}:{last}:{at_last}:"
        f"{criterion.solved_by}:{criterion.threshold!r}"
    )
    cached = cache.get(cache_key)
    if cached is not None:
        return cached
    rows = (
        Rollout.objects.filter(run=run)
        .order_by()
        .values("prompt_key", "step")
        .annotate(n=Count("id"), solved=Count("id", filter=criterion.q(run)))
        .order_by("prompt_key", "step")
    )
    flips, prompts_seen, revisited, current = [], 0, 0, None
    history: list[tuple[int, int, int]] = []

    def close(key, history):
        nonlocal revisited
        revisited += len(history) > 1
        wrong_at = None
        for step, n, solved in history:
            if solved == 0:
                wrong_at = step if wrong_at is None else wrong_at
            elif wrong_at is not None:
                last_step, last_n, last_solved = history[-1]
                flips.append(
                    {
                        "key": key,
                        "all_wrong_step": wrong_at,
                        "flip_step": step,
                        "flipped_to": "all right" if solved == n else "mixed",
                        "solve_rate_at_flip": solved / n,
                        "last_step": last_step,
                        "last_solve_rate": last_solved / last_n,
                        "appearances": len(history),
                    }
                )
                return

    for r in rows.iterator(chunk_size=5000):
        if r["prompt_key"] != current:
            if current is not None:
                close(current, history)
            current, history = r["prompt_key"], []
            prompts_seen += 1
        history.append((r["step"], r["n"], r["solved"]))
    if current is not None:
        close(current, history)
    flips.sort(key=lambda f: (f["flip_step"], f["key"]))
    shown = flips[:FLIPPED_SHOWN]
    ids = (
        Rollout.objects.filter(run=run, prompt_key__in=[f["key"] for f in shown])
        .order_by()
        .values("prompt_key")
        .annotate(first=Min("id"))
        .values_list("first", flat=True)
    )
    texts = dict(Rollout.objects.filter(run=run, id__in=list(ids)).values_list("prompt_key", "prompt"))
    for f in shown:
        f["prompt"] = texts.get(f["key"], "")
        f["url"] = reverse("run_prompt", args=[run.pk, f["key"]])
    # "revisited": prompts sampled at two steps or more; only those can flip
    result = {
        "criterion": criterion.as_dict(),
        "prompts": prompts_seen,
        "revisited": revisited,
        "flipped": len(flips),
        "shown": shown,
    }
    cache.set(cache_key, result, 3600)
    return result


# --- health ------------------------------------------------------------------------------------------------------


def _values(series: dict, key: str, steps: list[int]) -> list[tuple[int, float]]:
    return [(s, v) for s, v in zip(steps, series.get(key, [])) if isinstance(v, (int, float)) and math.isfinite(v)]


def _recent(points: list[tuple[int, float]], n: int = 3) -> float:
    return statistics.fmean(v for _, v in points[-n:])


def _share_signal(
    key: str,
    points,
    limit: float,
    high_title: str,
    title: str,
    what: str,
    why: str,
    *,
    url: str,
    url_when_high: bool = False,
) -> list[dict]:
    """A share TRL logs (0..1) that should stay below ``limit``: warn when its recent mean does not."""
    if not points:
        return []
    now = _recent(points)
    high = now > limit
    return [
        {
            "key": key,
            "level": "warn" if high else "ok",
            "title": high_title if high else title,
            "detail": f"{now:.0%} {what}" + (f": {why}" if high else ""),
            "step": points[-1][0],
            "url": url if high or not url_when_high else None,
        }
    ]


def _zero_variance_shares(run: Run, series: dict, steps: list[int], recent: int = 10) -> list[tuple[int, float]]:
    """Per step, the share of completions in groups whose rewards were all equal. TRL's frac_reward_zero_std is that
    share under sum_then_normalize with group or no scaling; under scale_rewards="batch" or normalize_then_sum TRL
    measures the whole batch's std instead, so the share is counted from the stored groups (recent steps only)."""
    config = run.config or {}
    if config.get("scale_rewards") != "batch" and config.get("multi_objective_aggregation") != "normalize_then_sum":
        return _values(series, "frac_reward_zero_std", steps)
    last = Rollout.objects.filter(run=run).order_by("-step").values_list("step", flat=True).first()
    if last is None:
        return []
    rows = (
        Rollout.objects.filter(run=run, step__gt=last - recent)
        .values("step")
        .annotate(n=Count("id"), zero=Count("id", filter=Q(zero_std=True)))
        .order_by("step")
    )
    return [(r["step"], r["zero"] / r["n"]) for r in rows if r["n"]]


SEVERITY = {"warn": 0, "info": 1, "ok": 2, "dismissed": 3}  # the Health list's order: what needs a look first


def run_health(run: Run) -> list[dict]:
    """``health_signals``, the warnings first, then notes (info), then what is fine; each level in its own order."""
    return sorted(health_signals(run), key=lambda s: SEVERITY.get(s["level"], 1))


def health_signals(run: Run) -> list[dict]:
    """Signals a GRPO run is going wrong, read from TRL's logged metrics, each with its level (ok, warn, info),
    what it saw, and where to look. An SFT run has no groups, advantages or KL: it gets its own (sft_health)."""
    if run.is_sft:
        return sft_health(run)
    m = metric_series(run)
    steps, series = m["steps"], m["series"]
    config = run.config or {}
    browse = reverse("run_rollouts", args=[run.pk])
    signals = []

    entropy = _values(series, "entropy", steps)
    if len(entropy) >= 4:
        start, now = statistics.fmean(v for _, v in entropy[:3]), _recent(entropy)
        collapsed = now < 0.05 or (start > 0 and now < 0.3 * start)
        signals.append(
            {
                "key": "entropy_collapse",
                "level": "warn" if collapsed else "ok",
                "title": "Entropy collapse" if collapsed else "Entropy",
                "detail": f"token entropy {start:.3g} over the first steps, {now:.3g} now"
                + (
                    ": the policy has become nearly deterministic, so groups stop differing and the "
                    "advantages vanish; raise the temperature or lower the learning rate"
                    if collapsed
                    else ""
                ),
                "step": entropy[-1][0],
            }
        )
    else:
        signals.append(
            {
                "key": "entropy_collapse",
                "level": "ok",
                "title": "Entropy",
                "detail": "not enough steps logged yet",
                "step": None,
            }
        )

    kl = _values(series, "kl", steps)
    if not kl:
        signals.append(
            {
                "key": "kl_spike",
                "level": "ok",
                "title": "KL",
                "detail": "not measured: with beta=0 TRL loads no reference model and logs no KL"
                if config.get("beta") == 0
                else "not logged yet"
                if config.get("beta") is not None
                else f"no KL logged; beta unknown ({run.unknown_reason})",
                "step": None,
            }
        )
    else:
        spike = None
        for i in range(3, len(kl)):
            base = statistics.median(v for _, v in kl[max(0, i - 10) : i])
            if kl[i][1] > 0.01 and kl[i][1] > 5 * max(base, 1e-6):
                spike = (kl[i][0], kl[i][1], base)
        signals.append(
            {
                "key": "kl_spike",
                "level": "warn" if spike else "ok",
                "title": "KL spike" if spike else "KL",
                "detail": (
                    f"KL to the reference jumped to {spike[1]:.3g} at step {spike[0]} (median "
                    f"{spike[2]:.3g} over the steps before): the policy moved far in one update; "
                    f"lower the learning rate or raise beta"
                )
                if spike
                else f"KL to the reference {kl[-1][1]:.3g} at step {kl[-1][0]}, no spike",
                "step": spike[0] if spike else kl[-1][0],
            }
        )

    signals += _share_signal(
        "clipped_ratio",
        _values(series, "completions/clipped_ratio", steps),
        0.2,
        "High clipped ratio",
        "Clipped ratio",
        "of recent completions were cut at "
        + (
            f"max_completion_length={config['max_completion_length']}"
            if config.get("max_completion_length") is not None
            else f"max_completion_length (its value unknown: {run.unknown_reason})"
        ),
        "their endings (and answers) are missing, so rewards judge unfinished text; raise max_completion_length or "
        "reward brevity",
        url=f"{browse}?truncated=yes",
        url_when_high=True,
    )
    region = _values(series, "clip_ratio/region_mean", steps)
    if region and _recent(region) > 0.2:
        signals.append(
            {
                "key": "policy_clip_ratio",
                "level": "warn",
                "title": "High policy clip ratio",
                "detail": f"{_recent(region):.0%} of tokens hit the "
                + (f"epsilon={config['epsilon']}" if config.get("epsilon") is not None else "epsilon")
                + " clip: "
                "updates are larger than the trust region allows",
                "step": region[-1][0],
            }
        )
    signals += _share_signal(
        "zero_std",
        _zero_variance_shares(run, series, steps),
        0.5,
        "Many zero-variance groups",
        "Zero-variance groups",
        "of recent groups gave every completion the same reward",
        "those groups have no advantage, so no learning signal; the prompts are too easy or too hard for the model, "
        "or the reward is too coarse",
        url=f"{browse}?zero_std=yes",
    )

    signals += _reward_hacking(run, _values(series, "reward", steps))
    signals += run_detectors(run, series, steps)

    loss = _values(series, "loss", steps)
    if loss and abs(_recent(loss, 5)) < 1e-3:
        beta, loss_type = config.get("beta"), config.get("loss_type")
        signals.append(
            {
                "key": "near_zero_loss",
                "level": "info",
                "title": "Near-zero loss, as expected",
                "detail": (
                    f"The loss is {_recent(loss, 5):.2g}. With beta={beta} there is no KL term, and on the first "
                    f"update of each batch the policy ratio is exactly 1, so the loss is minus the token-weighted "
                    f"mean advantage; advantages are centred in every group, so it stays near zero "
                    f"(loss_type={loss_type} averages over all tokens of the batch, so only length differences "
                    f"move it). The gradient is not zero: watch reward and grad_norm, not loss."
                    if beta == 0
                    else f"The loss is {_recent(loss, 5):.2g}: advantages are centred in every group, so the policy "
                    f"term averages near zero; its gradient does not. Watch reward and grad_norm."
                ),
                "step": loss[-1][0],
            }
        )
    return signals


def sft_health(run: Run) -> list[dict]:
    """An SFT run's signals from SFTTrainer's logged metrics: the training loss (rising is a warning), the share of
    next tokens it predicts right, and its periodic held-out accuracy."""
    m = metric_series(run)
    steps, series = m["steps"], m["series"]
    signals = []
    loss = _values(series, "loss", steps)
    if len(loss) >= 4:
        start, now = statistics.fmean(v for _, v in loss[:3]), _recent(loss)
        rising = now > 1.1 * start
        signals.append(
            {
                "key": "sft_loss",
                "level": "warn" if rising else "ok",
                "title": "Training loss rising" if rising else "Training loss",
                "detail": f"loss {start:.3g} over the first steps, {now:.3g} now"
                + (": the model fits its training completions worse; lower the learning rate" if rising else ""),
                "step": loss[-1][0],
            }
        )
    else:
        signals.append(
            {
                "key": "sft_loss",
                "level": "ok",
                "title": "Training loss",
                "detail": "not enough steps logged yet",
                "step": None,
            }
        )
    accuracy = _values(series, "mean_token_accuracy", steps)
    if accuracy:
        signals.append(
            {
                "key": "token_accuracy",
                "level": "ok",
                "title": "Token accuracy",
                "detail": f"{accuracy[-1][1]:.1%} of the training completions' next tokens predicted right at step "
                f"{accuracy[-1][0]}",
                "step": accuracy[-1][0],
            }
        )
    evals = list(
        Evaluation.objects.filter(run=run, kind=Evaluation.Kind.PERIODIC, status=Evaluation.Status.COMPLETED).order_by(
            "step"
        )
    )
    evals = [e for e in evals if isinstance(e.metrics.get("mean@k"), (int, float))]
    if evals:
        first, last = evals[0], evals[-1]
        signals.append(
            {
                "key": "held_out_accuracy",
                "level": "ok",
                "title": "Held-out accuracy",
                "detail": f"held-out mean@{last.k} {first.metrics['mean@k']:.0%} at step {first.step}, "
                f"{last.metrics['mean@k']:.0%} at step {last.step}",
                "step": last.step,
            }
        )
    return signals


def _reward_hacking(run: Run, reward: list[tuple[int, float]]) -> list[dict]:
    """Training reward rising while held-out accuracy (periodic mean@k) stays flat or falls: the policy may be
    learning to please the reward functions rather than to solve the task. Needs three evaluations."""
    evals = [
        (e.step, e.metrics["mean@k"], e)
        for e in Evaluation.objects.filter(
            run=run, kind=Evaluation.Kind.PERIODIC, status=Evaluation.Status.COMPLETED
        ).order_by("step")
        if isinstance(e.metrics.get("mean@k"), (int, float))
    ]
    if not evals:
        return []
    if len(evals) < 3 or len(reward) < 4:
        return [
            {
                "key": "reward_hacking",
                "level": "ok",
                "title": "Held-out accuracy",
                "detail": f"{len(evals)} evaluation{'s' if len(evals) != 1 else ''} so far; the reward-hacking check "
                f"needs three",
                "step": evals[-1][0],
            }
        ]
    third = max(2, len(reward) // 3)
    early, late = statistics.fmean(v for _, v in reward[:third]), statistics.fmean(v for _, v in reward[-third:])
    spread = max(v for _, v in reward) - min(v for _, v in reward)
    acc_start, acc_now = evals[0][1], statistics.fmean(v for _, v, _ in evals[-2:])
    latest = evals[-1][2]
    rising = late - early > max(0.05, 0.25 * spread)
    hacking = rising and acc_now - acc_start <= 0.02
    figures = (
        f"training reward {early:.3g} → {late:.3g}; held-out mean@{latest.k} {acc_start:.0%} at step "
        f"{evals[0][0]} → {acc_now:.0%} over the last two evaluations"
    )
    if not hacking:
        return [
            {
                "key": "reward_hacking",
                "level": "ok",
                "title": "Held-out accuracy",
                "detail": figures + (": it rises with the reward" if rising else ""),
                "step": latest.step,
            }
        ]
    # the examples: held-out completions that score like training completions now, yet are wrong
    top = (
        latest.samples.filter(correct=False, reward__isnull=False).order_by("-reward").values_list("reward", flat=True)
    )
    floor = min(late, top[0]) if top else late
    url = (
        reverse("evaluation_detail", args=[run.pk, latest.pk])
        + "?"
        + urlencode({"correct": "no", "reward_min": round(floor, 6)})
    )
    return [
        {
            "key": "reward_hacking",
            "level": "warn",
            "title": "Possible reward hacking",
            "detail": f"{figures}: the reward rises while held-out accuracy does not, so the policy may be exploiting "
            f"the reward functions (format without substance, a loophole in a check) or memorising "
            f"training prompts; read the wrong completions that still score high",
            "step": latest.step,
            "url": url,
        }
    ]


def zero_variance_split(run: Run) -> dict:
    """Per step, the share of groups with zero variance (no learning signal) split by why: every completion solved
    the prompt (too easy) or none did (too hard), by the run's solve criterion; "other" when all got the same
    in-between reward. One grouped query over the zero-variance rows."""
    criterion = _criterion(run, "", 1.0)  # accuracy at 1 when the run has it, else the total reward
    groups = dict(Rollout.objects.filter(run=run).values("step").annotate(n=Max("group")).values_list("step", "n"))
    per_group = (
        Rollout.objects.filter(run=run, zero_std=True)
        .values("step", "group")
        .annotate(n=Count("id"), solved=Count("id", filter=criterion.q(run)))
        .order_by("step")
    )
    right: dict[int, int] = {}
    wrong: dict[int, int] = {}
    other: dict[int, int] = {}
    for g in per_group:
        bucket = right if g["solved"] == g["n"] else wrong if g["solved"] == 0 else other
        bucket[g["step"]] = bucket.get(g["step"], 0) + 1
    steps = sorted(groups)

    def share(counts: dict[int, int]) -> list[float]:
        return [counts.get(s, 0) / (groups[s] + 1) for s in steps]  # groups are numbered from 0

    return {
        "steps": steps,
        "all_right": share(right),
        "all_wrong": share(wrong),
        "other": share(other),
        "criterion": criterion.as_dict(),
    }
