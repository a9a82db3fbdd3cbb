"""Resource telemetry of a Ray run: each rank appends its samples to a rank file in the shared run folder, and the
worker's RaySampler turns the files into one ResourceSample a tick (sums over the ranks, their GPUs side by side)."""

import json
import logging
import os

import pytest
from django.urls import reverse
from grpo_web_protocol.resources import RankTelemetry, parse_rank_sample

from runs.models import ResourceSample, Run
from runs.telemetry.sampler import READ_LIMIT, RaySampler
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db]

GPU = {"index": 0, "util": 50.0, "mem_used": 2**30, "mem_total": 8 * 2**30}


def _line(rank, cpu, rss, gpus=(), node="10.0.0.1") -> str:
    return (
        json.dumps({"ts": 1.0, "rank": rank, "node": node, "cpu_percent": cpu, "rss_bytes": rss, "gpus": list(gpus)})
        + "\n"
    )


@pytest.fixture
def ray_run(owner, dataset_version, settings):
    settings.GRPO_TELEMETRY_SECONDS = 0  # every tick is due
    return Run.objects.create(
        owner=owner,
        name="ray",
        model="tiny",
        dataset_version=dataset_version,
        engine="ray",
        num_workers=3,
        rewards=[],
        config={"max_steps": 4},
        total_steps=4,
        step=1,
    )


def _append(folder, rank, text: str | bytes):
    with open(folder / f"rank-{rank}.jsonl", "ab") as fh:
        fh.write(text.encode() if isinstance(text, str) else text)


def test_one_sample_a_tick_sums_the_ranks_latest_lines_and_lists_every_gpu_with_its_rank_and_node(ray_run, tmp_path):
    sampler = RaySampler(ray_run, tmp_path)
    assert sampler.tick() is None  # no rank has written yet: no sample
    _append(tmp_path, 0, _line(0, 10.0, 100, [GPU]) + _line(0, 90.0, 1000, [GPU]))
    _append(tmp_path, 1, _line(1, 50.0, 2000, [GPU], node="10.0.0.2"))
    # rank 2 has no file yet: left out, not a failure
    sample = sampler.tick()
    assert (sample.cpu_percent, sample.rss_bytes, sample.step) == (140.0, 3000, 1)  # rank 0's latest line + rank 1's
    assert sample.gpus == [{**GPU, "rank": 0, "node": "10.0.0.1"}, {**GPU, "rank": 1, "node": "10.0.0.2"}]

    _append(tmp_path, 2, _line(2, 5.0, 4000))
    sample = sampler.tick()
    assert (sample.cpu_percent, sample.rss_bytes) == (145.0, 7000)  # ranks 0 and 1 unchanged, rank 2 joined
    assert ResourceSample.objects.filter(run=ray_run).count() == 2


def test_each_file_is_read_from_where_the_last_tick_stopped_and_a_torn_last_line_waits_for_its_end(ray_run, tmp_path):
    sampler = RaySampler(ray_run, tmp_path)
    first = _line(0, 10.0, 100)
    torn = _line(0, 20.0, 200)
    _append(tmp_path, 0, first + torn[:15])
    assert sampler.tick().rss_bytes == 100
    assert sampler.offsets == {0: len(first)}
    _append(tmp_path, 0, torn[15:])
    assert sampler.tick().rss_bytes == 200
    assert sampler.offsets == {0: len(first) + len(torn)}
    assert sampler.tick().rss_bytes == 200  # nothing new: the latest line still counts


