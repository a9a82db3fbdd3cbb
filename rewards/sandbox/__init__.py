"""Run user-written reward functions in a sandboxed worker process, with TRL's reward contract.

No Django here: the training process uses this package directly. The threat model is in ``docs/sandbox.md``.

    from rewards.sandbox import Sandbox, SandboxError, SandboxTimeout, SandboxCrash, SandboxUnavailable
    from rewards.sandbox import sandbox_support

    with Sandbox(source, "accuracy", slot=0, timeout_s=5.0) as sb:      # start(): raises SandboxUnavailable when
        res = sb.call(completions, prompts=prompts, answer=answers)    # the kernel cannot isolate (fail closed),
        res.rewards              # list[float | None]                  # SandboxError for a SyntaxError, an error
        res.stdout, res.stdout_truncated, res.duration_s               # at import, or no function "accuracy"
        res.logged_extra         # {column: [values]}   from log_extra(column, values) in user code
        res.logged_metrics       # {name: [values]}     from log_metric(name, value)

``Sandbox(source, func_name, *, slot=0, timeout_s=5.0, memory_mb=1024, cpu_limit_s=600.0, scratch_mb=64,
scratch_root=None, max_message_mb=64, stdout_limit=65536, startup_timeout_s=30.0, private_mounts=None,
allow_weak=False)``

- ``source`` defines ``def func_name(completions, prompts=None, completion_ids=None, **kwargs)`` returning one float,
  int, bool (as 0.0/1.0) or None per completion, exactly as for TRL. At most 1 MiB (``SandboxError``
  kind ``SourceTooLarge`` from the constructor).
- ``call(completions, prompts=None, completion_ids=None, trainer_state=None, log_extra=None, log_metric=None,
  **columns) -> CallResult`` calls it the way TRL does: ``prompts=``, ``completions=``, ``completion_ids=``, the
  dataset columns and ``trainer_state`` (an object with ``global_step``, ``max_steps``, ``epoch``,
  ``num_train_epochs``) as keyword arguments, plus ``log_extra`` / ``log_metric`` functions that record. Pass TRL's
  ``log_extra`` / ``log_metric`` and the records are replayed into them after a successful call
  (``CallResult.replay`` does the same by hand). A TRL reward function is then
  ``lambda completions, **kw: sb.call(completions, **kw).rewards``.
- Every failure raises ``SandboxError`` (``.kind``, ``.message``, ``.line`` in the user's source, ``.stdout``,
  ``.traceback``): the user's exception (the worker lives on), ``InvalidResult`` (not a list, wrong length, NaN,
  inf, a string...), ``SandboxTimeout`` (past ``timeout_s``: SIGKILL) and ``SandboxCrash`` (segfault, ``os._exit``,
  a signal, a CPU or memory limit, a malformed or oversized reply). After those two the next call starts a fresh
  worker, transparently.
- Counters: ``calls``, ``failures`` (calls that raised), ``faults`` (workers lost); disable a function after K
  faults. ``start_time_s`` is the last start's duration; ``isolation`` what the worker applied (``uid``,
  ``landlock``, ``landlock_abi``, ``seccomp``, ``private_mounts``, ``weak``).
- ``slot`` picks the worker's uid (61000 + slot, when this process is root) and scratch: give each live Sandbox
  its own. The worker dies with the thread that started it (``PR_SET_PDEATHSIG``): start it from a long-lived thread.
- ``allow_weak=True`` or ``GRPO_SANDBOX_ALLOW_WEAK=1`` runs user code even where Landlock or seccomp is missing,
  or, not being root, Landlock cannot scope signals (ABI < 6); otherwise ``start()`` refuses.
- ``private_mounts``: None uses a private mount namespace (tmpfs root and scratch) when the kernel allows one,
  True requires it, False never uses it (the scratch is then a host directory checked after each call).

``sandbox_support() -> dict``: ``landlock_abi``, ``seccomp``, ``can_setuid``, ``arch``, ``missing``, ``ok``.
"""

from rewards.sandbox.host import (
    CallResult,
    Sandbox,
    SandboxCrash,
    SandboxError,
    SandboxTimeout,
    SandboxUnavailable,
    sandbox_support,
)

__all__ = ["CallResult", "Sandbox", "SandboxCrash", "SandboxError", "SandboxTimeout", "SandboxUnavailable",
           "sandbox_support"]
