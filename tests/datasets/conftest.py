import io
from pathlib import Path

import pytest
from django.conf import settings

from runs.datasets.importing import DatasetError
from runs.datasets.services import dataset_import
from runs.models import Dataset, DatasetVersion


def stored_files() -> set[Path]:
    """Everything in the datasets folder, the import work folders (.import-*) included."""
    folder = Path(settings.DATA_DIR) / "datasets"
    return set(folder.iterdir()) if folder.exists() else set()


@pytest.fixture
def refused(owner):
    """``refused(content, name, **kwargs)``: the errors for this upload, after checking that nothing at all was saved
    (no dataset, no version, no file, no work folder left behind)."""

    def refuse(content: bytes, name: str, **kwargs) -> list[str]:
        before = stored_files()
        with pytest.raises(DatasetError) as caught:
            dataset_import(owner=owner, name="bad", stream=io.BytesIO(content), source_name=name, **kwargs)
        assert not Dataset.objects.exists() and not DatasetVersion.objects.exists()
        assert stored_files() == before
        return caught.value.errors

    return refuse


@pytest.fixture(scope="module")
def small_limit_server(service_env, tmp_path_factory):
    """A web server whose upload limit is 1 MB."""
    from tests.conftest import running_web_server

    env = {**service_env, "GRPO_MAX_UPLOAD_BYTES": str(1024**2)}
    with running_web_server(env, tmp_path_factory.mktemp("web-small") / "web.log") as url:
        yield url
