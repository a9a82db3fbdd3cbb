"""Demo content for a fresh install: a user, and the locally generated demo datasets (nothing is downloaded)."""

from __future__ import annotations

import dataclasses
import io
import json

from django.contrib.auth import get_user_model
from django.db.models import Q
from grpo_web_protocol.demo_data import (
    arithmetic_rows,
    arithmetic_tool_rows,
    letter_count_rows,
    python_task_rows,
    word_problem_rows,
    worked_answer_rows,
)

from runs.datasets.mapping import Mapping
from runs.datasets.services import dataset_import, dataset_version_map, import_folders
from runs.models import Dataset, DatasetVersion

# The run form's default dataset (the README's quick start), and the R1 recipe template's worked answers: found by
# these names, whichever was loaded last.
QUICK_START_DATASET = "arithmetic (demo)"
WORKED_ANSWERS_DATASET = "worked answers (demo)"

# name -> (rows, import options)
DEMO_DATASETS = {
    "letter counting (demo)": (lambda: letter_count_rows(200, seed=0), {}),
    # GSM8K's shape: the "#### <answer>" line is parsed into 'answer', the worked solution kept in 'solution'
    "word problems (demo)": (
        lambda: word_problem_rows(100, seed=0),
        {"prompt_column": "question", "gsm8k_column": "answer"},
    ),
    # the code_tests reward's data: a tests column of asserts or stdin/stdout pairs, and a reference solution
    "python tasks (demo)": (lambda: python_task_rows(120, seed=0), {}),
    # chat prompts offering the calculator tool: a run with the calculator and the 'tiny-tools' model calls it
    "arithmetic with a calculator (demo)": (lambda: arithmetic_tool_rows(200, seed=0), {}),
    QUICK_START_DATASET: (lambda: arithmetic_rows(200, seed=0), {}),
    # the arithmetic prompts answered in the <think>...</think> \\boxed{} format (a completion column): the R1 and
    # distill recipe templates' worked answers, and an SFT run's data
    WORKED_ANSWERS_DATASET: (lambda: worked_answer_rows(200, seed=7), {}),
}


def user_made(versions):
    """``versions`` less those an import made (a config's prompt column or system prompt mapped onto a dataset's
    rows): a config only previewed must not move what any form offers by default."""
    return versions.filter(Q(provenance__kind__isnull=True) | ~Q(provenance__kind="import"))


def newest_named(versions, name: str) -> DatasetVersion | None:
    """The newest of ``versions`` (a queryset, newest first) of a dataset called ``name`` that no import made."""
    return user_made(versions).filter(dataset__name=name).first()


def form_default(versions, owner, name: str) -> DatasetVersion | None:
    """A form's default dataset version: the newest of the dataset called ``name`` (the README's quick start), else
    the newest ``owner`` uploaded, else (a user with none of their own) the newest shared with them. The owner's own
    come first and no import's count, so that nothing but the owner's own upload moves the default of a user who has
    one: not a previewed config's mapping, nor a teammate sharing a run or a dataset."""
    mine = user_made(versions).filter(dataset__owner=owner)
    return newest_named(mine, name) or newest_named(versions, name) or mine.first() or user_made(versions).first()


def demo_load(*, username: str = "demo", password: str) -> tuple[object, list[DatasetVersion]]:
    """Create the demo user (staff, so it manages users in /admin/) and datasets; run again, it changes nothing but
    the password."""
    User = get_user_model()
    user, created = User.objects.get_or_create(username=username)
    if created or not user.check_password(password):
        user.set_password(password)
        user.save(update_fields=["password"])
    if not (user.is_staff and user.is_superuser):
        # the demo's one user runs the install: it adds, invites and deactivates users in Django's admin (/admin/)
        user.is_staff = user.is_superuser = True
        user.save(update_fields=["is_staff", "is_superuser"])
    import_folders()  # the import form's Local path reads it: there from the start, empty
    versions = []
    for name, (rows, options) in DEMO_DATASETS.items():
        dataset = Dataset.objects.filter(owner=user, name=name).first()
        if dataset and dataset.latest_version:
            versions.append(dataset.latest_version)
            continue
        data = "".join(json.dumps(r) + "\n" for r in rows()).encode()
        source = name.removesuffix(" (demo)").replace(" ", "_") + ".jsonl"
        version = dataset_import(
            owner=user, name=name, stream=io.BytesIO(data), source_name=source, dataset=dataset, **options
        )
        # a tenth held out, so runs can evaluate on prompts they never train on (eval_steps)
        versions.append(
            dataset_version_map(
                version=version,
                mapping=dataclasses.replace(Mapping.of(version), split="fraction", eval_fraction=0.1, split_seed=0),
            )
        )
    return user, versions
