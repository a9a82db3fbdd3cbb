"""Per-step (process) scores: the built-in arithmetic line checker logs a score per line through TRL's log_extra; the
training program's capture carries them into the event log, the ingest stores them with the first scored step's
score, the browser filters by "first step scored below x", and (in chromium) shades each step by its score."""

import json

import pytest
from django.urls import reverse
from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig
from grpo_web_protocol.demo_data import arithmetic_rows
from grpo_web_protocol.events import read_events

from rewards.library import function
from runs.rollouts.ingest import ingest_events
from tests.rollouts.inspect_data import make_run, rollouts_event

equation_steps = function("equation_steps")

WORKED = "<think>First 12 + 7 = 19\nthen 19 * 2 = 38\nso 38 - 5 = 33</think>\n\\boxed{33}"
SLIP = "12 + 7 = 20\nthen 20 * 2 = 40\n\\boxed{40}"


def test_each_line_with_an_equation_is_checked_and_logged_through_log_extra():
    logged = {}
    rewards = equation_steps(
        [WORKED, SLIP, "no sums here"], log_extra=lambda column, values: logged.setdefault(column, values)
    )
    assert rewards == [1.0, 0.5, 0.0]
    assert logged["step_scores"] == [
        {"split": "\n", "scores": [1.0, 1.0, 1.0, None]},
        {"split": "\n", "scores": [0.0, 1.0, None]},
        {"split": "\n", "scores": [None]},
    ]
    assert equation_steps(["8 / 0 = 0", "6 × 7 = 42"]) == [0.0, 1.0]  # without log_extra it only scores


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_the_training_program_captures_what_the_reward_logged(tmp_path, tiny_model):
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in arithmetic_rows(16)))
    config = TrainConfig(
        model=str(tiny_model),
        dataset_path=str(data),
        output_dir=str(tmp_path / "out"),
        event_log=str(tmp_path / "events.jsonl"),
        rewards=[RewardSpec("equation_steps", 1.0, builtin="equation_steps")],
        grpo=GRPOFields(max_steps=1, num_generations=4, per_device_train_batch_size=8),
    )
    from workers.training.train import run

    run(config)
    rows = [r for e in read_events(config.event_log)[0] if e["type"] == "rollouts" for r in e["rows"]]
    assert len(rows) == 8
    for row in rows:  # TRL's log_extra column, row by row, as the function logged it for that completion
        logged = {}
        equation_steps([row["completion"]], log_extra=lambda column, values: logged.setdefault(column, values))
        assert row["step_scores"] == logged["step_scores"][0]


@pytest.mark.django_db
def test_the_browser_filters_by_the_first_steps_score(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version)
    event = rollouts_event(
        1,
        [
            (
                "What is (12 + 7) * 2 - 5?",
                [(WORKED, [1.0, 0.5]), (SLIP, [0.0, 0.5]), ("33", [1.0, 1.0]), ("nothing", [0.0, 0.0])],
            )
        ],
    )
    logged = {}
    equation_steps([r["completion"] for r in event["rows"]], log_extra=lambda c, v: logged.setdefault(c, v))
    for row, scores in zip(event["rows"], logged["step_scores"]):
        row["step_scores"] = scores
    ingest_events(run, [event])
    stored = {r.completion: r for r in run.rollouts.all()}
    assert stored[WORKED].first_step_score == 1.0 and stored[SLIP].first_step_score == 0.0
    assert stored["33"].first_step_score is None
    data = owner_client.get(reverse("run_rollouts_json", args=[run.pk]), {"first_step_below": "0.5"}).json()
    assert [r["completion"] for r in data["rows"]] == [SLIP]
    assert data["rows"][0]["step_scores"] == {"split": "\n", "scores": [0.0, 1.0, None]}


