"""Per-step (process) scores: the one structured value a reward function logs through TRL's ``log_extra``.

A function logs the column ``step_scores`` with one value per completion: ``{"split": <the delimiter>, "scores":
[a number or None per step]}`` (``"pattern": True`` when ``split`` is a regular expression), or None for a
completion it did not split. In process (built-ins) TRL keeps whatever it is given; from the sandbox only values of
this shape, within these bounds, come back (rewards/sandbox/child.py converts, rewards/sandbox/replies.py checks),
and the ingest (runs/rollouts/ingest.py) keeps the same bounds for what the event log holds.

No Django: the sandbox host, the training program and the ingest all read it.
"""

COLUMN = "step_scores"
MAX_STEP_SCORES = 4096  # steps (scores) of one completion
MAX_SPLIT_CHARS = 200  # characters of the delimiter or pattern
KEYS = frozenset({"split", "scores", "pattern"})
