"""The import child's memory limit is on its address space: what it reserves counts as much as what it uses. A
parquet table of a few megabytes imports under a limit well below the default's; a limit too small to read under
is named as memory, not as a bare signal."""

import pandas as pd
import pytest

from runs.models import Rollout
from tests.api.conftest import api_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(tmp_path, settings):
    settings.GRPO_IMPORT_ROOTS = [tmp_path / "imports"]
    settings.GRPO_IMPORT_ROOTS[0].mkdir()
    return settings.GRPO_IMPORT_ROOTS[0]


def _tables(root, name: str, steps: int) -> str:
    folder = root / name / "completions"
    folder.mkdir(parents=True)
    for step in range(1, steps + 1):  # 64 rows a step, 8 groups of 8, many small row groups: Arrow's threads work
        rows = 64
        pd.DataFrame(
            {
                "step": [step] * rows,
                "prompt": [f"prompt {i // 8} " * 20 for i in range(rows)],
                "completion": [f"completion {step}/{i} " * 200 for i in range(rows)],
                "r": [float(i % 2) for i in range(rows)],
                "advantage": [1.0 if i % 2 else -1.0 for i in range(rows)],
            }
        ).to_parquet(folder / f"completions_{step:05d}.parquet", row_group_size=4)
    return name


def _post(owner, path):
    return api_client(owner).post("/api/runs/import", {"path": path}, content_type="application/json")


def test_a_parquet_run_imports_under_a_tight_address_space_limit(owner, root, settings):
    # Arrow's default allocator and thread pool: under 360 MB that child could not read the table (malloc failed)
    settings.GRPO_RUN_IMPORT_MEMORY_BYTES = 360 * 1024**2
    answer = _post(owner, _tables(root, "run", steps=6))
    assert answer.status_code == 201, answer.content
    assert Rollout.objects.filter(run_id=answer.json()["id"]).count() == 6 * 64


def test_a_limit_too_small_to_read_under_is_named_as_memory(owner, root, settings):
    settings.GRPO_RUN_IMPORT_MEMORY_BYTES = 200 * 1024**2
    answer = _post(owner, _tables(root, "run", steps=2))
    assert answer.status_code == 400, answer.content
    error = " ".join(answer.json()["errors"])
    assert "needs more than 200 MB of memory to read, the limit" in error, error
