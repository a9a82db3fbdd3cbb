"""Labels as a reward function's tests (issue 39, item 4), on a real run: TRL trains the tiny model with the demo's
digit_ratio reward (which pays for digits, so digit spam is a hack); a reviewer labels the spam "reward hack"; the
function's suite maps that label to "scores at most 0.05". Tested in the editor (a real Celery worker, the sandbox),
the suite fails the hacked code and passes a fixed version, the saved versions show their agreement, and a replay with
the fixed version reports the same before anyone trains with it."""

import json

import pytest
from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig
from grpo_web_protocol.demo_data import arithmetic_rows
from grpo_web_protocol.events import read_events

from rewards.label_suite import SuiteError, clean_suite
from rewards.library import source as library_source
from rewards.models import RewardFunction
from rewards.services import reward_create, reward_save
from runs.models import Label, Replay, Rollout
from runs.rollouts.ingest import ingest_events
from runs.rollouts.labels import labels_create
from runs.rollouts.services import replay_create
from tests.conftest import logged_in, wait_for
from tests.rollouts.inspect_data import make_run
from tests.rollouts.test_browser_inspection import login
from workers.training.train import run as train

pytestmark = [pytest.mark.django_db, pytest.mark.filterwarnings("ignore::FutureWarning")]

HACKED = library_source("digit_ratio")
# the fix: digits pay a little, a completion that is mostly digits pays nothing
FIXED = '''def digit_ratio(completions, **kwargs):
    """Share of digits, up to a tenth of the text; past that it is digit spam and scores 0."""
    rewards = []
    for completion in completions:
        text = completion if isinstance(completion, str) else completion[-1]["content"]
        chars = [ch for ch in text if not ch.isspace()]
        ratio = sum(ch.isdigit() for ch in chars) / len(chars) if chars else 0.0
        rewards.append(ratio if ratio <= 0.1 else 0.0)
    return rewards
'''
SUITE = {"expectations": [{"label": "reward hack", "expect": "at_most", "value": 0.05}]}


@pytest.fixture(scope="module")
def events(tmp_path_factory, tiny_model):
    folder = tmp_path_factory.mktemp("digits")
    data = folder / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in arithmetic_rows(64)))
    config = TrainConfig(
        model=str(tiny_model),
        dataset_path=str(data),
        output_dir=str(folder / "out"),
        event_log=str(folder / "events.jsonl"),
        rewards=[RewardSpec("digit_ratio", 1.0, builtin="digit_ratio")],
        # the tiny random model learns to answer in digits within some 20 steps at this rate
        grpo=GRPOFields(
            max_steps=24, num_generations=4, per_device_train_batch_size=16, save_steps=1000, learning_rate=0.01
        ),
    )
    train(config)
    return read_events(config.event_log)[0]


@pytest.fixture
def reviewed(events, owner, dataset_version):
    """The run stored with the user's digit_ratio (version 1: the library's code, as trained), and a reviewer's
    "reward hack" labels on its digit spam (the completions mostly digits)."""
    function = reward_create(owner=owner, name="digit-spam", source_code=HACKED, entrypoint="digit_ratio")
    v1 = function.latest_version
    run = make_run(owner, dataset_version, name="digits", rewards=("digit_ratio",), config={"num_generations": 4})
    run.rewards = [{"name": "digit_ratio", "weight": 1.0, "version_id": v1.pk}]
    run.save(update_fields=["rewards"])
    ingest_events(run, events)
    # the reviewer reads the last steps, best rewarded first, and labels what is mostly digits
    last = Rollout.objects.filter(run=run, step__gte=22).order_by("-reward")
    spam = [r for r in last if sum(ch.isdigit() for ch in r.completion) > len(r.completion) / 2]
    assert len(spam) >= 8, "the tiny model did not learn to write digit spam"
    labels_create(run=run, user=owner, items=[{"name": "reward hack", "rollout": r.pk} for r in spam])
    function.label_suite = clean_suite({"runs": [run.pk], **SUITE})
    function.save(update_fields=["label_suite"])
    return run, function, spam


def suite_test(client, function, source):
    started = client.post(
        f"/rewards/{function.pk}/label-suite/test/", {"source": source, "entrypoint": "digit_ratio"}
    ).json()
    answer = {}

    def ready():
        answer.update(client.get(started["poll"]).json())
        return answer.get("ready")

    wait_for(ready, timeout=120, what="the label suite's test")
    return answer


