"""A dataset is deleted by its owner with its versions and rows file; while a version is the data of anyone's run,
the delete is refused naming the runs. Anyone but the owner gets 404."""

from pathlib import Path

import pytest
from django.urls import reverse

from grpo_web.removal import DeleteRefused
from runs.deletion.services import dataset_delete
from runs.models import Dataset, DatasetShare, DatasetVersion
from tests.conftest import logged_in
from tests.rollouts.inspect_data import make_run

pytestmark = pytest.mark.django_db


def test_an_unused_dataset_goes_with_its_versions_and_rows_file(
    owner, eval_version, django_capture_on_commit_callbacks
):
    dataset, rows_file = eval_version.dataset, Path(eval_version.path)
    page = logged_in(owner).get(reverse("dataset_delete", args=[dataset.pk])).content.decode()
    assert "the dataset &#x27;arithmetic&#x27;" in page and "2 versions" in page and str(rows_file) in page
    with django_capture_on_commit_callbacks(execute=True):
        response = logged_in(owner).post(reverse("dataset_delete", args=[dataset.pk]))
    assert response.status_code == 302
    assert not Dataset.objects.filter(pk=dataset.pk).exists() and not DatasetVersion.objects.filter(dataset=dataset)
    assert not rows_file.exists()


def test_a_version_a_run_trains_on_is_refused_naming_the_run(owner, member, team, dataset_version):
    DatasetShare.objects.create(dataset=dataset_version.dataset, team=team)
    make_run(member, dataset_version, name="colleague's run")
    with pytest.raises(DeleteRefused) as refused:
        dataset_delete(dataset=dataset_version.dataset, user=owner)
    assert refused.value.reasons == ["v1 is the data of run 'colleague's run' of member: delete the run first"]
    response = logged_in(owner).post(reverse("dataset_delete", args=[dataset_version.dataset.pk]))
    assert response.status_code == 409 and "delete the run first" in response.content.decode()
    assert Path(dataset_version.path).exists() and DatasetVersion.objects.filter(pk=dataset_version.pk).exists()


def test_only_the_owner_deletes_a_dataset(owner, member, outsider, team, dataset_version):
    DatasetShare.objects.create(dataset=dataset_version.dataset, team=team, can_write=True)
    url = reverse("dataset_delete", args=[dataset_version.dataset.pk])
    for user in (member, outsider):
        assert logged_in(user).get(url).status_code == 404
        assert logged_in(user).post(url).status_code == 404
    assert Dataset.objects.filter(pk=dataset_version.dataset.pk).exists()
