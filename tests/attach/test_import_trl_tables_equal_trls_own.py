"""TRL's own completions tables (GRPOTrainer, log_completions=True) read back by the importer: every row as TRL
wrote it, grouped as TRL sampled it, TRL's log_history as metrics, and the record's gaps said."""

import math
import shutil
from pathlib import Path

import pandas as pd
import pytest

from runs.attach.importers import describe
from runs.attach.importers.trl import convert
from tests.attach.conftest import TRL_G


def _same(ours, theirs) -> bool:
    if ours is None:
        return theirs is None or (isinstance(theirs, float) and math.isnan(theirs))
    return ours == theirs


@pytest.fixture(scope="module")
def converted(trl_output):
    return convert(trl_output.output_dir, reward_weights=[r.weight for r in trl_output.rewards])


def test_every_row_is_trls_and_groups_are_its_prompts(trl_output, converted):
    tables = sorted(Path(trl_output.output_dir, "completions").glob("completions_*.parquet"))
    assert [t.name for t in tables] == ["completions_00002.parquet", "completions_00003.parquet"]
    events = {e["step"]: e for e in converted.events if e["type"] == "rollouts"}
    assert sorted(events) == [2, 3]
    names = [r.name for r in trl_output.rewards]
    assert converted.reward_names == names and converted.num_generations == TRL_G
    for path in tables:
        table = pd.read_parquet(path)
        rows = events[int(table["step"][0])]["rows"]
        assert [r["prompt"] for r in rows] == list(table["prompt"])
        assert [r["completion"] for r in rows] == list(table["completion"])
        assert [r["advantage"] for r in rows] == table["advantage"].tolist()
        for k, name in enumerate(names):
            assert all(_same(r["rewards"][k], v) for r, v in zip(rows, table[name].tolist()))
        weights = [r.weight for r in trl_output.rewards]
        for row, (_, cells) in zip(rows, table.iterrows()):
            scored = [(cells[n], w) for n, w in zip(names, weights) if not math.isnan(cells[n])]
            assert row["reward"] == pytest.approx(sum(v * w for v, w in scored))
        # TRL's RepeatSampler: num_generations completions of one prompt in a row
        for group in range(len(rows) // TRL_G):
            members = [r for r in rows if r["group"] == group]
            assert len(members) == TRL_G and len({r["prompt"] for r in members}) == 1
            # TRL's group-scaled advantages sum to zero over a group
            assert sum(r["advantage"] for r in members) == pytest.approx(0, abs=1e-5)


def test_log_history_becomes_metrics_and_the_record_says_what_it_lacks(trl_output, converted):
    metrics = {e["step"]: e["metrics"] for e in converted.events if e["type"] == "metrics"}
    assert 2 in metrics and "reward" in metrics[2] and "loss" in metrics[2]
    assert converted.total_steps == 3 and converted.every == 2
    text = describe("trl", len(converted.rollout_steps), converted.total_steps, converted.every)
    assert text == "rollouts for 2 of 3 steps: TRL wrote every 2nd batch (logging_steps=2)"
    # TRL's tables hold no token counts: the record says so rather than guessing
    assert not converted.length_known and any("no token counts" in n for n in converted.notes)


def test_one_table_or_the_completions_folder_is_the_same_import(trl_output, converted):
    folder = Path(trl_output.output_dir, "completions")
    alone = convert(folder / "completions_00002.parquet", reward_weights=[1.0, 0.5])
    assert [e["rows"] for e in alone.events if e["type"] == "rollouts"] == [
        e["rows"] for e in converted.events if e["type"] == "rollouts" and e["step"] == 2
    ]
    assert convert(folder, reward_weights=[1.0, 0.5]).rollout_steps == [2, 3]


def test_a_local_copy_of_the_hub_dataset_imports_the_same(trl_output, converted, tmp_path):
    """log_completions_hub_repo uploads the completions folder's tables (CommitScheduler, *.parquet) beside a
    dataset card: a local copy of that dataset repository reads as the folder does."""
    hub = tmp_path / "completions-dataset"
    shutil.copytree(Path(trl_output.output_dir, "completions"), hub)
    (hub / "README.md").write_text("---\ntags: [trl, trl-logs, completions]\n---\n")
    rows = [e["rows"] for e in convert(hub, reward_weights=[1.0, 0.5]).events if e["type"] == "rollouts"]
    assert rows == [e["rows"] for e in converted.events if e["type"] == "rollouts"]
