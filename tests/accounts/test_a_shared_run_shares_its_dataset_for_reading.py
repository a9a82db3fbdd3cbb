"""A team that may read a run may read the dataset version it trained on (issue 28: a teammate got 404 on a shared
run's dataset): its page, its rows, in the browser and the API, and training on it; not the dataset's other
versions, not changing it; and nobody outside the team."""

import dataclasses

import pytest
from django.contrib.auth.models import Group
from django.urls import reverse

from runs.datasets.mapping import Mapping
from runs.datasets.services import dataset_version_map
from runs.models import RunShare
from tests.api.conftest import api_client
from tests.conftest import logged_in, run_form_data
from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db


@pytest.fixture
def shared_run(owner, member, dataset_version):
    team = Group.objects.create(name="lab")
    team.user_set.add(owner, member)
    run = make_run(owner, dataset_version, name="shared run")
    RunShare.objects.create(run=run, team=team)
    return run


def test_a_team_member_opens_the_dataset_of_a_run_shared_with_them(member, outsider, shared_run):
    version = shared_run.dataset_version
    reader = logged_in(member)
    run_page = reader.get(reverse("run_detail", args=[shared_run.pk])).content.decode()
    assert f'href="{version.get_absolute_url()}"' in run_page  # the run page links its dataset
    page = reader.get(version.get_absolute_url())
    assert page.status_code == 200 and "shared with you by owner" in page.content.decode()
    assert reader.get(reverse("dataset_detail", args=[version.dataset.pk])).status_code == 200
    rows = api_client(member).get(f"/api/datasets/{version.dataset.pk}/versions/{version.number}/rows")
    assert rows.status_code == 200 and rows.json()["total"] == version.row_count
    assert api_client(member).get(f"/api/datasets/{version.dataset.pk}").status_code == 200
    assert run_form_data(member, shared_run)["dataset_version"] == version.pk  # a clone of the run keeps its data
    for user in (outsider,):
        assert logged_in(user).get(version.get_absolute_url()).status_code == 404
        assert api_client(user).get(f"/api/datasets/{version.dataset.pk}").status_code == 404


def test_it_reads_only_the_runs_version_and_cannot_change_it(member, shared_run):
    version = shared_run.dataset_version
    other = dataset_version_map(
        version=version, mapping=dataclasses.replace(Mapping.of(version), split="fraction", eval_fraction=0.5)
    )
    reader = logged_in(member)
    assert reader.get(other.get_absolute_url()).status_code == 404
    page = reader.get(reverse("dataset_detail", args=[version.dataset.pk])).content.decode()
    assert f"v{version.number}" in page and other.get_absolute_url() not in page
    mapping = reverse("dataset_mapping", args=[version.dataset.pk, version.number])
    assert reader.post(mapping, {"action": "save"}).status_code == 404
    assert reader.get(reverse("dataset_upload_version", args=[version.dataset.pk])).status_code == 404
