"""Every model change has its migration: a model edited without one (or a constraint moved to the wrong model) fails
here rather than on a user's `migrate`."""

import io

import pytest
from django.core.management import call_command


@pytest.mark.django_db
def test_the_models_need_no_new_migration():
    out = io.StringIO()
    try:
        call_command("makemigrations", "--check", "--dry-run", stdout=out, stderr=out)
    except SystemExit as exc:
        pytest.fail(f"makemigrations would write a migration (exit {exc.code}):\n{out.getvalue()}")