@pytest.mark.django_db(transaction=True)
def test_the_transcript_shades_each_step_by_its_score(web_server, page, owner, dataset_version):
    from tests.rollouts.test_browser_inspection import login

    run = make_run(owner, dataset_version, name="process run")
    event = rollouts_event(1, [("What is (12 + 7) * 2?", [(SLIP, [0.0, 0.5]), ("40", [1.0, 1.0])])])
    event["rows"][0]["step_scores"] = {"split": "\n", "scores": [0.0, 1.0, None]}
    ingest_events(run, [event])
    login(page, web_server)
    page.goto(f"{web_server}/runs/{run.pk}/rollouts/?first_step_below=0.5")
    page.wait_for_selector("article.rollout .process-step")
    assert page.locator("article.rollout").count() == 1
    steps = page.locator("article.rollout .process-step")
    assert steps.count() == 3
    assert steps.nth(0).inner_text() == "12 + 7 = 20" and steps.nth(0).get_attribute("title") == "step 1: score 0"
    assert steps.nth(1).get_attribute("data-score") == "1"
    assert steps.nth(2).get_attribute("data-score") is None  # no equation, no score, no shade
    red = steps.nth(0).evaluate("e => getComputedStyle(e).backgroundColor")
    green = steps.nth(1).evaluate("e => getComputedStyle(e).backgroundColor")
    assert red != green and red.startswith("rgba(") and green.startswith("rgba(")


# equation_steps as a user's sandboxed function that logs only at even global steps, with a second column beside
EVEN_STEPS = """
import re

def check_line(line):
    found = re.findall(r"(-?\\d+)\\s*([-+*])\\s*(-?\\d+)\\s*=\\s*(-?\\d+)", line)
    if not found:
        return None
    ops = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
    return float(all(ops[op](int(a), int(b)) == int(c) for a, op, b, c in found))

def even_steps(completions, trainer_state, log_extra, **kwargs):
    logged = [{"split": "\\n", "scores": [check_line(l) for l in c.split("\\n")]} for c in completions]
    if trainer_state.global_step % 2 == 0:
        log_extra("step_scores", logged)
        log_extra("scored_at", [trainer_state.global_step] * len(completions))
    return [float(len(c) % 3) for c in completions]
"""


def even_steps_scores(completion: str) -> dict:
    namespace: dict = {}
    exec(EVEN_STEPS, namespace)
    logged: dict = {}
    namespace["even_steps"](
        [completion], trainer_state=type("S", (), {"global_step": 0}), log_extra=lambda c, v: logged.setdefault(c, v)
    )
    return logged["step_scores"][0]


@pytest.mark.filterwarnings("ignore::FutureWarning")
def test_scores_a_sandboxed_function_logs_at_some_steps_reach_those_steps_rows_only(tmp_path, tiny_model):
    from rewards.sandbox import sandbox_support

    if not sandbox_support()["ok"]:
        pytest.skip(f"this kernel cannot sandbox: {sandbox_support()['missing']}")
    data = tmp_path / "data.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in arithmetic_rows(32)))
    config = TrainConfig(
        model=str(tiny_model),
        dataset_path=str(data),
        output_dir=str(tmp_path / "out"),
        event_log=str(tmp_path / "events.jsonl"),
        rewards=[RewardSpec("even_steps", 1.0, source=EVEN_STEPS, entrypoint="even_steps")],
        grpo=GRPOFields(max_steps=3, num_generations=4, per_device_train_batch_size=8, max_completion_length=16),
    )
    from workers.training.train import run

    run(config)
    events = read_events(config.event_log)[0]
    assert not [e for e in events if e["type"] == "reward_fault"]
    rows = {e["step"]: e["rows"] for e in events if e["type"] == "rollouts"}
    assert sorted(rows) == [1, 2, 3] and all(len(r) == 8 for r in rows.values())
    for step in (1, 3):  # scored at global steps 0 and 2: the sandbox's dicts, as the function built them
        for row in rows[step]:
            assert row["step_scores"] == even_steps_scores(row["completion"])
            assert row["columns"]["scored_at"] == step - 1
    for row in rows[2]:  # nothing logged for this batch: no scores, and no earlier batch's either
        assert row["step_scores"] is None and "scored_at" not in row["columns"]
