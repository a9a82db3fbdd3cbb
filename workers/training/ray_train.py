"""The training program on a Ray cluster: ``python -m workers.training.ray_train CONFIG.json --num-workers N [--trainer verl]``.

The entrypoint of a run's Ray job (``workers.rayjobs`` submits it). A plain program like ``workers.training.train`` (no Django,
no broker, no database): it checks that the run folder is the same shared storage on every node, then runs the SAME
training program (``workers.training.train.run``: TRL's GRPOTrainer, capture, sandboxed rewards, checkpoints, resume) in each of
N Ray Train workers. Ray Train's TorchTrainer forms the process group (gloo on CPU, NCCL on GPU) and sets RANK,
WORLD_SIZE, LOCAL_RANK and MASTER_ADDR, which accelerate (under TRL) picks up as DDP; rank 0 alone writes the event
log, and each rank's sandboxes take slots of their own (``workers.training.rewarding.rank_slot``). Each rank also measures its
own process tree and GPU every ``--telemetry-seconds`` into a rank file in the run folder
(``grpo_web_protocol.resources.RankTelemetry``), which the worker reads into the run's resource samples.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from grpo_web_protocol.config import TrainConfig
from grpo_web_protocol.resources import RankTelemetry, rank_folder
from grpo_web_protocol.verl_keys import node_layout

SHARED_STORAGE_EXIT = 3  # the exit code of a job whose nodes do not share the data directory
ERROR_PREFIX = "grpo-web error: "  # the line the supervisor takes the job's error from


class NotShared(RuntimeError):
    pass


class NoRoom(RuntimeError):
    """The cluster has no layout of GPUs the run could train on."""


def check_shared(marker: str, token: str) -> None:
    """Every live node of the cluster reads ``marker`` (a file the app wrote in the run folder) and must find
    ``token`` in it: else the data directory is not shared, and the run would train on one node and be lost on
    the others. Raises NotShared naming the nodes that do not see it."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    @ray.remote(num_cpus=0)
    def read(path: str) -> str | None:
        try:
            return Path(path).read_text()
        except OSError:
            return None

    nodes = [n for n in ray.nodes() if n.get("Alive")]
    seen = {
        n["NodeManagerAddress"] + f" ({n['NodeID'][:8]})": read.options(
            scheduling_strategy=NodeAffinitySchedulingStrategy(n["NodeID"], soft=False)
        ).remote(marker)
        for n in nodes
    }
    blind = [node for node, ref in seen.items() if ray.get(ref) != token]
    if blind:
        raise NotShared(
            f"the data directory is not shared with Ray node(s) {', '.join(blind)}: {marker}, written by "
            f"grpo-web, is not visible there. Mount the same storage (NFS, a shared volume) at the same "
            f'path (GRPO_DATA_DIR) on every node of the cluster (the manual: "Scale out on Ray", docs/ray.md).'
        )


def rank_telemetry(loop: dict) -> RankTelemetry | None:
    """This rank's telemetry thread, started; None when the job was asked for none (``--telemetry-seconds 0``) or
    it could not start (the run trains on without it)."""
    import ray
    from ray.util import get_node_ip_address

    if loop["telemetry_seconds"] <= 0:
        return None
    try:
        # the GPUs Ray gave this rank, as the node names them (CUDA_VISIBLE_DEVICES lists those of all its ranks there)
        gpus = ",".join(str(g) for g in ray.get_gpu_ids())
        return RankTelemetry(
            loop["resources"], int(os.environ["RANK"]), loop["telemetry_seconds"], node=get_node_ip_address(), gpus=gpus
        ).start()
    except Exception as exc:
        print(
            f"grpo-web: rank {os.environ.get('RANK')}: no resource telemetry: {type(exc).__name__}: {exc}",
            file=sys.stderr,
            flush=True,
        )
        return None


def train_worker(loop: dict) -> None:
    """One Ray Train worker: the training program, as one rank of a DDP group Ray Train has already formed."""
    import torch

    from workers.training.train import run

    torch.set_num_threads(loop["threads"])
    print(
        f"grpo-web: rank {os.environ['RANK']} of world_size={os.environ['WORLD_SIZE']} "
        f"({torch.distributed.get_backend()})",
        flush=True,
    )
    telemetry = rank_telemetry(loop)
    try:
        run(TrainConfig.load(loop["config"]))
    finally:
        if telemetry is not None:
            telemetry.stop()


