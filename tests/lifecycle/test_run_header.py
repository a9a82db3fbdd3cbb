"""The run page's header says what kind of run it is: its trainer and engine, LoRA, tools and an environment, in
badges and in the summary line (names escaped, as everywhere)."""

import re

import pytest

from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db


def header(client, run) -> str:
    page = client.get(f"/runs/{run.pk}/").content.decode()
    return page[page.index('<section class="card run-head"') : page.index('<div class="tabs"')]


def text(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def test_lora_tools_and_an_environment_are_named_in_the_header(owner_client, owner, dataset_version):
    run = make_run(
        owner,
        dataset_version,
        config={"use_peft": True, "lora_r": 8, "lora_alpha": 16},
        tools=[{"name": "calculator", "builtin": "calculator"}, {"name": "<b>lookup</b>", "version_id": 3}],
        environment={"name": "calculator_session", "builtin": "calculator_session"},
    )
    html = header(owner_client, run)
    assert 'id="run-lora">LoRA r=8<' in html and 'id="run-tools">tools<' in html
    assert 'id="run-environment">environment<' in html
    summary = text(html[html.index('id="run-summary"') :])
    assert "tools: calculator, <b>lookup</b> · environment: calculator_session · LoRA r=8, α=16" in summary.replace(
        "&lt;", "<"
    ).replace("&gt;", ">")
    assert "<b>lookup</b>" not in html  # escaped


def test_a_verl_run_on_ray_says_so_and_a_plain_run_has_no_extra_badges(owner_client, owner, dataset_version):
    verl = make_run(owner, dataset_version, name="v", trainer="verl", engine="ray", num_workers=2)
    html = header(owner_client, verl)
    assert 'id="run-trainer">verl<' in html and 'id="run-engine">Ray × 2<' in html
    plain = header(owner_client, make_run(owner, dataset_version, name="p"))
    for badge in ("run-trainer", "run-engine", "run-lora", "run-tools", "run-environment"):
        assert f'id="{badge}"' not in plain
