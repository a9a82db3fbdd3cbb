"""bench/gpu_smoke's CPU-runnable pieces (it needs a GPU to run): the shell script parses, the step time leaves the
first (warm-up) step out, and the GPU telemetry summary reads nvidia-smi's CSV through the worker's parser."""

import subprocess
from pathlib import Path

from bench.gpu_smoke import GpuSampler, step_time, train_config
from workers.training.protocol.resources import parse_nvidia_smi

ROOT = Path(__file__).resolve().parents[2]


def test_the_script_parses_and_ends_with_the_speedup():
    subprocess.run(["bash", "-n", str(ROOT / "bench" / "gpu_smoke.sh")], check=True)
    source = (ROOT / "bench" / "gpu_smoke.py").read_text()
    assert source.rstrip().splitlines()[-1].strip() == "sys.exit(main())"
    assert 'print(f"vllm_step_speedup={speedup:.2f}")' in source


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
