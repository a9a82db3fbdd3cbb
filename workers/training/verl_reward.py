"""The run's reward functions as verl's ``compute_score(data_source, solution_str, ground_truth, extra_info)``.

verl loads this file by path (``reward.custom_reward_function.path``) and passes the run's config file as a keyword
(``reward_kwargs.config_path``). Each reward function runs as it does under TRL (workers.training.rewarding: built-ins in
process, user code only in its sandbox, faults counted and reported to the event log), called with the row's prompt
and columns as TRL would pass them. The result is verl's dict form: ``score`` (the weighted total, what verl's GRPO
normalises) and ``rewards/<name>`` per function (NaN where the function abstained), which verl carries into its
rollout dump. No Django here.
"""

from __future__ import annotations

import json
import math
import threading
from concurrent.futures import ThreadPoolExecutor

from grpo_web_protocol.config import TrainConfig
from grpo_web_protocol.events import EventWriter

from workers.training.rewarding import reward_functions

_lock = threading.Lock()
_scorers: dict[str, "Scorer"] = {}


class Scorer:
    """One process's reward functions for one run. The sandboxes live on one long-lived thread of their own (a
    sandbox dies with the thread that started it, and verl calls compute_score from a pool of threads)."""

    def __init__(self, config_path: str):
        self.config = TrainConfig.load(config_path)
        self.names = [r.name for r in self.config.rewards]
        self.events = EventWriter(self.config.event_log) if self.config.capture else None
        self.thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="grpo-web-rewards")
        self.funcs, self.weights, self.closers = self.thread.submit(self._start).result()

    def _start(self):
        return reward_functions(self.config, self.events)

    def score(self, completion: str, extra_info: dict) -> dict:
        return self.thread.submit(self._score, completion, extra_info).result()

    def _score(self, completion: str, extra_info: dict) -> dict:
        columns = json.loads(extra_info.get("columns") or "{}")
        prompt = json.loads(extra_info["prompt"]) if "prompt" in extra_info else None
        values = [
            func([completion], prompts=[prompt], **{k: [v] for k, v in columns.items()})[0] for func in self.funcs
        ]
        finite = [(float(v), w) for v, w in zip(values, self.weights) if v is not None and math.isfinite(v)]
        result = {"score": sum(v * w for v, w in finite) if finite else 0.0}
        for name, value in zip(self.names, values):
            result[f"rewards/{name}"] = float("nan") if value is None else float(value)
        return result

    def close(self):
        for closer in self.closers:
            self.thread.submit(closer.close).result()
        self.thread.shutdown()


def scorer(config_path: str) -> Scorer:
    with _lock:
        if config_path not in _scorers:
            _scorers[config_path] = Scorer(config_path)
        return _scorers[config_path]


def compute_score(data_source, solution_str, ground_truth, extra_info=None, *, config_path: str, **_):
    """verl's custom reward function contract; ``config_path`` comes from reward_kwargs."""
    return scorer(config_path).score(solution_str, dict(extra_info or {}))
