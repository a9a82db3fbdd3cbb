"""What does periodic evaluation cost? The same seeded tiny GRPO run, without and with eval every N steps.

    python -m bench.eval_overhead [--rounds 3] [--steps 20] [--eval-steps 5] [--k 4] [--prompts 16]   (repo root)

Both variants are built by ``workers.training.train.make_trainer`` from one config and differ only in ``eval_steps``. Rounds
alternate the two so slow drift of the machine hits both alike. Figures, medians over rounds:

- training time per completion: the run without eval, its wall time over the completions it trained on;
- extra time per eval sample: (wall time with eval - wall time without) over the eval completions generated and
  scored (k samples + 1 greedy per eval prompt, at step 0, every N steps and at the end), and, as a cross-check,
  the time the evaluations themselves report (``seconds`` in their events) over the same count.

Evaluation must not change training: the random state is forked around it, so both variants must log the same
trajectory (checked, printed). The last line is ``eval_cost_ratio=<extra time per eval sample / training time per
completion>``.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

if __package__ in (None, ""):  # run as a file (python bench/eval_overhead.py): make `workers` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.registry import parse_args  # noqa: E402 (after the path is set)


def make_config(model_dir: Path, tmp: Path, work: Path, args, with_eval: bool):
    from grpo_web_protocol.config import EvalFields, GRPOFields, RewardSpec, TrainConfig

    return TrainConfig(
        model=str(model_dir),
        dataset_path=str(tmp / "train.jsonl"),
        output_dir=str(work / "out"),
        event_log=str(work / "events.jsonl"),
        rewards=[RewardSpec("format", 1.0, builtin="think_format"), RewardSpec("correct", 2.0, builtin="accuracy")],
        grpo=GRPOFields(max_steps=args.steps, seed=args.seed, save_steps=0, max_completion_length=32),
        evaluation=EvalFields(
            eval_steps=args.eval_steps if with_eval else 0, eval_num_samples=args.k, eval_max_prompts=args.prompts
        ),
        eval_dataset_path=str(tmp / "eval.jsonl"),
    )


def run_once(config) -> dict:
    from grpo_web_protocol.events import EventWriter, read_events
    from transformers import PrinterCallback

    from workers.training.train import make_trainer

    events = EventWriter(config.event_log)
    trainer = make_trainer(config, events)
    trainer.remove_callback(PrinterCallback)
    started = time.perf_counter()
    try:
        trainer.train()
    finally:
        events.close()
    wall = time.perf_counter() - started
    logged = read_events(config.event_log)[0]
    evals = [e for e in logged if e["type"] == "eval"]
    out = {
        "wall": wall,
        "completions": sum(len(e["rows"]) for e in logged if e["type"] == "rollouts"),
        "eval_samples": sum(e["samples"] for e in evals),
        "eval_reported": sum(e["seconds"] for e in evals),
        "evaluations": len(evals),
        "trajectory": [
            tuple(entry.get(k) for k in ("loss", "grad_norm", "reward"))
            for entry in trainer.state.log_history
            if "loss" in entry
        ],
    }
    for closer in trainer.reward_closers:
        closer.close()
    del trainer
    gc.collect()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--eval-steps", type=int, default=5)
    parser.add_argument("--k", type=int, default=4, help="samples per eval prompt (plus one greedy)")
    parser.add_argument("--prompts", type=int, default=16, help="eval prompts")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--seed", type=int, default=42)
    args = parse_args(parser, argv, rounds=1, steps=4, eval_steps=2, k=2, prompts=4)

    import torch
    from transformers.utils import logging as hf_logging

    torch.set_num_threads(args.threads)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    warnings.filterwarnings("ignore")

    from grpo_web_protocol.demo_data import arithmetic_rows

    from workers.training.tinymodel import build_tiny_model

    results: dict[str, list[dict]] = {"without eval": [], "with eval": []}
    same_training = True
    with tempfile.TemporaryDirectory(prefix="eval-overhead-") as tmp:
        tmp = Path(tmp)
        model_dir = build_tiny_model(tmp / "model")
        rows = arithmetic_rows(300, seed=args.seed)
        (tmp / "train.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:250]))
        (tmp / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[250:]))
        for r in range(args.rounds):
            for name in results:
                config = make_config(model_dir, tmp, tmp / f"r{r}-{name.replace(' ', '-')}", args, name == "with eval")
                result = run_once(config)
                results[name].append(result)
                print(
                    f"round {r + 1}/{args.rounds} {name:<13} {result['wall']:6.2f} s, "
                    f"{result['completions']} training completions, {result['evaluations']} evaluations, "
                    f"{result['eval_samples']} eval samples",
                    flush=True,
                )
            same_training &= results["without eval"][-1]["trajectory"] == results["with eval"][-1]["trajectory"]

    plain, with_eval = results["without eval"], results["with eval"]
    per_completion = statistics.median(p["wall"] / p["completions"] for p in plain)
    extra = statistics.median((w["wall"] - p["wall"]) / w["eval_samples"] for p, w in zip(plain, with_eval))
    reported = statistics.median(w["eval_reported"] / w["eval_samples"] for w in with_eval)
    print()
    print(
        f"{args.rounds} rounds x {args.steps} steps, eval every {args.eval_steps} steps on {args.prompts} prompts "
        f"x ({args.k} samples + 1 greedy), torch threads={args.threads}"
    )
    print(f"training time per completion:        {1000 * per_completion:8.2f} ms")
    print(f"extra wall time per eval sample:     {1000 * extra:8.2f} ms")
    print(f"eval time per sample, as reported:   {1000 * reported:8.2f} ms (generation + scoring, in the events)")
    print(f"training identical with and without eval: {'yes' if same_training else 'NO'}")
    print(f"eval_cost_ratio={extra / per_completion:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
