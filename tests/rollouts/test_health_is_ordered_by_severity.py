"""The Health list puts what needs a look first: every warning, then the notes (info), then what is fine; on the
old order a warning computed late (a detector's) sat below a dozen fine signals."""

import pytest

from tests.rollouts.inspect_data import ingest, make_run, metrics_event
from tests.rollouts.test_run_health import health

pytestmark = pytest.mark.django_db


def test_warnings_come_first_then_notes_then_what_is_fine(owner_client, owner, dataset_version):
    run = make_run(owner, dataset_version, config={"beta": 0.0})
    entropy = [1.2, 1.1, 1.15, 1.0, 1.05, 1.1]  # fine
    loss = [0.0001] * 6  # near zero with beta=0: a note
    clipped = [0.05, 0.05, 0.05, 0.05, 0.7, 0.8]  # a warning, computed after the fine entropy signal
    ingest(
        run,
        *[
            metrics_event(i + 1, entropy=entropy[i], loss=loss[i], **{"completions/clipped_ratio": clipped[i]})
            for i in range(6)
        ],
    )
    levels = [s["level"] for s in health(owner_client, run).values()]
    assert {"warn", "info", "ok"} <= set(levels)
    assert levels == sorted(levels, key=["warn", "info", "ok"].index)
