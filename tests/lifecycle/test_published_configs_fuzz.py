"""No import path answers a 5xx on a fuzz of the published corpus (issue 27): a seeded, bounded set of variants, each
with one key dropped, emptied or given a value of another type, goes through the import the API uses and the check
made before a run is queued (and the refused ones through POST /api/runs); each is taken, or refused with messages
that each name a key."""

import copy
import random
import re

import pytest
import yaml

from runs.lifecycle.services import spec_problems
from runs.lifecycle.spec import RunRefused, RunSpec, api_import
from runs.lifecycle.training_config import run_train_config
from runs.models import Run
from tests.api.conftest import api_client
from tests.lifecycle.published_corpus import corpus_files, corpus_mapping, corpus_owner_setup

pytestmark = pytest.mark.django_db

SEED = 27
VARIANTS = 100
OTHER_TYPES = ("text", 7, -3, 0.5, True, None, [1, "a"], {"k": 1}, "")
# "key: message": a message names its key (dotted, bracketed or slashed names included) before the colon
NAMED = re.compile(r"^(line \d+: )?[\w.\[\]/ -]+: ")


def paths(data, prefix=()):
    """Every key path of a nested mapping."""
    for key, value in data.items():
        yield (*prefix, key)
        if isinstance(value, dict):
            yield from paths(value, (*prefix, key))


def variant(data: dict, path: tuple, how):
    data = copy.deepcopy(data)
    node = data
    for key in path[:-1]:
        node = node[key]
    if how == "drop":
        del node[path[-1]]
    else:
        node[path[-1]] = how
    return data


def variants():
    rng = random.Random(SEED)
    corpus = {name: corpus_mapping(name) for name in corpus_files()}
    for _ in range(VARIANTS):
        name = rng.choice(sorted(corpus))
        path = rng.choice(list(paths(corpus[name])))
        how = rng.choice(("drop", *OTHER_TYPES))
        yield name, path, how, variant(corpus[name], path, how)


def test_no_variant_of_a_published_config_gets_a_5xx(owner, tiny_model):
    corpus_owner_setup(owner)
    api = api_client(owner)
    refused = 0
    for name, path, how, data in variants():
        text = yaml.safe_dump(data, sort_keys=False)
        where = (name, ".".join(map(str, path)), how)
        try:
            imported = api_import(yaml_text=text, config=None, owner=owner)
            spec = RunSpec.from_imported(imported)
            errors = spec_problems(spec, owner=owner, queue_anyway=True)
            if not errors:
                run_train_config(spec.as_run(), slot_base=0, write_files=False)  # what run_create builds next
        except RunRefused as exc:
            errors = exc.errors
        assert all(isinstance(e, str) and NAMED.match(e) for e in errors), (where, errors)
        if errors:
            refused += 1
            response = api.post("/api/runs", {"yaml": text, "queue_anyway": True}, content_type="application/json")
            assert response.status_code == 400, (where, response.status_code, response.content[:300])
            assert response.json()["errors"], where
    assert not Run.objects.exists()
    assert 0 < refused < VARIANTS
