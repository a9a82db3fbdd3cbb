from rewards.models import RewardFunctionVersion


def reward_specs(rewards: list[dict]) -> list[dict]:
    """A run's pinned rewards ({name, weight, version_id}) with the code of each pinned version, for the trainer."""
    versions = RewardFunctionVersion.objects.in_bulk([r["version_id"] for r in rewards if r.get("version_id")])
    specs = []
    for r in rewards:
        if r.get("version_id"):
            v = versions[r["version_id"]]
            specs.append({"name": r["name"], "weight": r["weight"], "source": v.source, "entrypoint": v.entrypoint,
                          "version_id": v.pk})
        else:
            specs.append(dict(r))
    return specs
