"""In chromium: a run's reproducibility record on its Config tab, its diff on the comparison page, and in the YAML.

The record is the one this test's own process makes (grpo_web_attach.provenance.record, as the training program and
the attach client make theirs); the other run's differs where two machines would: TRL's version and the driver."""

from pathlib import Path

import pytest
import trl
from django.urls import reverse
from grpo_web_attach import provenance

from tests.compare.compare_data import make_run
from tests.conftest import log_in

pytestmark = [pytest.mark.django_db(transaction=True)]

MARKUP = '<img src=x onerror="window.pwned=1">'


@pytest.fixture
def recorded_runs(owner, dataset_version):
    here = {**provenance.record(seed=42, app=Path(__file__).parent), "attempt": 1}
    there = {
        **here,
        "libraries": {**here["libraries"], "trl": "1.15.2"},
        "accelerator": {"cuda": "12.8", "driver": "570.86.15", "devices": ["NVIDIA H200"]},
        "command": f"python train.py {MARKUP}",
    }
    a = make_run(owner, dataset_version, "here", provenance=here)
    b = make_run(owner, dataset_version, "there", provenance=there)
    c = make_run(owner, dataset_version, "before records")
    return a, b, c


def test_the_config_tab_shows_the_record_and_compare_diffs_it(web_server, owner, recorded_runs, page):
    a, b, c = recorded_runs
    log_in(page, web_server)
    page.goto(f"{web_server}{b.get_absolute_url()}#config")
    table = page.locator("#provenance-table")
    assert table.locator("tr[data-field='TRL'] td").inner_text() == "1.15.2"
    assert table.locator("tr[data-field='NVIDIA driver'] td").inner_text() == "570.86.15"
    assert table.locator("tr[data-field='GPUs'] td").inner_text() == "NVIDIA H200"
    # a command is text, never markup
    assert table.locator("tr[data-field='command'] td").inner_text() == f"python train.py {MARKUP}"
    assert page.evaluate("() => window.pwned") is None

    page.goto(f"{web_server}{a.get_absolute_url()}#config")
    assert page.locator("#provenance-table tr[data-field='TRL'] td").inner_text() == trl.__version__
    assert page.locator("#provenance-table tr[data-field='CUDA'] td").inner_text() == "none (CPU)"
    page.goto(f"{web_server}{c.get_absolute_url()}#config")
    assert "Not recorded" in page.locator("#provenance-none").inner_text()

    page.goto(f"{web_server}/runs/compare/?runs={a.pk},{b.pk},{c.pk}")
    rows = page.locator("#config-diff tr[data-kind='provenance']")
    diff = {
        r.locator("td").nth(0).inner_text(): [r.locator("td").nth(i).inner_text() for i in (1, 2, 3)]
        for r in rows.all()
    }
    assert diff["TRL"] == [trl.__version__, "1.15.2", "not recorded"]
    assert diff["NVIDIA driver"] == ["none", "570.86.15", "not recorded"]
    # a run without a record is no difference: transformers is the same in the two records
    assert "transformers" not in diff and "reproducibility record" not in diff


def test_the_exported_yaml_carries_the_record_as_comments(owner_client, recorded_runs):
    _, b, c = recorded_runs
    text = owner_client.get(reverse("run_yaml", args=[b.pk])).content.decode()
    assert "# reproducibility record" in text and "#   TRL: 1.15.2" in text and "#   NVIDIA driver: 570.86.15" in text
    assert "reproducibility record" not in owner_client.get(reverse("run_yaml", args=[c.pk])).content.decode()