@pytest.mark.django_db(transaction=True)
def test_labels_that_found_a_hack_fail_the_hacked_reward_and_pass_the_fixed_one(celery_worker, reviewed, owner):
    run, function, spam = reviewed
    client = logged_in(owner)
    hacked = suite_test(client, function, HACKED)
    assert hacked["error"] is None, hacked
    assert (hacked["agrees"], hacked["total"]) == (0, len(spam))
    assert {c["rollout"] for c in hacked["cases"]} == {r.pk for r in spam}
    assert all(not c["passed"] and c["score"] > 0.1 for c in hacked["cases"])
    assert hacked["version"] == 1  # the editor held version 1's code: version 1 keeps its agreement
    fixed = suite_test(client, function, FIXED)
    assert (fixed["agrees"], fixed["total"]) == (len(spam), len(spam)) and "version" not in fixed
    assert all(c["score"] == 0.0 for c in fixed["cases"])
    # saved, the fixed code is version 2, checked against the labels by the worker
    v2, created = reward_save(function=function, source_code=FIXED, entrypoint="digit_ratio", description="")
    assert created
    suite_test(client, function, FIXED)
    page = client.get(f"/rewards/{function.pk}/").content.decode()
    assert f"agrees with 0 of {len(spam)} labels" in page and f"agrees with {len(spam)} of {len(spam)} labels" in page

    # the same agreement from a replay of the run with version 2 (by the worker), before anyone trains with it
    rewards = [{"name": "digit_ratio", "weight": 1.0, "version_id": v2.pk}]
    replay = replay_create(run=run, owner=owner, rewards=rewards, filters={"step_min": 22})
    wait_for(lambda: Replay.objects.get(pk=replay.pk).status not in ("queued", "running"), 120, what="the replay")
    replay.refresh_from_db()
    assert replay.status == Replay.Status.COMPLETED, replay.error
    labels = client.get(f"/runs/{run.pk}/replays/{replay.pk}.json").json()["labels"]
    assert [(a["reward"], a["version"], a["stored"], a["replay"]) for a in labels] == [
        ("digit_ratio", 2, {"agrees": 0, "total": len(spam)}, {"agrees": len(spam), "total": len(spam)})
    ]
    assert Label.objects.filter(run=run).count() == len(spam)


def test_a_label_suite_is_saved_only_by_who_may_change_the_function_and_checked_for_form(owner, member, reviewed):
    run, function, _ = reviewed
    client = logged_in(owner)
    url = f"/rewards/{function.pk}/label-suite/"
    bad = client.post(
        url,
        json.dumps({"runs": [run.pk], "expectations": [{"label": "x", "expect": "at_most"}]}),
        content_type="application/json",
    )
    assert (
        bad.status_code == 400 and bad.json()["error"] == "expectations[0].value: a finite number (at_most needs one)"
    )
    assert logged_in(member).post(url, json.dumps({}), content_type="application/json").status_code == 404
    cleared = client.post(url, json.dumps({}), content_type="application/json")
    assert cleared.status_code == 200
    assert RewardFunction.objects.get(pk=function.pk).label_suite == {}


@pytest.mark.parametrize(
    "suite, says",
    [
        ([], "the suite is"),
        ({"runs": [], "expectations": []}, "runs: a list of 1 to 20 run ids"),
        ({"runs": [True], "expectations": []}, "runs: run ids are whole numbers"),
        ({"runs": [1], "expectations": [{"label": "x", "expect": "below_mean", "value": 1}]}, "takes no value"),
        (
            {"runs": [1], "expectations": [{"label": "x", "expect": "at_least", "value": float("nan")}]},
            "a finite number",
        ),
        ({"runs": [1], "expectations": [{"label": "x", "expect": "never"}]}, "expect: one of below_mean"),
        ({"runs": [1], "expectations": [{"label": "x", "expect": "above_mean"}] * 2}, "'x' is mapped twice"),
        ({"runs": [1], "expectations": [{"label": "", "expect": "above_mean"}]}, "a label name of 1 to 64"),
        ({"runs": [1], "expectations": [{"label": "x", "expect": "above_mean", "code": "1"}]}, "an object with label"),
    ],
)
def test_a_hostile_suite_is_refused_naming_its_key(suite, says):
    with pytest.raises(SuiteError, match=None) as caught:
        clean_suite(suite)
    assert says in str(caught.value)


@pytest.mark.django_db(transaction=True)
def test_in_chromium_the_editor_saves_a_suite_and_tests_its_code_against_the_labels(
    web_server, celery_worker, reviewed, page
):
    run, function, spam = reviewed
    RewardFunction.objects.filter(pk=function.pk).update(label_suite={})
    errors = []
    page.on("pageerror", lambda e: errors.append(str(e)))
    login(page, web_server)
    page.goto(f"{web_server}/rewards/{function.pk}/")
    page.locator(f"#suite-runs option[value='{run.pk}']").wait_for(state="attached")
    page.select_option("#suite-runs", [str(run.pk)])
    row = page.locator("#suite-expectations tbody tr").first
    row.locator(".suite-label").fill("reward hack")
    row.locator(".suite-expect").select_option("at_most")
    row.locator(".suite-value").fill("0.05")
    page.click("#suite-save")
    page.locator("#suite-status:text('Saved.')").wait_for()
    assert RewardFunction.objects.get(pk=function.pk).label_suite == clean_suite({"runs": [run.pk], **SUITE})
    assert page.locator("#suite-described li").inner_text() == '"reward hack": scores at most 0.05'
    page.click("#suite-test")
    page.locator("#suite-agreement").wait_for(timeout=120_000)
    assert page.locator("#suite-agreement").inner_text() == f"agrees with 0 of {len(spam)} labels (version 1)"
    assert page.locator("#suite-cases tr.suite-fail").count() == len(spam)
    assert errors == []
