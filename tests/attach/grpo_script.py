"""A plain TRL GRPO script, as a user writes one, with the attach client's one line: no Django, nothing of
grpo-web but grpo_web_attach. python grpo_script.py MODEL OUTPUT_DIR [--resume] [--callback] [--tools]
[--generated-reward]
[--vllm-server URL]

GRPO_WEB_URL and GRPO_WEB_TOKEN say where to send; KILL_AT_STEP=n kills this process (SIGKILL, nothing flushed)
at the end of optimizer step n, to test a resume from its checkpoint. --tools: a multi-turn run with TRL's ``tools``
(a calculator) on chat prompts, for a model with a tool chat template (the suite's tiny-tools). --generated-reward:
a third reward function made from a string at run time, whose source inspect cannot find (the client sends none).
TOKEN_SAMPLE_GROUPS=n: attach(..., token_sample_groups=n); FLUSH_TIMEOUT=s: attach(..., flush_timeout=s); USE_CPU=0:
GRPOConfig without use_cpu (a script written for GPUs, launched on a machine without them); BETA and
NUM_ITERATIONS: GRPOConfig's; NUL_BIAS=b: the model writes NUL (its token biased by b in generate's sequence_bias)
and each row has a column holding NUL; WATCH_TRL=path:
TRL's own per-token tensors at each update, recorded by the tests' tracer (tests/trl_oracle.py), are written to path
as JSON once training ends. --vllm-server URL: generate with TRL's server mode (use_vllm=True, vllm_mode="server")
through the ``trl vllm-serve`` at URL; NO_WEIGHT_SYNC=1 (the CPU test's, where NCCL is not) leaves out the NCCL
transport of TRL's weight sync into it (without_nccl_weight_sync)."""

import importlib.util
import os
import signal
import sys
from pathlib import Path

import grpo_web_attach
from datasets import Dataset
from transformers import TrainerCallback
from trl import GRPOConfig, GRPOTrainer


def digit_ratio(completions, **kwargs):
    return [sum(ch.isdigit() for ch in c) / max(len(c), 1) for c in completions]


def sometimes_none(completions, answer, **kwargs):
    return [None if i % 3 == 0 else float(a in c) for i, (c, a) in enumerate(zip(completions, answer))]


