"""bench/gpu_smoke's CPU-runnable pieces (it needs a GPU to run): the shell script parses, the step time leaves the
first (warm-up) step out, the GPU telemetry summary reads nvidia-smi's CSV through the worker's parser, and the
offline mode of a lent machine with no package index (the carried wheels installed with --no-index, the vLLM, server
and verl parts skipped with their reason, the last line then HF generate's step time)."""

import os
import subprocess
from pathlib import Path

import pytest
from grpo_web_protocol.resources import parse_nvidia_smi

from bench.gpu_smoke import GpuSampler, last_line, skipped_parts, step_time, train_config, unmet_requirements

ROOT = Path(__file__).resolve().parents[2]


def test_the_script_parses_and_main_ends_on_the_last_line():
    subprocess.run(["bash", "-n", str(ROOT / "bench" / "gpu_smoke.sh")], check=True)
    source = (ROOT / "bench" / "gpu_smoke.py").read_text()
    assert source.rstrip().splitlines()[-1].strip() == "sys.exit(main())"
    assert "    print(last_line(results, skipped))\n    return 1 if failures else 0\n" in source


def test_the_step_time_is_the_median_after_the_warm_up_step():
    events = [
        {"type": "metrics", "step": s, "metrics": {"timing/step_s": t}}
        for s, t in [(1, 50.0), (2, 1.0), (3, 3.0), (4, 2.0)]
    ] + [{"type": "rollouts", "step": 2}]
    assert step_time(events) == 2.0


def test_gpu_telemetry_peaks_per_gpu():
    sampler = GpuSampler()
    sampler.samples = [
        parse_nvidia_smi("0, GPU-a, 10, 1000, 80000\n1, GPU-b, 90, 500, 80000\n", None),
        parse_nvidia_smi("0, GPU-a, 70, 3000, 80000\n1, GPU-b, [N/A], 400, 80000\n", None),
    ]
    assert sampler.summary() == {
        0: {"memory_used_mb": 3000, "utilization": 70.0},
        1: {"memory_used_mb": 500, "utilization": 90.0},
    }


def test_the_verl_part_is_a_valid_verl_run(tmp_path):
    config = train_config(
        tmp_path, tmp_path / "m", tmp_path / "d.jsonl", num_generations=4, per_device_train_batch_size=16, max_steps=5
    )
    config.trainer = "verl"
    assert config.validate() == []


def test_without_vllm_its_parts_and_verls_are_skipped_with_the_reason():
    skipped = skipped_parts(importable=lambda module: module not in {"vllm", "verl", "ray"})
    assert list(skipped) == ["vllm_colocate", "vllm_server", "verl"]
    assert skipped["vllm_server"].startswith("vllm not importable here")
    assert skipped["verl"].startswith("verl, ray, vllm not importable here")
    assert "past what can travel" in skipped["verl"]


def test_without_ray_only_verl_is_skipped():
    assert list(skipped_parts(importable=lambda module: module != "ray")) == ["verl"]
    assert skipped_parts(importable=lambda module: True) == {}


def test_the_last_line_is_hf_generates_step_time_when_vllm_was_skipped():
    skipped = skipped_parts(importable=lambda module: module != "vllm")
    assert last_line({"hf": 1.23456}, skipped) == "hf_generate_step_s=1.235"
    assert last_line({}, skipped) == "hf_generate_step_s=nan"  # the HF part failed: still a name=value line
    assert last_line({"hf": 3.0, "colocate": 1.5}, {}) == "vllm_step_speedup=2.00"
    assert last_line({"hf": 3.0}, {}) == "vllm_step_speedup=nan"


def test_a_carried_wheels_unmet_needs_are_named(tmp_path, monkeypatch):
    site = tmp_path / "site"
    info = site / "needy-1.0.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: needy\nVersion: 1.0\n"
        "Requires-Dist: pytest>=1\nRequires-Dist: pytest<2\nRequires-Dist: no-such-dist-here\n"
        "Requires-Dist: no-such-extra-dist; extra == 'dev'\nRequires-Dist: no-such-win-dist; sys_platform == 'win32'\n"
    )
    monkeypatch.syspath_prepend(str(site))
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "needy-1.0-py3-none-any.whl").write_bytes(b"")
    (wheels / "pytest-0.1-py3-none-any.whl").write_bytes(b"")  # shadowed by the installed pytest
    (wheels / "absent_dist-2.0-py3-none-any.whl").write_bytes(b"")
    problems = unmet_requirements(wheels)
    assert problems == [
        "absent_dist 2.0 is carried but not installed",
        f"needy 1.0 needs pytest<2: {pytest.__version__} is installed",
        "needy 1.0 needs no-such-dist-here: not installed",
        f"pytest 0.1 is carried but {pytest.__version__} is the one imported",
    ]


def test_offline_the_carried_wheels_are_installed_with_no_index_and_only_the_smoke_runs(tmp_path):
    """gpu_smoke.sh with stand-ins for nvidia-smi and the image's python3 that record how they are called."""
    bin_dir, wheels, calls = tmp_path / "bin", tmp_path / "wheels", tmp_path / "calls"
    bin_dir.mkdir()
    wheels.mkdir()
    (wheels / "trl-1.16.0-py3-none-any.whl").write_bytes(b"")
    (bin_dir / "nvidia-smi").write_text("#!/bin/sh\necho 'GPU 0: a stand-in'\n")
    (bin_dir / "python3").write_text(f'#!/bin/sh\n[ "$1" = - ] && cat >/dev/null\necho "$* | $PYTHONPATH" >>{calls}\n')
    for tool in bin_dir.iterdir():
        tool.chmod(0o755)
    site = tmp_path / "site"
    for offline in (None, "1"):  # the carried wheels choose offline; GPU_SMOKE_OFFLINE=1 does too
        calls.unlink(missing_ok=True)
        env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}", "GPU_WHEELS": str(wheels)}
        env |= {"PYTHON": "false", "VENV": str(tmp_path / "venv")}  # were the full install chosen, it stops at once
        env.pop("GPU_SMOKE_OFFLINE", None)
        env |= {"GPU_SMOKE_SITE": str(site), "PYTHONPATH": "/x"} | ({"GPU_SMOKE_OFFLINE": offline} if offline else {})
        out = subprocess.run(
            ["bash", str(ROOT / "bench" / "gpu_smoke.sh")], env=env, capture_output=True, text=True, timeout=60
        )
        assert out.returncode == 0, out.stderr
        install, check, smoke = [line.split(" | ") for line in calls.read_text().splitlines()]
        assert install[0] == (
            f"-m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target {site} "
            f"{wheels}/trl-1.16.0-py3-none-any.whl"
        )
        assert check[0] == f"- {wheels}"
        assert smoke == ["-m bench.gpu_smoke", f"{ROOT}:{ROOT}/attach:{ROOT}/protocol:{site}:/x"]
        assert "offline" in out.stderr and "no vLLM, verl or Ray" in out.stderr
