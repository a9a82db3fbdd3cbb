"""What does a recipe cost over running its stages by hand? A 3-stage recipe (SFT -> rejection sampling -> SFT) on
the demo data with the tiny model, against the same three stages started one after another by a script that polls
for each to finish (an attentive person at best).

    python -m bench.recipe_overhead [--rounds 1] [--sft-steps 20]   (repo root)

One real Celery worker (training, default, sandbox and checks queues, one process) runs everything, on a
data folder of its own (SQLite and the embedded Redis unless DATABASE_URL / REDIS_URL say otherwise). Rounds
alternate the two so drift hits both alike. The last line is ``recipe_overhead_ratio=<median recipe wall time /
median by-hand wall time>`` (goal <= 1.05).
"""

from __future__ import annotations

import argparse
import io
import json
import statistics
import subprocess
import sys
import time

from bench.registry import parse_args
from bench.webapp import ROOT, django_on_a_data_folder, stop
from workers.processes import celery_worker_command

POLL = 0.5


def wait(predicate, timeout=1800):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError("a stage did not finish")
        time.sleep(POLL)


def stages(prompts, worked, sft_steps):
    from grpo_web_protocol.config import SFT_FIELDS

    sft = {k: f.default for k, f in SFT_FIELDS.items()} | {
        "max_steps": sft_steps,
        "per_device_train_batch_size": 16,
        "save_steps": 0,
    }
    return [
        {"kind": "sft", "name": "teacher SFT", "model": "tiny", "dataset": worked.pk, "config": sft},
        {
            "kind": "rejection_sample",
            "name": "sample",
            "model": "stage:1",
            "dataset": prompts.pk,
            # accuracy is scored as before, but the tiny model after a short SFT solves nothing, and a stage that
            # keeps nothing stops the recipe: samples are kept by digit_ratio >= 0, which each one reaches
            "rewards": ["accuracy", "digit_ratio"],
            "mix": worked.pk,
            "settings": {
                "k": 4,
                "solved_by": "digit_ratio",
                "threshold": 0.0,
                "max_per_prompt": 1,
                "max_prompts": 16,
                "max_new_tokens": 24,
                "mix_rows": 16,
            },
        },
        {"kind": "sft", "name": "student SFT", "model": "tiny", "dataset": "stage:2", "config": sft},
    ]


def handoff_seconds(stages) -> float:
    """Seconds between one stage's end and the next stage's creation, summed: what the hand-off costs, apart from
    the stages' own work (each from its creation, queue wait and process start-up included, to its end)."""
    return sum((b.created_at - a.finished_at).total_seconds() for a, b in zip(stages, stages[1:]))


HANDOFFS: dict[str, list[float]] = {"by_hand": [], "recipe": []}


def by_hand(owner, plan) -> float:
    from runs.lifecycle.services import run_create
    from runs.lifecycle.spec import RunSpec
    from runs.models import DatasetVersion, RejectionJob, Run
    from runs.recipes.services import pinned_rewards
    from runs.sampling.services import RejectionSettings, rejection_job_create

    started = time.perf_counter()
    first = run_create(
        owner=owner,
        spec=RunSpec(
            name="by hand 1",
            model="tiny",
            kind="sft",
            rewards=[],
            config=plan[0]["config"],
            dataset_version=DatasetVersion.objects.get(pk=plan[0]["dataset"]),
        ),
        check_rewards=False,
    )
    wait(lambda: Run.objects.get(pk=first.pk).is_finished)
    job = rejection_job_create(
        owner=owner,
        name="by hand 2",
        model=str(first.run_dir / "output" / "final"),
        dataset_version=DatasetVersion.objects.get(pk=plan[1]["dataset"]),
        rewards=pinned_rewards(owner, plan[1]["rewards"]),
        settings=RejectionSettings(**plan[1]["settings"]),
        mix_version=DatasetVersion.objects.get(pk=plan[1]["mix"]),
    )
    wait(lambda: RejectionJob.objects.get(pk=job.pk).is_finished)
    job.refresh_from_db()
    last = run_create(
        owner=owner,
        spec=RunSpec(
            name="by hand 3",
            model="tiny",
            kind="sft",
            rewards=[],
            config=plan[2]["config"],
            dataset_version=job.output_version,
        ),
        check_rewards=False,
    )
    wait(lambda: Run.objects.get(pk=last.pk).is_finished)
    elapsed = time.perf_counter() - started
    assert Run.objects.get(pk=last.pk).status == "completed"
    HANDOFFS["by_hand"].append(
        handoff_seconds(
            [Run.objects.get(pk=first.pk), RejectionJob.objects.get(pk=job.pk), Run.objects.get(pk=last.pk)]
        )
    )
    return elapsed


