"""A JSON field of the run form that does not parse names the line and column as a person counts them, from 1 in
characters, and no 0-based character offset beside them (issue 28, item 13)."""

import pytest

from rewards.models import RewardFunction
from runs.lifecycle.forms import RunForm
from tests.conftest import run_form_data

pytestmark = pytest.mark.django_db


def test_a_bad_json_field_names_its_line_and_column(owner, dataset_version):
    rf = RewardFunction.objects.get(owner=owner, name="digit_ratio")
    data = {**run_form_data(owner), f"reward_{rf.pk}": "on", "trl_generation_kwargs": '{"top_k": 2,\n "é": x}'}
    form = RunForm(data, owner=owner)
    assert not form.is_valid()
    assert form.errors["trl_generation_kwargs"] == ["not JSON (Expecting value at line 2, column 7)"]
