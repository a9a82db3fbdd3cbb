"""The built-in reward functions as trusted in-process callables (tests, benchmarks, the capture benchmark).

Their source lives in ``rewards/library/``, one self-contained file each; users get editable copies that run in the
sandbox.
"""

from rewards.library import NAMES, OPEN_R1, function

BUILTINS = {name: function(name) for name in NAMES + OPEN_R1}
