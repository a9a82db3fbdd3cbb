"""The built-in reward functions as trusted in-process callables (tests, benchmarks, the capture benchmark, and
``code_tests``, which runs completions' code in the sandbox).

Their source lives in ``rewards/library/``, one self-contained file each; users get editable copies that run in the
sandbox.
"""

from rewards.code_tests import code_tests
from rewards.library import NAMES, OPEN_R1, function

BUILTINS = {name: function(name) for name in NAMES + OPEN_R1}
BUILTINS["code_tests"] = code_tests  # drives the sandbox's code-test template: not a template users copy