def train(
    config_path: str,
    *,
    num_workers: int,
    use_gpu: bool,
    threads: int,
    storage: str,
    name: str,
    telemetry_seconds: float,
) -> None:
    from ray.train import FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchConfig, TorchTrainer

    trainer = TorchTrainer(
        train_worker,
        train_loop_config={
            "config": config_path,
            "threads": threads,
            "telemetry_seconds": telemetry_seconds,
            "resources": str(rank_folder(Path(config_path).parent, name)),
        },
        torch_config=TorchConfig(backend="nccl" if use_gpu else "gloo"),
        scaling_config=ScalingConfig(
            num_workers=num_workers, use_gpu=use_gpu, resources_per_worker=None if use_gpu else {"CPU": threads}
        ),
        # a lost worker fails the job: the run becomes failed and resumable from its last checkpoint, and a resume
        # (a new attempt, a new job) trains on from there with no duplicated rows
        run_config=RunConfig(name=name, storage_path=storage, failure_config=FailureConfig(max_failures=0)),
    )
    trainer.fit()


def verl_layout(gpus: int) -> tuple[int, int]:
    """(GPUs per node, nodes) for a verl run on ``gpus`` GPUs of the connected cluster (grpo_web_protocol.verl_keys)."""
    import ray

    return node_layout(gpus, [int(n["Resources"].get("GPU", 0)) for n in ray.nodes() if n.get("Alive")])


def train_verl(config_path: str, gpus: int) -> None:
    """verl's GRPO, driven from this job on the cluster it is connected to: verl places its own workers (one per
    GPU) through Ray, so the run's Ray workers are its GPUs."""
    from workers.training.verl_run import run

    try:
        layout = verl_layout(gpus)
    except ValueError as exc:
        raise NoRoom(str(exc)) from None
    run(TrainConfig.load(config_path), config_path, layout)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description="Train one grpo-web run with Ray Train (the entrypoint of its Ray job)."
    )
    parser.add_argument("config", help="path to the run's train_config JSON, on the shared data directory")
    parser.add_argument("--num-workers", type=int, default=1)
    parser.add_argument("--use-gpu", action="store_true")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (and CPUs reserved) per CPU worker")
    parser.add_argument("--marker", help="a file the app wrote under the data directory; every node must see it")
    parser.add_argument("--token", help="what --marker holds")
    parser.add_argument("--name", default="grpo-web", help="the Ray Train run's name")
    parser.add_argument(
        "--trainer",
        choices=("trl", "verl"),
        default="trl",
        help="trl: TRL's GRPOTrainer in --num-workers Ray Train workers; verl: verl's GRPO on --num-workers GPUs",
    )
    parser.add_argument(
        "--telemetry-seconds",
        type=float,
        default=2.0,
        help="seconds between each rank's resource samples (CPU, RSS, its GPUs); 0: none",
    )
    args = parser.parse_args(argv)

    import ray

    ray.init(log_to_driver=True)  # the job's cluster (RAY_ADDRESS, set by the Jobs API)
    try:
        if args.marker:
            check_shared(args.marker, args.token or "")
        if args.trainer == "verl":
            train_verl(args.config, args.num_workers)
        else:
            train(
                args.config,
                num_workers=args.num_workers,
                use_gpu=args.use_gpu,
                threads=args.threads,
                storage=str(Path(args.config).parent / "ray"),
                name=args.name,
                telemetry_seconds=args.telemetry_seconds,
            )
    except (NotShared, NoRoom) as exc:
        print(ERROR_PREFIX + str(exc), file=sys.stderr, flush=True)
        return SHARED_STORAGE_EXIT if isinstance(exc, NotShared) else 1
    except Exception as exc:  # TrainingFailedError: a rank failed or was lost; its own error is in the log above
        print(
            ERROR_PREFIX + f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}",
            file=sys.stderr,
            flush=True,
        )
        return 1
    return 0


if __name__ == "__main__":
    os.environ.setdefault("RAY_TRAIN_V2_ENABLED", "1")
    sys.exit(main())
