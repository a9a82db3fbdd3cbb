"""An SFT run's page speaks of SFT: its health signals read SFTTrainer's loss and token accuracy, and nothing there
speaks of GRPO's groups, advantages, KL, zero variance or reward hacking (issue 28, item 13)."""

import re

import pytest
from django.urls import reverse

from tests.rollouts.inspect_data import ingest, make_run, metrics_event

pytestmark = pytest.mark.django_db

GRPO_WORDS = re.compile(r"advantage|KL|beta|group|zero.variance|reward.hacking|entropy", re.IGNORECASE)


def test_an_sft_runs_health_and_page_name_no_grpo_signal(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version, rewards=(), kind="sft")
    losses = [0.0009, 0.0008, 0.0007, 0.0006, 0.0005]  # near zero: GRPO's "near-zero loss, as expected" would fire
    ingest(
        run,
        *[
            metrics_event(step, loss=loss, entropy=0.01, mean_token_accuracy=0.5 + step / 20)
            for step, loss in enumerate(losses, start=1)
        ],
    )
    signals = owner_client.get(reverse("run_health_json", args=[run.pk])).json()["signals"]
    assert [(s["key"], s["level"], s["title"]) for s in signals] == [
        ("sft_loss", "ok", "Training loss"),
        ("token_accuracy", "ok", "Token accuracy"),
    ]
    assert signals[1]["detail"] == "75.0% of the training completions' next tokens predicted right at step 5"
    assert not [s for s in signals if GRPO_WORDS.search(s["title"] + s["detail"])]

    page = owner_client.get(reverse("run_detail", args=[run.pk])).content.decode()
    assert 'id="detector-thresholds"' not in page and 'id="chart-zero-variance"' not in page
