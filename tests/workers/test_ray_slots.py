"""A Ray run's sandbox slots (uid 61000 + slot on the cluster's nodes): no two live Ray attempts hold the same range,
whatever their run ids; an ended attempt's range is free again. No Ray needed."""

import uuid

import pytest
from django.db import IntegrityError, transaction

from rewards.sandbox.host import MAX_SLOT
from runs.models import Run
from workers.placement import RAY_SLOT_RANGES, SLOTS_PER_PROCESS, NoSlots, ray_slot_base

pytestmark = pytest.mark.django_db


def live(owner, dataset_version) -> Run:
    return Run.objects.create(
        owner=owner,
        name="ray",
        model="tiny",
        dataset_version=dataset_version,
        rewards=[],
        config={},
        total_steps=1,
        engine="ray",
        num_workers=2,
        status=Run.Status.RUNNING,
        lease=uuid.uuid4(),
    )


def test_live_ray_runs_hold_distinct_ranges_inside_the_sandboxs_slots(owner, dataset_version):
    runs = [live(owner, dataset_version) for _ in range(len(RAY_SLOT_RANGES))]
    bases = [ray_slot_base(run) for run in runs]
    assert len(set(bases)) == len(runs)
    assert min(bases) >= 2200 and max(bases) + SLOTS_PER_PROCESS - 1 <= MAX_SLOT
    assert sorted(Run.objects.values_list("ray_slot_base", flat=True)) == sorted(bases)  # stored with the run
    with pytest.raises(NoSlots, match="every sandbox slot range for Ray runs is held"):
        ray_slot_base(live(owner, dataset_version))


def test_an_ended_attempts_range_is_taken_by_the_next(owner, dataset_version):
    first, second = live(owner, dataset_version), live(owner, dataset_version)
    base = ray_slot_base(first)
    first.mark_completed()  # the attempt gives up its lease
    assert ray_slot_base(second) == base


def test_the_database_refuses_a_range_to_a_second_live_attempt(owner, dataset_version):
    # what keeps two supervisors that read the same free range at once from both keeping it
    first, second = live(owner, dataset_version), live(owner, dataset_version)
    base = ray_slot_base(first)
    with pytest.raises(IntegrityError), transaction.atomic():
        Run.objects.filter(pk=second.pk).update(ray_slot_base=base)
    assert ray_slot_base(second) != base
