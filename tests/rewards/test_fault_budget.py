"""The fault budget the training program keeps for each sandboxed reward function, tool and environment."""

from rewards.sandbox.faults import FaultBudget


def test_it_is_disabled_by_the_fault_that_spends_the_budget_and_not_before():
    budget = FaultBudget(3)
    assert [budget.spend() for _ in range(3)] == [False, False, True]
    assert budget.disabled and budget.faults == 3


def test_a_budget_of_zero_is_spent_by_the_first_fault_not_from_the_start():
    budget = FaultBudget(0)
    assert not budget.disabled
    assert budget.spend() and budget.faults == 1
