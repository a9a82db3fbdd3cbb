"""Two writers never share a spool: while one process holds a spool folder's lock (the attach client takes it before
it writes), another process is refused it, and gets it once the first lets go."""

import os
import subprocess
import sys

from grpo_web_attach.capture import spool_lock

from tests.conftest import BASE_DIR

HOLD = "import sys; from pathlib import Path; from grpo_web_attach.capture import spool_lock; "
HOLD += "lock = spool_lock(Path(sys.argv[1])); print(lock is not None, flush=True); sys.stdin.read()"


def test_a_spool_another_process_writes_is_refused_until_it_lets_go(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(BASE_DIR / "attach")}
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(tmp_path)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout.readline().strip() == "True"
        assert spool_lock(tmp_path) is None
    finally:
        holder.communicate("", timeout=30)  # its stdin closes: it ends, and its lock with it
    lock = spool_lock(tmp_path)
    assert lock is not None
    lock.close()
