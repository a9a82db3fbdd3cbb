"""The verl training program: ``python -m workers.training.verl_run CONFIG.json``.

The same contract as ``workers.training.train`` (a config file in, the event log out; no Django, no broker, no database), so
the supervisor starts it, or submits it as a Ray job, the same way. It writes the dataset version in verl's parquet
layout, translates the config to verl's Hydra keys (grpo_web_protocol.verl_keys), runs verl's GRPO (its RayPPOTrainer,
vLLM rollout) with the run's reward functions bridged through the sandbox (workers.training.verl_reward), and turns what verl
writes (its rollout dumps, its file logger's metrics, its checkpoints) into the events TRL runs write.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import threading
import traceback
from pathlib import Path

from grpo_web_attach import provenance
from grpo_web_protocol.config import TrainConfig
from grpo_web_protocol.events import EventWriter
from grpo_web_protocol.verl_dump import (
    ADVANTAGE_KEY,
    COLUMNS_KEY,
    GROUP_KEY,
    LENGTH_KEY,
    TRUNCATED_KEY,
    metrics_event,
    reward_means,
)
from grpo_web_protocol.verl_keys import VERL_ROLLOUT_DIR, overrides

from workers.training import APP_FOLDER
from workers.training.verl_data import rollouts_event, write_parquet

METRICS_FILE = "verl_metrics.jsonl"


def capture_extras(batch, eos_token_ids: list[int]) -> dict:
    """What verl's rollout dump lacks for the rollout pages, read from the batch verl trained on: the group (verl's
    uid), the GRPO advantage verl computed, the completion's length and whether it was cut off (no EOS)."""
    import torch

    mask = batch.batch["response_mask"]  # (B, T): 1 on the completion's tokens
    lengths = mask.sum(-1)  # (B,)
    advantages = (batch.batch["advantages"] * mask).sum(-1) / lengths.clamp(min=1)  # (B,): GRPO's is constant per row
    responses = batch.batch["responses"]  # (B, T)
    has_eos = (torch.isin(responses, torch.tensor(eos_token_ids, device=responses.device)) & mask.bool()).any(-1)
    extra_info = batch.non_tensor_batch.get("extra_info")
    return {
        GROUP_KEY: [str(u) for u in batch.non_tensor_batch["uid"]],
        ADVANTAGE_KEY: advantages.tolist(),
        LENGTH_KEY: lengths.tolist(),
        TRUNCATED_KEY: (~has_eos).tolist(),
        COLUMNS_KEY: [(e or {}).get("columns", "{}") for e in extra_info]
        if extra_info is not None
        else ["{}"] * len(lengths),
    }


def install_capture() -> None:
    """verl's own rollout dump (RayPPOTrainer._log_rollout_data), with capture_extras beside its reward extras."""
    from verl.trainer.ppo.ray_trainer import RayPPOTrainer

    original = RayPPOTrainer._log_rollout_data
    if getattr(original, "grpo_web", False):
        return

    def _log_rollout_data(self, batch, reward_extra_infos_dict, timing_raw, rollout_data_dir):
        eos = self.tokenizer.eos_token_id
        extras = capture_extras(batch, eos if isinstance(eos, list) else [eos])
        return original(self, batch, {**reward_extra_infos_dict, **extras}, timing_raw, rollout_data_dir)

    _log_rollout_data.grpo_web = True
    _log_rollout_data.original = original  # verl's own, for a dump without the capture's keys
    RayPPOTrainer._log_rollout_data = _log_rollout_data


def task_runner():
    """verl's TaskRunner (main_ppo_v0), with the capture installed in its process first."""
    import ray
    from verl.trainer.main_ppo_v0 import BaseTaskRunner, TaskRunner

    class GrpoWebTaskRunner(BaseTaskRunner):
        def run(self, config):
            install_capture()
            return TaskRunner.__ray_actor_class__.run(self, config)

    return ray.remote(num_cpus=1)(GrpoWebTaskRunner)


class Follower:
    """Turns verl's outputs into events as they appear: metrics lines, one rollout dump per step, checkpoints."""

    def __init__(self, config: TrainConfig, events: EventWriter):
        self.config, self.events = config, events
        self.out = Path(config.output_dir)
        self.metrics_offset = 0
        self.dumped: set[str] = set()
        self.checkpoints: set[str] = set()
        self.names = [r.name for r in config.rewards]
        self.last_step = 0

    def poll(self) -> None:
        for dump in sorted((self.out / VERL_ROLLOUT_DIR).glob("*.jsonl"), key=lambda p: int(p.stem)):
            if dump.name in self.dumped:
                continue
            try:
                event = rollouts_event(dump, self.names, self.config.grpo.num_generations)
            except (ValueError, KeyError):
                continue  # written by verl's dump thread just now: read it whole next time
            self.dumped.add(dump.name)
            self.events.write("rollouts", **{k: v for k, v in event.items() if k != "type"})
            self.events.write(
                "metrics", step=event["step"], max_steps=self.config.grpo.max_steps, metrics=reward_means(event)
            )
        metrics = self.out / METRICS_FILE
        if metrics.exists():
            with open(metrics, "rb") as fh:
                fh.seek(self.metrics_offset)
                data = fh.read()
            end = data.rfind(b"\n") + 1
            self.metrics_offset += end
            for line in data[:end].splitlines():
                event = metrics_event(json.loads(line), self.config.grpo.max_steps)
                self.last_step = max(self.last_step, event["step"])
                self.events.write("metrics", **{k: v for k, v in event.items() if k != "type"})
        for folder in sorted((self.out / "checkpoints").glob("global_step_*")):
            if folder.name not in self.checkpoints and (folder / "actor").exists():
                self.checkpoints.add(folder.name)
                self.events.write("checkpoint", step=int(folder.name.rsplit("_", 1)[1]), path=str(folder))

    def follow(self, stop: threading.Event, every: float = 1.0) -> None:
        while not stop.wait(every):
            self.poll()


