"""One step's groups: completions ranked by advantage, TRL's mean and std beside them, the formula's scale for each
scale_rewards, and zero-variance groups flagged (their count agreeing with TRL's frac_reward_zero_std)."""

import pytest
from django.urls import reverse

from tests.rollouts.inspect_data import ingest, make_run, rollouts_event

pytestmark = pytest.mark.django_db

GROUPS = [
    ("What is 2 + 2?", [("4", [1.0, 1.0]), ("5", [0.0, 1.0]), ("4.", [1.0, 0.0]), ("22", [0.0, 0.0])]),
    ("What is 3 + 3?", [("6", [1.0, 0.5]), ("6", [1.0, 0.5]), ("6", [1.0, 0.5]), ("6", [1.0, 0.5])]),
]


def step_json(client, run, step=1):
    response = client.get(reverse("run_step_json", args=[run.pk, step]))
    assert response.status_code == 200
    return response.json()


@pytest.mark.parametrize("scale_rewards", ["group", "batch", "none"])
def test_the_formula_reproduces_the_stored_advantages(owner_client, owner, dataset_version, scale_rewards):
    run = make_run(owner, dataset_version, config={"scale_rewards": scale_rewards})
    ingest(run, rollouts_event(1, GROUPS, scale_rewards=scale_rewards))
    groups = step_json(owner_client, run)["groups"]
    first = groups[0]
    # totals 2, 1, 1, 0: mean 1, unbiased std sqrt(2/3)
    assert first["mean"] == pytest.approx(1.0)
    assert first["std"] == pytest.approx((2 / 3) ** 0.5)
    expected_scale = {
        "group": (2 / 3) ** 0.5,
        "none": None,
        # the batch: 2, 1, 1, 0, 1.5, 1.5, 1.5, 1.5
        "batch": pytest.approx(((sum((v - 1.25) ** 2 for v in [2, 1, 1, 0, 1.5, 1.5, 1.5, 1.5])) / 7) ** 0.5),
    }
    assert first["scale"] == (
        pytest.approx(expected_scale[scale_rewards]) if scale_rewards == "group" else expected_scale[scale_rewards]
    )
    # worked by hand from the definition (that TRL's own advantages agree is tests/workers/test_fidelity.py's job)
    scale = {"group": (2 / 3) ** 0.5 + 1e-4, "none": 1.0, "batch": (2.5 / 7) ** 0.5 + 1e-4}[scale_rewards]
    by_total = {c["reward"]: c["formula_advantage"] for c in first["completions"]}
    assert by_total == pytest.approx({2.0: 1.0 / scale, 1.0: 0.0, 0.0: -1.0 / scale})


def test_completions_are_ranked_by_advantage_with_rewards_by_name(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    ingest(run, rollouts_event(1, GROUPS))
    first = step_json(owner_client, run)["groups"][0]
    advantages = [c["advantage"] for c in first["completions"]]
    assert advantages == sorted(advantages, reverse=True)
    assert first["completions"][0]["rewards"] == {"accuracy": 1.0, "digit_ratio": 1.0}
    assert first["completions"][0]["completion"] == "4"


def test_a_group_whose_completions_all_score_the_same_is_flagged_and_stored_as_such(
    owner_client, owner, dataset_version
):
    run = make_run(owner, dataset_version)
    ingest(run, rollouts_event(1, GROUPS))
    groups = step_json(owner_client, run)["groups"]
    assert [g["zero_std"] for g in groups] == [False, True]
    assert groups[1]["std"] == 0.0
    assert [c["advantage"] for c in groups[1]["completions"]] == [0.0] * 4
    # the same flag, stored at ingest, is what the browser's zero-variance filter reads
    assert list(run.rollouts.filter(zero_std=True).order_by().values_list("group", flat=True).distinct()) == [1]


def test_the_share_of_flagged_groups_is_trls_frac_reward_zero_std(owner, dataset_version):
    """TRL flags a group when its std is within 1e-8 of zero; a group with a single scored completion is not."""
    run = make_run(owner, dataset_version)
    groups = GROUPS + [
        ("What is 4 + 4?", [("8", [1.0, 1.0]), ("?", [None, None]), ("?", [None, None]), ("?", [None, None])])
    ]
    ingest(run, rollouts_event(1, groups))
    flags = dict(run.rollouts.values_list("group", "zero_std").distinct())
    assert flags == {0: False, 1: True, 2: False}


def test_a_group_links_to_its_prompt_history(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    ingest(run, rollouts_event(1, GROUPS))
    group = step_json(owner_client, run)["groups"][0]
    assert owner_client.get(reverse("run_prompt", args=[run.pk, group["prompt_key"]])).status_code == 200


@pytest.mark.parametrize("scale_rewards", ["group", "batch"])
def test_a_step_comes_in_pages_of_groups_with_the_steps_totals(owner_client, owner, dataset_version, scale_rewards):
    run = make_run(owner, dataset_version, config={"scale_rewards": scale_rewards})
    ingest(run, rollouts_event(1, GROUPS + GROUPS[1:] + GROUPS[:1], scale_rewards=scale_rewards))
    response = owner_client.get(reverse("run_step_json", args=[run.pk, 1]), {"from": 1, "groups": 2})
    data = response.json()
    assert [g["group"] for g in data["groups"]] == [1, 2]
    assert data["groups_total"] == 4 and data["zero_std_groups"] == 2 and data["first_group"] == 1
    # a page still scales by the whole step's std under scale_rewards=batch: totals 2, 1, 1, 0, then 1.5 x 4 twice,
    # then 2, 1, 1, 0 again (mean 1.25, unbiased variance 5 / 15)
    scale = (5 / 15) ** 0.5 + 1e-4 if scale_rewards == "batch" else 0.0 + 1e-4
    zero = [c["formula_advantage"] for c in data["groups"][0]["completions"]]
    assert zero == [0.0] * 4
    if scale_rewards == "batch":
        last = owner_client.get(reverse("run_step_json", args=[run.pk, 1]), {"from": 3, "groups": 1}).json()
        assert sorted(c["formula_advantage"] for c in last["groups"][0]["completions"]) == pytest.approx(
            [-1.0 / scale, 0.0, 0.0, 1.0 / scale]
        )
    assert owner_client.get(reverse("run_step_json", args=[run.pk, 1]), {"from": "x"}).status_code == 400
