"""Settings for the test suite: the same settings, with a data folder (and so an embedded Redis, SQLite file and run
folders) of its own, so tests never touch a demo running from the same checkout."""

import os
from pathlib import Path

os.environ.setdefault("GRPO_DATA_DIR", str(Path(__file__).resolve().parent.parent / "var" / "test"))

from grpo_web.settings import *  # noqa: E402,F403

PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]  # fast logins in tests
