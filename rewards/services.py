import inspect

from rewards.builtins import BUILTINS
from rewards.models import RewardFunction


def reward_builtins_install(*, owner) -> list[RewardFunction]:
    """Give ``owner`` a copy of each built-in reward function (skipping names they already have)."""
    created = []
    for name, func in BUILTINS.items():
        rf, was_created = RewardFunction.objects.get_or_create(
            owner=owner, name=name,
            defaults={"builtin": name, "description": inspect.getdoc(func) or "", "source": inspect.getsource(func)},
        )
        if was_created:
            created.append(rf)
    return created
