from runs.models.lifecycle import *  # noqa: F401,F403
