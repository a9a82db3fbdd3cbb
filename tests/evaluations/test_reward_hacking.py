"""The reward-hacking warning: training reward rising while held-out accuracy (periodic evaluations) stays flat, with
a link to the wrong held-out completions that still score high."""

from urllib.parse import parse_qs, urlsplit

import pytest
from django.urls import reverse

from tests.rollouts.inspect_data import eval_event, ingest, make_run, metrics_event

pytestmark = pytest.mark.django_db

RIGHT, WRONG, HACK = "<think>2 + 2 = 4</think> \\boxed{4}", "<think>2 + 2</think> \\boxed{5}", "<think></think>"


def _evals(accuracies: list[float], hacked: bool = False):
    """Periodic evaluations at steps 0, 4, 8, ... with 4 prompts x (3 samples + greedy); ``accuracies`` is the share
    of correct completions at each."""
    events = []
    for i, share in enumerate(accuracies):
        right = round(share * 4)
        completions = [(RIGHT, 1.0)] * right + [(HACK if hacked and i else WRONG, 0.0)] * (4 - right)
        events.append(eval_event(4 * i, [(f"What is {p} + 2?", completions) for p in range(4)]))
    return events


def _signal(client, run) -> dict | None:
    signals = client.get(reverse("run_health_json", args=[run.pk])).json()["signals"]
    return next((s for s in signals if s["key"] == "reward_hacking"), None)


def _run(owner, dataset_version, rewards: list[float], accuracies: list[float], hacked=False):
    run = make_run(owner, dataset_version)
    ingest(run, *[metrics_event(i + 1, reward=r) for i, r in enumerate(rewards)], *_evals(accuracies, hacked))
    return run


def test_rising_reward_with_flat_eval_accuracy_warns_and_links_the_wrong_high_scoring_completions(
    owner_client, owner, dataset_version
):
    run = _run(owner, dataset_version, [0.2, 0.25, 0.3, 0.6, 0.8, 0.9, 1.0, 1.1, 1.2], [0.25, 0.25, 0.25], hacked=True)
    signal = _signal(owner_client, run)
    assert signal["level"] == "warn" and signal["title"] == "Possible reward hacking"
    assert signal["step"] == 8 and "held-out mean@3 33%" in signal["detail"]
    latest = run.evaluations.get(step=8)
    assert signal["url"].startswith(reverse("evaluation_detail", args=[run.pk, latest.pk]) + "?correct=no")
    # the link's filter keeps wrong completions at the top of the held-out rewards: there are some to read
    floor = float(parse_qs(urlsplit(signal["url"]).query)["reward_min"][0])
    examples = latest.samples.filter(correct=False, reward__gte=floor)
    assert examples.exists() and all(s.completion == HACK for s in examples)
    page = owner_client.get(signal["url"])
    assert page.status_code == 200 and "&lt;think&gt;&lt;/think&gt;" in page.content.decode()


def test_reward_and_eval_accuracy_rising_together_is_fine(owner_client, owner, dataset_version):
    run = _run(owner, dataset_version, [0.2, 0.25, 0.3, 0.6, 0.8, 0.9, 1.0, 1.1, 1.2], [0.25, 0.5, 0.75])
    signal = _signal(owner_client, run)
    assert signal["level"] == "ok" and "rises with the reward" in signal["detail"]


def test_flat_reward_is_not_hacking(owner_client, owner, dataset_version):
    run = _run(owner, dataset_version, [0.5, 0.52, 0.49, 0.5, 0.51, 0.5, 0.5], [0.25, 0.25, 0.25])
    assert _signal(owner_client, run)["level"] == "ok"


def test_the_check_waits_for_three_evaluations_and_is_absent_without_any(owner_client, owner, dataset_version):
    run = _run(owner, dataset_version, [0.2, 0.4, 0.6, 0.8, 1.0], [0.25, 0.25])
    signal = _signal(owner_client, run)
    assert signal["level"] == "ok" and "needs three" in signal["detail"]
    plain = make_run(owner, dataset_version, name="no evals")
    ingest(plain, *[metrics_event(i + 1, reward=0.1 * i) for i in range(6)])
    assert _signal(owner_client, plain) is None