def prompt_tokens(config: TrainConfig, parquet: str) -> int:
    """The longest prompt, in tokens of the model's chat template: verl's data.max_prompt_length."""
    import pandas as pd
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(config.model)
    longest = 0
    for prompt in pd.read_parquet(parquet)["prompt"]:
        ids = tokenizer.apply_chat_template(list(prompt), add_generation_prompt=True, tokenize=True)
        longest = max(longest, len(ids if isinstance(ids, list) else ids["input_ids"]))
    return max(16, longest)


def gpus() -> int:
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible:
        return len([d for d in visible.split(",") if d.strip()])
    import torch

    return max(1, torch.cuda.device_count())


def verl_config(config: TrainConfig, config_path: str, layout: tuple[int, int] | None = None):
    """verl's ppo_trainer.yaml with this run's overrides, composed as verl's own main does. ``layout``: (GPUs per
    node, nodes) on a Ray cluster (workers.training.ray_train); else the GPUs this machine shows, on this one node."""
    import verl
    from hydra import compose, initialize_config_dir

    out = Path(config.output_dir)
    train = write_parquet(config.dataset_path, out / "train.parquet", data_source=config.eval_source)
    val = write_parquet(
        config.eval_dataset_path or config.dataset_path,
        out / "eval.parquet",
        data_source=config.eval_source,
        split="eval",
    )
    per_node, nnodes = layout or (gpus(), 1)
    keys = overrides(
        config,
        train_file=train,
        val_file=val,
        reward_path=str(Path(__file__).with_name("verl_reward.py")),
        config_path=config_path,
        gpus=per_node,
        nnodes=nnodes,
        max_prompt_length=prompt_tokens(config, train),
        flash_attn=importlib.util.find_spec("flash_attn") is not None,
    )
    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        return migrate_legacy_keys(compose("ppo_trainer", overrides=keys))


def migrate_legacy_keys(cfg):
    """verl's older reward keys a verl file carried (``reward_model.reward_manager``, ``reward_model.reward_kwargs``,
    ...) moved to where verl 0.9's trainer reads them (``reward.*``), by verl's own migration: its main_ppo reads only
    the new keys, and only its fully-async main migrates the old ones."""
    from omegaconf import OmegaConf

    legacy = {k: OmegaConf.select(cfg, k) for k in ("reward_model", "custom_reward_function", "sandbox_fusion")}
    if all(_unset(v) for v in legacy.values()):
        return cfg  # nothing carried under the old keys: the config grpo-web composed, as it is
    from verl.experimental.reward_loop import migrate_legacy_reward_impl

    return migrate_legacy_reward_impl(cfg)


def _unset(node) -> bool:
    from omegaconf import DictConfig

    if isinstance(node, DictConfig):
        return all(_unset(node[k]) for k in node)
    return node is None


def run(config: TrainConfig, config_path: str, layout: tuple[int, int] | None = None) -> None:
    from verl.trainer.main_ppo import run_ppo
    from verl.utils.config import validate_config

    out = Path(config.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "train_config.json").write_text(config.to_json())
    os.environ["VERL_FILE_LOGGER_PATH"] = str(out / METRICS_FILE)
    events = EventWriter(config.event_log)
    follower, stop = Follower(config, events), threading.Event()
    try:
        cfg = verl_config(config, config_path, layout)
        from verl.trainer.ppo.utils import need_critic, need_reference_policy

        validate_config(config=cfg, use_reference_policy=need_reference_policy(cfg), use_critic=need_critic(cfg))
        events.write(
            "started",
            total_steps=config.max_steps,
            kind=config.kind,
            trainer="verl",
            reward_names=[r.name for r in config.rewards],
            reward_weights=[r.weight for r in config.rewards],
            provenance=provenance.record(seed=config.grpo.seed, app=APP_FOLDER),
        )
        thread = threading.Thread(target=follower.follow, args=(stop,), daemon=True)
        thread.start()
        try:
            run_ppo(cfg, task_runner_class=task_runner())
        finally:
            stop.set()
            thread.join()
            follower.poll()
    except BaseException as exc:
        events.write("failed", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-4000:])
        events.close()
        raise
    save_final(out)
    events.write("finished", step=follower.last_step)
    events.close()


def save_final(out: Path) -> None:
    """The last checkpoint's actor (FSDP shards) merged into a Hugging Face folder by verl's model merger:
    ``output/final``, what "evaluate the final model" loads, as for a TRL run."""
    steps = sorted(out.glob("checkpoints/global_step_*/actor"), key=lambda p: int(p.parent.name.rsplit("_", 1)[1]))
    if not steps:
        return
    subprocess.run(
        [
            sys.executable,
            "-m",
            "verl.model_merger",
            "merge",
            "--backend",
            "fsdp",
            "--local_dir",
            str(steps[-1]),
            "--target_dir",
            str(out / "final"),
        ],
        check=True,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Train one GRPO run with verl from a grpo-web config file.")
    parser.add_argument("config", help="path to the run's train_config.json")
    args = parser.parse_args(argv)
    run(TrainConfig.load(args.config), os.path.abspath(args.config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
