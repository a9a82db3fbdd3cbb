"""In chromium: a tiny run trained by a real worker, then its base model (the cold-started tiny model, which answers
now and then) and its final model evaluated from the run page's form on the same held-out prompts. Both rows show
their figures as stored, the final model its change against the base model, and its completions can be browsed."""

import pytest
from transformers import AutoTokenizer

from rewards.models import RewardFunction
from runs.lifecycle.services import run_create
from runs.lifecycle.spec import RunSpec
from runs.models import Evaluation, Run
from tests.conftest import log_in, wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]

METRICS = ("mean@k", "pass@k", "maj@k", "greedy", "reward_mean@k")


def _evaluate(page, model: str, max_new_tokens: str | None = None) -> None:
    page.click("#evaluate-details > summary")
    page.select_option("#id_model", model)
    page.fill("#id_eval_num_samples", "2")
    page.fill("#id_eval_max_prompts", "4")
    assert page.input_value("#id_eval_max_new_tokens") == "16"  # the run's generation length, shown
    if max_new_tokens:
        page.fill("#id_eval_max_new_tokens", max_new_tokens)
    page.click("#evaluate-button")
    page.wait_for_selector(f".flash:text('Queued an evaluation: {model} model.')")


def test_the_base_and_the_final_model_are_compared_on_the_run_page(
    web_server, celery_worker, owner, eval_version, coldstart_model, page
):
    rewards = [
        {
            "name": name,
            "weight": 1.0,
            "version_id": RewardFunction.objects.get(owner=owner, name=name).latest_version.pk,
        }
        for name in ("accuracy", "digit_ratio")
    ]
    run = run_create(
        owner=owner,
        spec=RunSpec(
            name="evaluated",
            model=str(coldstart_model),
            dataset_version=eval_version,
            rewards=rewards,
            config={"num_generations": 4, "per_device_train_batch_size": 8, "max_steps": 4, "save_steps": 0},
        ),
    )
    wait_for(lambda: run.refresh_from_db() or run.is_finished, timeout=180, what="the run to train")
    assert run.status == Run.Status.COMPLETED, run.error + run.log_tail

    log_in(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/#evaluations")
    page.wait_for_selector("#no-evaluations", state="visible")
    _evaluate(page, "base")
    _evaluate(page, "final", max_new_tokens="4")
    for label in ("base model", "final model"):
        page.wait_for_selector(f'#evaluation-table tr[data-label="{label}"][data-status="completed"]', timeout=240_000)

    base, final = (Evaluation.objects.get(run=run, label=label) for label in ("base model", "final model"))
    for evaluation in (base, final):
        assert evaluation.status == Evaluation.Status.COMPLETED and evaluation.split == "eval"
        assert (evaluation.k, evaluation.prompts, evaluation.solved_by) == (2, 4, "accuracy")
        row = page.locator(f'#evaluation-table tr[data-id="{evaluation.pk}"]')
        assert row.locator('[data-field="model"]').inner_text() == evaluation.model
        for metric in METRICS:
            cell = row.locator(f'td[data-field="{metric}"]')
            assert float(cell.get_attribute("data-value")) == pytest.approx(evaluation.metrics[metric], abs=1e-12)
            assert float(cell.inner_text()) == pytest.approx(evaluation.metrics[metric], abs=5e-4)
        assert row.locator("a.browse").get_attribute("href") == f"/runs/{run.pk}/evaluations/{evaluation.pk}/"
    assert (base.model, base.step) == (str(coldstart_model), 0)
    assert (final.model, final.step) == (str(run.run_dir / "output" / "final"), 4)

    # each row states its generation settings, and the final model's completions were cut at the 4 tokens asked for
    generation = {e.label: page.inner_text(f'#evaluation-table tr[data-id="{e.pk}"] [data-field="generation"]')
                  for e in (base, final)}  # fmt: skip
    assert generation == {"base model": "T=1 · 16 tokens", "final model": "T=1 · 4 tokens"}
    tokenizer = AutoTokenizer.from_pretrained(coldstart_model)
    longest = max(len(tokenizer(s.completion, add_special_tokens=False).input_ids) for s in final.samples.all())
    assert 0 < longest <= 4 < max(len(tokenizer(s.completion).input_ids) for s in base.samples.all())

    base_row = page.locator(f'#evaluation-table tr[data-id="{base.pk}"]')
    assert base_row.locator('td[data-field="delta"]').inner_text() == "base"
    deltas = page.locator(f'#evaluation-table tr[data-id="{final.pk}"] td[data-field="delta"]')
    assert deltas.get_attribute("title") == f"against base model (evaluation {base.pk})"
    for metric in METRICS:
        change = final.metrics[metric] - base.metrics[metric]
        item = deltas.locator(f'[data-metric="{metric}"]')
        assert float(item.get_attribute("data-value")) == pytest.approx(change, abs=1e-12)
        name, shown = item.inner_text().split()
        assert name == metric and shown[0] in "+-" and float(shown) == pytest.approx(change, abs=5e-4)

    # the final model's completions, browsed: 4 prompts of k=2 samples and one greedy completion each
    page.click(f'#evaluation-table tr[data-id="{final.pk}"] a.browse')
    page.wait_for_selector("#eval-prompts .transcript")
    assert page.locator("article.eval-prompt").count() == 4
    assert page.locator("article.eval-prompt tbody tr").count() == final.samples.count() == 12
    assert page.locator("pre.eval-completion").count() == 0  # each one rebuilt as a transcript
