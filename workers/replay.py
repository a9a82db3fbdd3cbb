"""The reward replay's scorer: the replayed reward functions called the way TRL calls them (completions, prompts,
the row's columns by name, in batches of one step), built-ins in process and users' code in the sandbox (a run
trained elsewhere: the source its client sent, or the user's edit of it), one worker per function for the whole
replay. A reward of such a run whose source did not come with it (``stored``) is not called: its stored rewards
stand. The arithmetic and the storing are ``runs.rollouts`` services."""

from __future__ import annotations

import dataclasses

from billiard.process import current_process
from django.conf import settings
from grpo_web_protocol.config import RewardSpec

from rewards.builtins import BUILTINS
from rewards.selectors import reward_specs
from runs.models import Replay
from runs.rollouts.services import replay_execute
from workers.training.rewarding import SandboxedReward


class ReplayScorer:
    """Callable ``(rows, rewards) -> per-row lists of per-function rewards`` (each row's prompt and completion as TRL
    passed them: runs.rollouts.selectors.reward_inputs); close() ends its sandboxes."""

    def __init__(self, rewards: list[dict], *, slot_base: int, allow_weak: bool, max_faults: int = 3):
        self.funcs, self.closers = [], []
        fields = {f.name for f in dataclasses.fields(RewardSpec)}
        for slot, entry in enumerate(reward_specs(rewards)):
            if entry.get("stored"):
                self.funcs.append(StoredRewards(slot))
                continue
            spec = RewardSpec(**{k: v for k, v in entry.items() if k in fields})
            if spec.builtin:
                self.funcs.append(BUILTINS[spec.builtin])
            else:
                func = SandboxedReward(
                    spec, slot=slot_base + slot, events=None, max_faults=max_faults, allow_weak=allow_weak
                )
                self.funcs.append(func)
                self.closers.append(func)

    def __call__(self, rows: list[dict], rewards: list[dict]) -> list[list[float | None]]:
        completions = [r["completion"] for r in rows]
        prompts = [r["prompt"] for r in rows]
        names = sorted({k for r in rows for k in (r["columns"] or {})})
        columns = {k: [(r["columns"] or {}).get(k) for r in rows] for k in names if k not in ("prompts", "completions")}
        per_func = [
            f.values(rows) if isinstance(f, StoredRewards) else list(f(completions, prompts=prompts, **columns))
            for f in self.funcs
        ]
        return [[_plain(per_func[k][i]) for k in range(len(self.funcs))] for i in range(len(rows))]

    def close(self):
        for c in self.closers:
            c.close()


class StoredRewards:
    """A reward that cannot be called again (its source did not come with a run trained elsewhere): each row's
    stored value of it, as TRL logged it."""

    def __init__(self, position: int):
        self.position = position

    def values(self, rows: list[dict]) -> list:
        return [(r["rewards"] or [])[self.position] if self.position < len(r["rewards"] or []) else None for r in rows]


def _plain(value) -> float | None:
    return None if value is None or value != value else float(value)  # NaN (TRL's None) stored as None


def slot_base() -> int:
    """Sandbox slots of this pool process's replays: 2000 + 16 per Celery pool process, clear of the reward tests'
    (1 + index) and the training runs' (100 + 16 × index)."""
    return 2000 + 16 * (getattr(current_process(), "index", 0) or 0)


def replay_run(replay_id: int) -> None:
    replay = Replay.objects.get(pk=replay_id)
    try:
        scorer = ReplayScorer(
            replay.rewards,
            slot_base=slot_base(),
            allow_weak=settings.GRPO_SANDBOX_ALLOW_WEAK,
            max_faults=settings.GRPO_REWARD_MAX_FAULTS,
        )
    except Exception as exc:
        replay.mark_failed(f"{type(exc).__name__}: {exc}")
        raise
    try:
        replay_execute(replay_id=replay_id, score=scorer)
    finally:
        scorer.close()
