"""The text detectors (runs.rollouts.detectors): degenerate, repetitive completions; near-identical completions within
a group; the same answer whatever the prompt. They read the stored completions (the last two through
``recent_texts``: each completion's two ends, cut by the database)."""

from __future__ import annotations

import re
import statistics
from collections import Counter, defaultdict

from django.db.models.functions import Left, Right

from runs.models import Rollout, Run
from runs.models.fields import AsText
from runs.rollouts.detector_kit import (
    COMPARED_CHARS,
    EXAMPLES,
    GROUPS_COMPARED,
    MIN_PROMPTS,
    REPETITION_MIN_CHARS,
    TEXT_ROWS,
    browse_url,
    compression_ratio,
    make_signal,
)


def repetition(run: Run, t: dict, recent_steps: list[int]) -> list[dict]:
    """Degenerate text: completions zlib shrinks by ``repetition_ratio`` or more (a phrase or character repeated,
    loops), more than ``repetition_share`` of the recent ones."""
    if not recent_steps:
        return []
    rows = Rollout.objects.filter(run=run, step__in=recent_steps).values_list("id", "completion")
    long, flagged = 0, []
    for rid, text in rows.iterator(chunk_size=2000):
        if len(text) < REPETITION_MIN_CHARS:
            continue
        long += 1
        ratio = compression_ratio(text)
        if ratio >= t["repetition_ratio"]:
            flagged.append((ratio, rid))
    if not long:
        return []
    share = len(flagged) / long
    fired = share > t["repetition_share"]
    detail = (
        f"{share:.0%} of the last {len(recent_steps)} steps' completions of {REPETITION_MIN_CHARS}+ "
        f"characters compress {t['repetition_ratio']:g}× or more"
    )
    if fired:
        detail += ": they repeat themselves (loops, padding, gibberish); a reward that counts something may be paying"
    examples = ",".join(str(rid) for _, rid in sorted(flagged, reverse=True)[:EXAMPLES])
    return [
        make_signal(
            "repetition",
            fired,
            "Repetitive completions" if fired else "Repetition",
            detail,
            recent_steps[-1],
            browse_url(run, ids=examples, sort="step_asc"),
        )
    ]


def recent_texts(run: Run, recent_steps: list[int]) -> list[tuple]:
    """(id, step, group, prompt_key, the completion's opening, its end, the gold answer) of the recent steps'
    rollouts, newest first, at most ``TEXT_ROWS``: what the text detectors read. The database cuts the completions
    (``COMPARED_CHARS`` each end), so a long one costs no more than a short one."""
    if not recent_steps:
        return []
    return list(
        Rollout.objects.filter(run=run, step__in=recent_steps)
        .order_by("-step", "index")
        .values_list(
            "id",
            "step",
            "group",
            "prompt_key",
            Left(AsText("completion"), COMPARED_CHARS),
            Right(AsText("completion"), COMPARED_CHARS),
            "columns__answer",
        )[:TEXT_ROWS]
    )


def normalized(text: str) -> str:
    return " ".join(text.lower().split())


def shingles(text: str) -> Counter:
    """The character trigrams of a normalized text, counted (a text under three characters is its own)."""
    text = normalized(text)
    return Counter(text[i : i + 3] for i in range(max(1, len(text) - 2)))


def similarity(a: Counter, b: Counter) -> float:
    """Weighted Jaccard of two completions' trigrams: 1 for the same text, about 0.2 to 0.35 for two answers to one
    question in different words, 0.5 and more for one string with a few characters changed (``4444474444`` and
    ``4444444444``)."""
    shared = sum(min(n, b[gram]) for gram, n in a.items() if gram in b)
    union = a.total() + b.total() - shared
    return shared / union if union else 1.0


