"""Verdicts on alerts (issue 39, item 5): a health or detector alert links to the rollouts behind it; a reviewer
confirms it or dismisses it as a false alarm, which labels those rollouts ("confirmed: <alert>", "false alarm:
<alert>") and is kept for the evidence the alert showed. A dismissed alert is not raised again for the same evidence;
new evidence (other rollouts, another step) raises it again."""

from __future__ import annotations

import hashlib
from urllib.parse import urlsplit

from django.contrib.auth import get_user_model
from django.db import transaction
from django.http import QueryDict

from runs.models import AlertVerdict, Run
from runs.rollouts.filters import RolloutFilterForm, filtered, sorted_rows
from runs.rollouts.labels import labels_create

MAX_LABELED = 200  # rollouts one verdict labels (an alert's examples are 20)
VERDICTS = {"confirm": AlertVerdict.Verdict.CONFIRMED, "dismiss": AlertVerdict.Verdict.DISMISSED}


def evidence_of(signal: dict) -> str:
    """A digest of what the alert shows: its link to the rollouts behind it, else its text."""
    seen = signal.get("url") or f"{signal.get('title')}|{signal.get('detail')}|{signal.get('step')}"
    return hashlib.sha256(f"{signal['key']}|{seen}".encode()).hexdigest()[:16]


def with_verdicts(run: Run, signals: list[dict]) -> list[dict]:
    """``signals`` with their evidence and the verdict on it, if any; a dismissed one's level is "dismissed"."""
    warned = [s for s in signals if s.get("level") == "warn"]
    for s in warned:
        s["evidence"] = evidence_of(s)
    verdicts = {
        (v.key, v.evidence): v
        for v in AlertVerdict.objects.filter(run=run, evidence__in=[s["evidence"] for s in warned])
    }
    names = dict(
        get_user_model().objects.filter(pk__in={v.user_id for v in verdicts.values()}).values_list("pk", "username")
    )
    for s in warned:
        v = verdicts.get((s["key"], s["evidence"]))
        if v is None:
            continue
        s["verdict"] = {
            "verdict": v.verdict,
            "by": names.get(v.user_id, "(deleted user)"),
            "at": v.created_at.isoformat(),
            "labeled": v.labeled,
        }
        if v.verdict == AlertVerdict.Verdict.DISMISSED:
            s["level"] = "dismissed"
    return signals


def _evidence_rollouts(run: Run, url: str) -> list[int]:
    """The rollouts an alert's link shows, in the browser's order, the first MAX_LABELED."""
    query = QueryDict(urlsplit(url).query)
    form = RolloutFilterForm(query, run=run)
    if not form.is_valid():
        return []
    data = form.cleaned_data
    qs = sorted_rows(filtered(run, data), data.get("sort") or "adv_desc")
    return list(qs.values_list("id", flat=True)[:MAX_LABELED])


def alert_verdict(*, run: Run, user, signals: list[dict], key: str, evidence: str, verdict: str, note: str = ""):
    """Confirm or dismiss the alert ``key`` raised now with ``evidence`` (LookupError when it is not), labeling the
    rollouts behind it; the verdict replaces an earlier one on the same evidence."""
    if verdict not in VERDICTS:
        raise ValueError(f"verdict: confirm or dismiss, not {str(verdict)[:40]!r}")
    signal = next(
        (
            s
            for s in signals
            if s.get("key") == key and s.get("level") in ("warn", "dismissed") and evidence_of(s) == evidence
        ),
        None,
    )
    if signal is None:
        raise LookupError("no such alert is raised now (its evidence may have changed: reload the run page)")
    ids = _evidence_rollouts(run, signal["url"]) if signal.get("url") else []
    short = key.removeprefix("detector/").replace("_", " ")
    name = f"{'confirmed' if verdict == 'confirm' else 'false alarm'}: {short}"[:64]
    text = f"{signal['title']}: {signal['detail']}"[:3000] + (f"\n{note}" if note else "")
    with transaction.atomic():
        if ids:
            labels_create(run=run, user=user, items=[{"name": name, "rollout": i, "note": text} for i in ids])
        AlertVerdict.objects.update_or_create(
            run=run,
            key=key,
            evidence=evidence,
            defaults={"verdict": VERDICTS[verdict], "note": note, "labeled": len(ids), "user": user},
        )
    return len(ids)
