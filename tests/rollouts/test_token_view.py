"""The token-level view's data: the step's groups say which have tokens, tokens.json serves a group's per-token values
from the run's shard with each completion's most clipped and least probable tokens, and only to those who may see
the run."""

import pytest
from django.urls import reverse

from tests.rollouts.inspect_data import ingest, make_run, rollouts_event
from tests.rollouts.token_data import TOKENS, write_step_shard

pytestmark = pytest.mark.django_db

GROUPS = [
    ("What is 2 + 2?", [("4 is it", [1.0, 1.0]), ("5", [0.0, 1.0]), ("4.", [1.0, 0.0]), ("22", [0.0, 0.0])]),
    ("What is 3 + 3?", [("6", [1.0, 0.5])] * 4),
]


@pytest.fixture
def run(owner, dataset_version):
    run = make_run(owner, dataset_version)
    ingest(run, rollouts_event(1, GROUPS), rollouts_event(2, GROUPS))
    write_step_shard(run, step=1, group=0)
    return run


def tokens_json(client, run, step=1, **params):
    return client.get(reverse("run_step_tokens_json", args=[run.pk, step]), params)


def test_the_step_view_names_the_groups_with_tokens(owner_client, run):
    step1 = owner_client.get(reverse("run_step_json", args=[run.pk, 1])).json()
    step2 = owner_client.get(reverse("run_step_json", args=[run.pk, 2])).json()
    assert step1["token_groups"] == [0]
    assert step2["token_groups"] == []  # no shard for step 2


def test_a_groups_tokens_come_with_every_value_the_shard_holds(owner_client, run):
    data = tokens_json(owner_client, run, group=0).json()
    assert [c["index"] for c in data["completions"]] == [0, 1, 2, 3]
    first = data["completions"][0]
    assert first["tokens"] == TOKENS[0][0]
    assert first["values"]["old_logprob"] == pytest.approx(TOKENS[0][1])
    assert first["values"]["ratio"] == pytest.approx(TOKENS[0][2])
    assert first["values"]["sampling_logprob"] is None
    assert first["clipped"] == [False, True, False, True]
    # the select offers what the shard has: no sampler's log-probabilities without vLLM
    assert [f["name"] for f in data["fields"]] == [
        "logprob",
        "old_logprob",
        "ref_logprob",
        "entropy",
        "ratio",
        "clipped",
    ]


def test_each_completion_lists_its_most_clipped_and_least_probable_tokens(owner_client, run):
    first = tokens_json(owner_client, run, group=0).json()["completions"][0]
    # clipped: " is" (ratio 1.3, high) and the last token (0.7, low); the ratio farthest from 1 first
    assert [(t["text"], t["side"]) for t in first["most_clipped"]] == [
        ("<script>window.pwned=1</script>", "low"),
        (" is", "high"),
    ]
    # least probable at generation: log-probabilities -4.0, -2.5, -0.7, -0.1
    assert [t["position"] for t in first["least_probable"]] == [3, 1, 2, 0]
    assert first["least_probable"][0]["prob"] == pytest.approx(2.718281828**-4.0)
    unclipped = tokens_json(owner_client, run, group=0).json()["completions"][3]
    assert unclipped["most_clipped"] == []


def test_a_step_or_group_without_tokens_is_empty_and_a_bad_group_is_refused(owner_client, run):
    assert tokens_json(owner_client, run, step=2).json()["completions"] == []
    assert tokens_json(owner_client, run, group=1).json()["completions"] == []
    response = tokens_json(owner_client, run, group="zero")
    assert response.status_code == 400
    assert "group" in response.json()["errors"]


def test_a_damaged_shard_shows_no_tokens_instead_of_failing(owner_client, run):
    (run.run_dir / "tokens" / "step-000002.parquet").write_bytes(b"not parquet")
    assert tokens_json(owner_client, run, step=2).json()["completions"] == []
    assert owner_client.get(reverse("run_step_json", args=[run.pk, 2])).json()["token_groups"] == []


def test_an_outsider_gets_404(outsider_client, run):
    assert tokens_json(outsider_client, run, group=0).status_code == 404
