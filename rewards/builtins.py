"""The built-in reward functions as trusted in-process callables (tests, benchmarks, the capture benchmark, and
``code_tests``, which runs completions' code in the sandbox).

Their source lives in ``rewards/library/``, one self-contained file each; users get editable copies that run in the
sandbox.
"""

from rewards.code_tests import code_tests
from rewards.library import NAMES, OPEN_R1, OUMI, function

BUILTINS = {name: function(name) for name in NAMES + OPEN_R1 + OUMI}
BUILTINS["code_tests"] = code_tests  # drives the sandbox's code-test template: not a template users copy

# Built-ins a run uses as they are, in the training process, with no editable copy: they drive a sandbox themselves.
TRUSTED = {
    "code_tests": "Runs the completion's last code block against the row's `tests` column (asserts or "
    "stdin/stdout pairs; else open-r1's `verification_info`), each test in its own sandboxed process; the share "
    "that pass."
}