def library_calculator():
    # the calculator of grpo-web's tool library, as a user's script would define its own tool: loaded from its file
    # (a plain function, no grpo-web import), so the script runs no Django and the test checks one calculator
    path = Path(__file__).resolve().parents[2] / "rewards" / "library" / "calculator.py"
    spec = importlib.util.spec_from_file_location("calculator_tool", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.calculator


calculator = library_calculator()


def boxed_answer(completions, answer, **kwargs):
    # a conversational completion: its turns, the last one the model's answer after the tool's result
    return [float(f"\\boxed{{{a}}}" in c[-1]["content"]) for c, a in zip(completions, answer)]


def generated_reward():
    # made at run time, as a notebook cell or a config-driven script makes one: no file holds its source
    namespace = {}
    exec("def short(completions, **kwargs):\n    return [float(len(c) < 20) for c in completions]\n", namespace)
    return namespace["short"]


def without_nccl_weight_sync():
    """TRL's weight sync into a vLLM server goes over NCCL, which needs a CUDA device: VLLMClient.init_communicator
    joins the server's NCCL group (it refuses a CPU device) and update_named_params broadcasts each tensor over it.
    On a machine without a GPU these two do nothing, and nothing else changes: TRL's sync_weights still runs before
    each step's generation, gathers the parameters (walked here as the broadcast walks them) and resets the server's
    prefix cache over HTTP; generation, rewards, advantages and the logged tables are TRL's own. The server keeps
    generating with the weights it loaded."""
    from trl.generation.vllm_client import VLLMClient

    def init_communicator(self, device=0):
        pass

    def update_named_params(self, metadata, named_params):
        for _ in named_params:
            pass

    VLLMClient.init_communicator = init_communicator
    VLLMClient.update_named_params = update_named_params


class KillAt(TrainerCallback):
    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == int(os.environ.get("KILL_AT_STEP", "0")):
            os.kill(os.getpid(), signal.SIGKILL)


def main():
    model, output_dir = sys.argv[1], sys.argv[2]
    tools = "--tools" in sys.argv
    server = {}
    if "--vllm-server" in sys.argv:
        url = sys.argv[sys.argv.index("--vllm-server") + 1]
        server = {"use_vllm": True, "vllm_mode": "server", "vllm_server_base_url": url}
        if os.environ.get("NO_WEIGHT_SYNC") == "1":
            without_nccl_weight_sync()
    rows = [{"prompt": f"What is {a} + {a + 1}?", "answer": str(2 * a + 1)} for a in range(32)]
    if tools:  # TRL calls tools only in conversations
        rows = [{**r, "prompt": [{"role": "user", "content": f"{r['prompt']} Use the calculator."}]} for r in rows]
    generation = {}
    if "NUL_BIAS" in os.environ:  # a model that writes NUL: the byte-level token of byte 0 biased up, a NUL column
        from transformers import AutoTokenizer

        nul = AutoTokenizer.from_pretrained(model).convert_tokens_to_ids("\u0100")  # byte 0 in byte-level BPE
        generation = {"generation_kwargs": {"sequence_bias": [[[nul], float(os.environ["NUL_BIAS"])]]}}
        rows = [{**r, "note": f"row\x00{i} \u2400"} for i, r in enumerate(rows)]
    args = GRPOConfig(
        output_dir=output_dir,
        num_generations=4,
        per_device_train_batch_size=8,
        max_steps=int(os.environ.get("MAX_STEPS", "2")),
        beta=float(os.environ.get("BETA", "0")),
        num_iterations=int(os.environ.get("NUM_ITERATIONS", "1")),
        max_completion_length=48 if tools else 12,
        learning_rate=1e-6 if tools else 1e-2,
        seed=11,
        log_completions=True,
        logging_steps=1,
        save_steps=1,
        save_only_model=False,
        report_to="none",
        gradient_checkpointing=False,
        # USE_CPU=0: no use_cpu (nor bf16, which transformers refuses without a GPU unless use_cpu is set)
        **({"use_cpu": True} if os.environ.get("USE_CPU", "1") == "1" else {"bf16": False}),
        **server,
        **generation,
    )
    callbacks = [KillAt()]
    if "--callback" in sys.argv:
        callbacks.append(grpo_web_attach.GrpoWebCallback(name="attached by callback"))
    reward_funcs = [boxed_answer] if tools else [digit_ratio, sometimes_none]
    if "--generated-reward" in sys.argv:
        reward_funcs.append(generated_reward())
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=reward_funcs,
        tools=[calculator] if tools else None,
        args=args,
        train_dataset=Dataset.from_list(rows),
        callbacks=callbacks,
    )
    if "--callback" not in sys.argv:
        tokens = (
            {"token_sample_groups": int(os.environ["TOKEN_SAMPLE_GROUPS"])}
            if "TOKEN_SAMPLE_GROUPS" in os.environ
            else {}
        )
        if "FLUSH_TIMEOUT" in os.environ:
            tokens["flush_timeout"] = float(os.environ["FLUSH_TIMEOUT"])
        grpo_web_attach.attach(trainer, name="attached", **tokens)
    if os.environ.get("WATCH_TRL"):
        spec = importlib.util.spec_from_file_location("trl_oracle", Path(__file__).parents[1] / "trl_oracle.py")
        oracle = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(oracle)
        with oracle.Watching(trainer) as calls:
            trainer.train()
        oracle.dump(calls, os.environ["WATCH_TRL"])
        return
    trainer.train(resume_from_checkpoint="--resume" in sys.argv)


if __name__ == "__main__":
    main()