def as_recipe(owner, plan) -> float:
    from runs.models import Recipe
    from runs.recipes.services import recipe_create, recipe_start

    recipe = recipe_create(owner=owner, name="bench", stages=plan)
    started = time.perf_counter()
    recipe_start(recipe=recipe)
    wait(lambda: Recipe.objects.get(pk=recipe.pk).status != "running")
    elapsed = time.perf_counter() - started
    recipe.refresh_from_db()
    assert recipe.status == "completed", recipe.error
    from runs.models import RejectionJob, Run

    HANDOFFS["recipe"].append(
        handoff_seconds(
            [
                Run.objects.get(pk=recipe.outputs[0]["run"]),
                RejectionJob.objects.get(pk=recipe.outputs[1]["job"]),
                Run.objects.get(pk=recipe.outputs[2]["run"]),
            ]
        )
    )
    return elapsed


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--sft-steps", type=int, default=20)
    args = parse_args(parser, argv, sft_steps=2)
    with django_on_a_data_folder("grpo-bench-recipe-") as env:
        from django.conf import settings
        from django.contrib.auth import get_user_model
        from grpo_web_protocol.demo_data import arithmetic_rows

        from runs.datasets.services import dataset_import
        from workers.training.coldstart import cold_start_rows
        from workers.training.tinymodel import build_tiny_model

        build_tiny_model(settings.GRPO_TINY_MODEL_DIR)
        owner = get_user_model().objects.create_user(username="bench", password="bench")
        prompts = dataset_import(
            owner=owner,
            name="arithmetic",
            source_name="a.jsonl",
            stream=io.BytesIO("".join(json.dumps(r) + "\n" for r in arithmetic_rows(64)).encode()),
        )
        worked = dataset_import(
            owner=owner,
            name="worked",
            source_name="w.jsonl",
            stream=io.BytesIO("".join(json.dumps(r) + "\n" for r in cold_start_rows(64)).encode()),
        )
        plan = stages(prompts, worked, args.sft_steps)
        worker = subprocess.Popen(
            celery_worker_command("training,default,sandbox,checks", "bench@%h", loglevel="WARNING"),
            cwd=ROOT,
            env=env,
            start_new_session=True,
        )
        try:
            time.sleep(5)
            hand, recipe = [], []
            for n in range(args.rounds):
                for name, fn, out in (("by_hand", by_hand, hand), ("recipe", as_recipe, recipe))[
                    :: 1 if n % 2 == 0 else -1
                ]:
                    out.append(fn(owner, plan))
                    print(f"round {n + 1} {name}: {out[-1]:.1f} s (hand-offs {HANDOFFS[name][-1]:.2f} s)", flush=True)
        finally:
            stop(worker)
    print(f"by_hand_handoff_s={statistics.median(HANDOFFS['by_hand']):.2f}")
    print(f"recipe_handoff_s={statistics.median(HANDOFFS['recipe']):.2f}")
    print(f"by_hand_s={statistics.median(hand):.1f}")
    print(f"recipe_s={statistics.median(recipe):.1f}")
    print(f"recipe_overhead_ratio={statistics.median(recipe) / statistics.median(hand):.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
