"""A refused import names the path as it lies in the import folder, never the server's own folders: where the app
keeps its data is not a user's to read in an error."""

import pytest

from runs.models import Run, RunImport
from tests.api.conftest import api_client

pytestmark = pytest.mark.django_db


@pytest.fixture
def root(settings, tmp_path):
    root = tmp_path / "server-data" / "imports"
    root.mkdir(parents=True)
    (root / "runs").mkdir()
    settings.GRPO_IMPORT_ROOTS = [root]
    return root


@pytest.mark.parametrize(
    "body, named",
    [
        ({"path": "runs/no-such-run"}, "path: 'runs/no-such-run' does not exist in the import folder"),
        ({"path": "ROOT/runs/gone"}, "path: 'runs/gone' does not exist in the import folder"),
        ({"path": "../elsewhere"}, "only files under the import folders (GRPO_IMPORT_ROOTS)"),
        ({"path": "/etc"}, "only files under the import folders (GRPO_IMPORT_ROOTS)"),
        ({"path": "runs", "validation_path": "runs/no-val"}, "'runs/no-val' does not exist in the import folder"),
    ],
)
def test_a_refusal_names_the_path_inside_the_import_folder_only(owner, root, body, named):
    body = {k: v.replace("ROOT", str(root)) for k, v in body.items()}
    answer = api_client(owner).post("/api/runs/import", {**body, "source": "verl"}, content_type="application/json")
    assert answer.status_code == 400, answer.content
    error = " ".join(answer.json()["errors"])
    assert named in error, error
    assert "server-data" not in error and str(root.parent) not in error
    assert not Run.objects.exists() and not RunImport.objects.exists()
