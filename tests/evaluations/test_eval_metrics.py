"""Periodic evaluation during a real run: a cold-started tiny model trained by a real Celery worker, evaluated every 2
steps on the eval split; the stored figures are checked against a direct computation on the stored completions."""

from collections import Counter, defaultdict

import pyarrow.parquet as pq
import pytest

from rewards.library.accuracy import last_boxed
from rewards.models import RewardFunction
from runs.datasets.mapping import Mapping, build_prompt, eval_mask
from runs.lifecycle.services import RunRefused, run_create
from runs.lifecycle.spec import RunSpec
from runs.models import EvalSample, Evaluation, Run, StepMetric
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]

K, PROMPTS = 4, 12


def _rewards(owner):
    return [
        {
            "name": name,
            "weight": weight,
            "version_id": RewardFunction.objects.get(owner=owner, name=name).latest_version.pk,
        }
        for name, weight in (("accuracy", 1.0), ("think_format", 0.5))
    ]


def _config(**overrides):
    return {
        "num_generations": 4,
        "max_completion_length": 24,
        "learning_rate": 1e-3,
        "beta": 0.0,
        "max_steps": 4,
        "per_device_train_batch_size": 8,
        "seed": 5,
        "save_steps": 0,
        **overrides,
    }


def _expected(samples: list[EvalSample]) -> dict:
    """mean@k, pass@k, maj@k and greedy accuracy computed here, from the stored rows alone."""
    by_prompt = defaultdict(list)
    greedy = {}
    for s in samples:
        if s.greedy:
            greedy[s.prompt_index] = s
        else:
            by_prompt[s.prompt_index].append(s)
    mean_k = pass_k = maj_k = 0.0
    for index, group in by_prompt.items():
        group.sort(key=lambda s: s.sample)
        assert len(group) == K
        mean_k += sum(s.correct for s in group) / K
        pass_k += any(s.correct for s in group)
        votes = Counter(s.answer for s in group if s.answer)
        if votes:
            top = max(votes.values())
            winner = next(s for s in group if s.answer and votes[s.answer] == top)  # ties: the answer seen first
            maj_k += winner.correct
    n = len(by_prompt)
    return {
        "mean@k": mean_k / n,
        "pass@k": pass_k / n,
        "maj@k": maj_k / n,
        "greedy": sum(s.correct for s in greedy.values()) / n,
    }


def test_eval_every_two_steps_stores_figures_that_match_the_stored_completions(
    celery_worker, owner, eval_version, coldstart_model
):
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="eval",
            model=str(coldstart_model),
            dataset_version=eval_version,
            rewards=_rewards(owner),
            config=_config(),
            evaluation={"eval_steps": 2, "eval_num_samples": K, "eval_max_prompts": PROMPTS},
        ),
    )
    wait_for(lambda: Run.objects.get(pk=run.pk).is_finished, timeout=300, what="the run to finish")
    run.refresh_from_db()
    assert run.status == Run.Status.COMPLETED, run.error + run.log_tail

    evaluations = list(Evaluation.objects.filter(run=run).order_by("step"))
    assert [(e.kind, e.step, e.status) for e in evaluations] == [("periodic", s, "completed") for s in (0, 2, 4)]

    # the eval prompts are the first rows of the held-out split, as the trainer's prompts are built
    held_out = eval_mask(eval_version.path, Mapping.of(eval_version))
    rows = pq.read_table(eval_version.path).to_pylist()
    eval_prompts = [build_prompt(Mapping.of(eval_version), r) for r, out in zip(rows, held_out) if out][:PROMPTS]

    metrics = {m.step: m.metrics for m in StepMetric.objects.filter(run=run)}
    all_correct = []
    for evaluation in evaluations:
        samples = list(evaluation.samples.all())
        assert len(samples) == PROMPTS * (K + 1) and evaluation.k == K and evaluation.prompts == PROMPTS
        assert [s.prompt for s in samples if s.greedy] == eval_prompts
        assert evaluation.solved_by == "accuracy"
        for s in samples:
            # correct means the accuracy reward (the run's first) is at least the threshold; the vote reads the
            # \boxed{} answer where there is one
            assert s.correct == (s.rewards[0] is not None and s.rewards[0] >= 1.0)
            boxed = last_boxed(s.completion)
            if boxed and boxed.strip() and "," not in boxed:
                assert s.answer == "".join(boxed.split()).replace("$", "").rstrip(".")
            all_correct.append(s.correct)

        expected = _expected(samples)
        for key in ("mean@k", "pass@k", "maj@k", "greedy"):
            assert evaluation.metrics[key] == pytest.approx(expected[key]), key
        # the same figures as curves, under verl's names, at the evaluated step
        curves = metrics[evaluation.step]
        assert curves[f"val-core/arithmetic/acc/pass@{K}"] == pytest.approx(expected["pass@k"])
        assert curves[f"val-core/arithmetic/acc/maj@{K}/mean"] == pytest.approx(expected["maj@k"])
        assert curves[f"val-core/arithmetic/acc/mean@{K}"] == pytest.approx(expected["mean@k"])
        assert curves["val-core/arithmetic/acc/greedy"] == pytest.approx(expected["greedy"])
    # the cold-started model is right sometimes and wrong sometimes: the figures above are not trivially 0 or 1
    assert 0 < sum(all_correct) < len(all_correct)
    # the final policy is saved for later standalone evaluations
    assert (run.run_dir / "output" / "final" / "config.json").is_file()


def test_eval_steps_needs_an_eval_split(owner, dataset_version, tiny_model):
    with pytest.raises(RunRefused) as refused:
        run_create(
            owner=owner,
            spec=RunSpec(
                name="no split",
                model="tiny",
                dataset_version=dataset_version,
                rewards=_rewards(owner),
                config=_config(),
                evaluation={"eval_steps": 2},
            ),
        )
    assert any(e.startswith("eval_steps:") and "no eval split" in e for e in refused.value.errors)
    with pytest.raises(RunRefused) as refused:
        run_create(
            owner=owner,
            spec=RunSpec(
                name="bad criterion",
                model="tiny",
                dataset_version=dataset_version,
                rewards=_rewards(owner),
                config=_config(),
                evaluation={"eval_solved_by": "nope"},
            ),
        )
    assert any(e.startswith("eval_solved_by:") and "'nope'" in e for e in refused.value.errors)
    assert not Run.objects.exists()
