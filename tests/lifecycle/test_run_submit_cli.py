"""`python manage.py submit_run config.yaml` queues a run that a real worker trains."""

import pytest
from django.core.management import call_command

from runs.models import Run
from tests.conftest import wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]


def test_submit_run_from_a_trl_yaml(celery_worker, owner, dataset_version, tmp_path, capsys):
    path = tmp_path / "grpo.yaml"
    path.write_text(
        "name: from yaml\nmodel_name_or_path: tiny\ndataset_name: arithmetic\nreward_funcs: [digit_ratio]\n"
        "num_generations: 4\nper_device_train_batch_size: 8\nmax_steps: 2\nadam_beta1: 0.8\n"
    )
    call_command("submit_run", str(path), "--user", owner.username)
    # digit_ratio is the user's copy: a worker of the checks queue checks it, then queues the run
    assert "its rewards being checked" in capsys.readouterr().out
    run = Run.objects.get(name="from yaml")
    assert run.config_extra == {"adam_beta1": 0.8}
    wait_for(lambda: run.refresh_from_db() or run.is_finished, timeout=120, what="the run")
    assert run.status == Run.Status.COMPLETED, run.error
    assert run.step == 2
