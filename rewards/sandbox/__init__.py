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
allow_weak=False, log_names=64, run_log_names=256)``

- ``source`` defines ``def func_name(completions, prompts=None, completion_ids=None, **kwargs)`` returning one float,
  int, bool (as 0.0/1.0) or None per completion, exactly as for TRL. At most 1 MiB (``SandboxError``
  kind ``SourceTooLarge`` from the constructor).
- ``call(completions, prompts=None, completion_ids=None, trainer_state=None, log_extra=None, log_metric=None,
  **columns) -> CallResult`` (a column may be named ``self``) calls it the way TRL does: ``prompts=``,
  ``completions=``, ``completion_ids=``, the dataset columns and ``trainer_state`` (an object with
  ``global_step``, ``max_steps``, ``epoch``, ``num_train_epochs``) as keyword arguments, plus ``log_extra`` / ``log_metric`` functions that record. Pass TRL's
  ``log_extra`` / ``log_metric`` and the records are replayed into them after a successful call
  (``CallResult.replay`` does the same by hand). A TRL reward function is then
  ``lambda completions, **kw: sb.call(completions, **kw).rewards``.
- Every failure raises ``SandboxError`` (``.kind``, ``.message``, ``.line`` in the user's source, ``.stdout``,
  ``.traceback``), and nothing else does, whatever the worker sends: the user's exception (the worker lives on; one
  whose class is named like one of ours comes back as ``UserException``), ``InvalidResult`` (not a list, wrong
  length, NaN, inf, a string...), ``LogTooLarge`` (log_extra / log_metric past 100,000 values or 8 Mi characters,
  ``log_names`` distinct columns or metric names in one call, ``run_log_names`` over the Sandbox's life, a name past
  200 characters; ``logged_columns`` / ``logged_metrics`` hold the names so far; logged values are scalars, or
  their ``str()``, except the ``step_scores`` column's ``{"split", "scores"}`` dicts, bounded by
  ``rewards/step_scores.py``: another shape there is ``InvalidResult``),
  ``SandboxTimeout`` (past ``timeout_s``: SIGKILL) and ``SandboxCrash`` (segfault, ``os._exit``, a signal, a CPU or
  memory limit; kind ``ProtocolError`` for any reply an honest worker could not have sent). After those two the
  next call starts a fresh worker, transparently.
- Between calls the worker is frozen (SIGSTOP); its CPU time is read from /proc, never from its replies.
- Counters: ``calls``, ``failures`` (calls that raised), ``faults`` (workers lost, protocol violations included);
  disable a function after K faults. ``start_time_s`` is the last start's duration; ``isolation`` what the worker
  applied (``uid``, ``landlock``, ``landlock_abi``, ``seccomp``, ``private_mounts``, ``weak``), as it reported
  before any user code ran and as /proc confirms.
- ``slot`` picks the worker's uid (61000 + slot, when this process is root) and scratch: give each live Sandbox
  its own. The worker dies with the thread that started it (``PR_SET_PDEATHSIG``): start it from a long-lived thread.
- ``allow_weak=True`` or ``GRPO_SANDBOX_ALLOW_WEAK=1`` runs user code even where no private mount root can be
  made, Landlock or seccomp is missing, or, not being root, Landlock cannot scope signals (ABI < 6); otherwise
  ``start()`` refuses. ``isolation["weak"]`` then lists what was missing.
- ``private_mounts``: None and True use a private mount namespace (tmpfs root and scratch), refusing where the
  kernel allows none unless weak mode is on; False never uses it (weak mode only: the scratch is then a host
  directory checked after each call).

``rewards.sandbox.code.CodeRunner`` runs code against tests, one confined process per test forked by a warm
template's spawner (the ``code_tests`` reward, ``rewards/code_tests.py``); the template judges each test.

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

__all__ = [
    "CallResult",
    "Sandbox",
    "SandboxCrash",
    "SandboxError",
    "SandboxTimeout",
    "SandboxUnavailable",
    "sandbox_support",
]