def test_garbled_and_hostile_lines_are_skipped(ray_run, tmp_path):
    sampler = RaySampler(ray_run, tmp_path)
    hostile = [
        "not json",
        "[1, 2]",
        '"a string"',
        "{}",
        "[" * 100_000,
        _line(0, -1.0, 100),
        _line(0, float("inf"), 100),
        _line(0, float("nan"), 100),
        _line(0, "10", 100),
        _line(0, 10.0, -5),
        _line(0, 10.0, 1.5),
        _line(0, 10.0, True),
        _line(0, 10.0, 2**70),
        _line(0, 10.0, 100, [{"index": "0"}]),
        _line(0, 10.0, 100, [{**GPU, "util": 500.0}]),
        _line(0, 10.0, 100, [{**GPU, "mem_used": -1}]),
        _line(0, 10.0, 100, ["gpu"]),
        _line(0, 10.0, 100, [GPU] * 65),
    ]
    _append(tmp_path, 0, _line(0, 10.0, 100) + "".join(h.rstrip("\n") + "\n" for h in hostile))
    _append(tmp_path, 0, b"\xff\xfe{\n")  # not UTF-8
    _append(tmp_path, 1, "\n\n" + _line(1, 1.0, 1, node=["not", "a", "name"]))
    _append(tmp_path, 7, _line(7, 10.0, 10**9))  # not a rank of this run (num_workers=3): never read
    sample = sampler.tick()
    assert (sample.cpu_percent, sample.rss_bytes) == (11.0, 101)
    assert sampler.latest[1]["node"] == ""
    assert set(sampler.offsets) == {0, 1}


def test_a_line_longer_than_any_sample_is_skipped_and_the_next_line_is_read(ray_run, tmp_path):
    sampler = RaySampler(ray_run, tmp_path)
    _append(tmp_path, 0, "x" * (READ_LIMIT + 10))
    assert sampler.tick() is None
    _append(tmp_path, 0, "\n" + _line(0, 3.0, 30))
    assert sampler.tick().rss_bytes == 30  # the long line's tail fails to parse; the line after it counts
    assert sampler.offsets[0] == (tmp_path / "rank-0.jsonl").stat().st_size


def test_gpus_of_different_nodes_with_the_same_index_are_separate_series_on_the_page(ray_run, owner_client):
    other = {**GPU, "util": 10.0}
    gpus = [{**GPU, "rank": 0, "node": "10.0.0.1"}, {**other, "rank": 1, "node": "10.0.0.2"}]
    ResourceSample.objects.create(run=ray_run, at=ray_run.created_at, step=1, cpu_percent=1.0, rss_bytes=1, gpus=gpus)
    gpus = owner_client.get(reverse("run_telemetry_json", args=[ray_run.pk])).json()["samples"]["gpus"]
    assert {k: v["util"] for k, v in gpus.items()} == {"0 on 10.0.0.1": [50.0], "0 on 10.0.0.2": [10.0]}


def test_a_ranks_telemetry_thread_appends_samples_of_its_own_process_that_read_back(tmp_path):
    telemetry = RankTelemetry(tmp_path / "job", 1, 0.05, node="10.0.0.9", gpus="").start()
    path = tmp_path / "job" / "rank-1.jsonl"
    try:
        wait_for(lambda: path.exists() and len(path.read_text().splitlines()) >= 2, timeout=20, what="two samples")
    finally:
        telemetry.stop()
        telemetry.thread.join(timeout=10)
    lines = path.read_text().splitlines()
    raw = json.loads(lines[0])
    assert raw["rank"] == 1 and raw["ts"] > 0
    sample = parse_rank_sample(lines[-1])
    assert sample["node"] == "10.0.0.9" and sample["gpus"] == [] and sample["cpu_percent"] >= 0
    assert sample["rss_bytes"] > 10 * 2**20  # this test's Python process, at least


def test_a_rank_that_cannot_write_says_so_once_and_trains_on(tmp_path, caplog):
    (tmp_path / "job").write_text("a file where the folder should be")
    telemetry = RankTelemetry(tmp_path / "job", 0, 1.0, node="n", gpus="")
    with caplog.at_level(logging.WARNING, logger="grpo_web_protocol.resources"):
        for _ in range(3):
            telemetry.write(telemetry.sample())
    assert len(caplog.records) == 1
    assert (
        caplog.records[0]
        .getMessage()
        .startswith(f"rank 0: no resource telemetry: cannot write {tmp_path / 'job' / 'rank-0.jsonl'} (")
    )
    assert os.path.isfile(tmp_path / "job")
