"""The training program: everything that runs in the training process (``python -m workers.training.train``, ``sft``,
``evaluate``, ``verl_run``, ``ray_train``), and the protocol it speaks with the app (``grpo_web_protocol``:
the run config, the event log, TRL's field lists). It imports no Django, Celery, database or Redis (an import-linter
contract), so it runs, and is tested, without them; torch, transformers, trl, accelerate and peft are imported only
here, lazily where the web side reads the protocol."""

from pathlib import Path

APP_FOLDER = (
    Path(__file__).resolve().parents[2]
)  # the grpo-web checkout the program runs from (its git state is recorded)