def group_diversity(run: Run, t: dict, rows: list[tuple]) -> list[dict]:
    """More than ``similar_groups_share`` of recent groups whose completions are near-identical: on average
    ``group_similarity`` or more alike to the next completion of their group (G comparisons a group, not G²). Such a
    group scores alike, so it teaches nothing, and the policy has stopped exploring (the demo's ``4444…`` group
    after group)."""
    groups: dict[tuple, list] = defaultdict(list)
    for rid, step, group, _key, opening, _end, _gold in rows:
        if (step, group) in groups or len(groups) < GROUPS_COMPARED:
            groups[(step, group)].append((rid, opening))
    groups = {k: g for k, g in groups.items() if len(g) > 1}
    if not groups:
        return []
    similar = []
    for key, members in sorted(groups.items()):
        grams = [shingles(text) for _, text in members[:8]]
        ring = statistics.fmean(similarity(grams[i - 1], grams[i]) for i in range(len(grams)))
        if ring >= t["group_similarity"]:
            similar.append(key)
    share = len(similar) / len(groups)
    fired = share > t["similar_groups_share"]
    steps = sorted({s for s, _ in groups})
    detail = (
        f"{len(similar)} of the {len(groups)} groups of the last {len(steps)} steps hold near-identical "
        f"completions (similarity {t['group_similarity']:g} or more)"
    )
    if fired:
        detail += (
            ": the policy writes the same thing for every sample, so groups score alike and exploration has "
            "stopped; read what it repeats"
        )
    ids: list[int] = []
    for key in similar:
        if len(ids) + len(groups[key]) > 2 * EXAMPLES:
            break
        ids += [rid for rid, _ in groups[key]]
    return [
        make_signal(
            "group_diversity",
            fired,
            "Groups of near-identical completions" if fired else "Diversity within groups",
            detail,
            steps[-1],
            browse_url(run, ids=",".join(map(str, ids)), sort="step_asc"),
        )
    ]


_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_RUN = re.compile(r"(.)\1{2,}")


def answer_key(text) -> str:
    """What a completion answers, for comparing across prompts, read from its last ``COMPARED_CHARS`` characters:
    the last \\boxed{} content, else the last number, else the normalized text (100 characters); lower case, runs of
    one character shortened to one (4444 is 4), so near-identical digit strings count as one answer."""
    text = str(text)[-COMPARED_CHARS:]
    at = text.rfind("\\boxed{")
    boxed = _BOXED.match(text, at) if at >= 0 else None
    numbers = _NUMBER.findall(text) if boxed is None else []
    answer = boxed.group(1) if boxed else numbers[-1] if numbers else normalized(text)[:100]
    return _RUN.sub(r"\1", answer.strip().lower())


def prompt_blind_answers(run: Run, t: dict, rows: list[tuple]) -> list[dict]:
    """One answer that is the most common answer of more than ``same_answer_share`` of the recent prompts (at least
    ``MIN_PROMPTS``) while it is not their gold answer: the answer does not depend on the question (the demo's
    ``4444…`` for every sum). Prompts whose gold answer it is do not count, so a dataset where many answers are
    alike (counts, yes/no) stays quiet while the policy answers them right."""
    answers: dict[str, Counter] = defaultdict(Counter)
    gold: dict[str, str] = {}
    for _rid, _step, _group, key, _opening, end, expected in rows:
        answers[key][answer_key(end)] += 1
        if expected is not None and str(expected).strip():
            gold[key] = answer_key(expected)
    if len(answers) < MIN_PROMPTS:
        return []
    common = {key: c.most_common(1)[0][0] for key, c in answers.items()}
    top, _ = Counter(common.values()).most_common(1)[0]
    blind = [key for key, a in common.items() if a == top and gold.get(key) != top]
    share = len(blind) / len(answers)
    fired = share > t["same_answer_share"]
    shown = top if len(top) <= 40 else top[:40] + "…"
    detail = (
        f"{share:.0%} of the {len(answers)} prompts of the recent steps get the same most common answer "
        f"{shown!r}, which is not their gold answer"
    )
    if fired:
        detail += (
            ": the answer does not depend on the question; the policy found one output the reward pays for "
            "whatever it is asked"
        )
    per_prompt: dict[str, list[int]] = defaultdict(list)
    wanted = set(blind)
    for rid, _step, _group, key, _opening, end, _expected in reversed(rows):
        if key in wanted and len(per_prompt[key]) < 2 and answer_key(end) == top:
            per_prompt[key].append(rid)
    ids = [rid for key in blind for rid in per_prompt[key]][:EXAMPLES]
    return [
        make_signal(
            "prompt_blind_answers",
            fired,
            "The same answer for every prompt" if fired else "Answers vary with the prompt",
            detail,
            max(step for _, step, *_ in rows),
            browse_url(run, ids=",".join(map(str, sorted(ids))), sort="step_asc"),
        )
    ]
