from rewards.library import ENVIRONMENTS
from rewards.library import source as library_source
from rewards.models import RewardFunctionVersion
from rewards.toolspec import ToolError, environment_signature, tool_signature


def reward_specs(rewards: list[dict]) -> list[dict]:
    """A run's pinned rewards ({name, weight, version_id}) with the code of each pinned version, for the trainer."""
    versions = RewardFunctionVersion.objects.in_bulk([r["version_id"] for r in rewards if r.get("version_id")])
    specs = []
    for r in rewards:
        if r.get("version_id"):
            v = versions[r["version_id"]]
            specs.append(
                {
                    "name": r["name"],
                    "weight": r["weight"],
                    "source": v.source,
                    "entrypoint": v.entrypoint,
                    "version_id": v.pk,
                }
            )
        else:
            specs.append(dict(r))
    return specs


def tool_specs(tools: list[dict]) -> list[dict]:
    """A run's tools ({name, builtin} or {name, version_id}) with the code of each pinned version, for the trainer;
    a library tool's function is its own name."""
    versions = RewardFunctionVersion.objects.in_bulk([t["version_id"] for t in tools if t.get("version_id")])
    specs = []
    for t in tools:
        if t.get("version_id"):
            v = versions[t["version_id"]]
            specs.append({"name": t["name"], "source": v.source, "entrypoint": v.entrypoint, "version_id": v.pk})
        else:
            specs.append({"name": t["name"], "builtin": t["builtin"], "entrypoint": t["builtin"]})
    return specs


def environment_spec(environment: dict | None) -> dict | None:
    """A run's environment ({name, builtin} or {name, version_id}) with its pinned code, for the trainer; a library
    environment's class is the library's (rewards.library.ENVIRONMENTS)."""
    if not environment:
        return None
    if environment.get("version_id"):
        v = RewardFunctionVersion.objects.get(pk=environment["version_id"])
        return {"name": environment["name"], "source": v.source, "entrypoint": v.entrypoint, "version_id": v.pk}
    return {
        "name": environment["name"],
        "builtin": environment["builtin"],
        "entrypoint": ENVIRONMENTS[environment["builtin"]],
    }


def environment_problems(spec: dict | None) -> list[str]:
    """Why an environment class cannot be offered to TRL (its methods, read without running it)."""
    if not spec:
        return []
    try:
        environment_signature(
            library_source(spec["builtin"]) if spec.get("builtin") else spec["source"], spec["entrypoint"]
        )
    except ToolError as exc:
        return [f"environment: {spec['name']}: {exc}"]
    return []


def tool_problems(specs: list[dict]) -> list[str]:
    """Why a tool cannot be offered to the model (its signature, read without running it), naming the tool."""
    problems = []
    for s in specs:
        try:
            tool_signature(library_source(s["builtin"]) if s.get("builtin") else s["source"], s["entrypoint"])
        except ToolError as exc:
            problems.append(f"tools: {s['name']}: {exc}")
    return problems
