"""What the app and the training programs share, and nothing else: the run config (``config``), the event log
(``events``), TRL's and verl's field lists and defaults, verl's dumps as events, the solve criterion (``scoring``),
the resource meter (``resources``) and the demo's rows (``demo_data``).

A distribution of its own (protocol/, ``pip install -e ./protocol``): no Django, no project package, so ``runs`` and
``workers.training`` both stand on it and the app never imports the training program.
"""
