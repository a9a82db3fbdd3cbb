"""docker-compose.yml's Ray services fit together (no `docker compose` here to run `config`): the submitting worker
reaches the head's Jobs API, the GPU node joins the head's GCS port (clear of Redis's 6379), and every Ray service
mounts the shared data volume at the app's GRPO_DATA_DIR."""

from pathlib import Path

import yaml

COMPOSE = yaml.safe_load((Path(__file__).parents[2] / "docker-compose.yml").read_text())  # merge keys (<<) resolved


def flag(command: str, name: str) -> str:
    words = command.split()
    return words[words.index(name) + 1]


def test_the_ray_services_fit_together():
    services = COMPOSE["services"]
    ray = {name: s for name, s in services.items() if "ray" in s.get("profiles", [])}
    assert set(ray) == {"ray-head", "ray-worker-gpu", "worker-ray"}
    head = ray["ray-head"]["command"]
    gcs, dashboard = flag(head, "--port"), flag(head, "--dashboard-port")
    assert gcs != "6379"
    assert flag(ray["ray-worker-gpu"]["command"], "--address") == f"ray-head:{gcs}"
    assert ray["worker-ray"]["environment"]["RAY_ADDRESS"] == f"http://ray-head:{dashboard}"
    data_dir = services["web"]["environment"]["GRPO_DATA_DIR"]
    for name, service in ray.items():
        assert f"data:{data_dir}" in service["volumes"], name
        assert service["environment"]["GRPO_DATA_DIR"] == data_dir, name
    # the worker that submits Ray runs reaches the database and the broker as the others do
    for key in ("DATABASE_URL", "REDIS_URL", "SECRET_KEY"):
        assert ray["worker-ray"]["environment"][key] == services["web"]["environment"][key]
    # the node that trains starts the runs' reward sandboxes: lifted as for the other sandbox hosts
    assert ray["ray-worker-gpu"]["security_opt"] == services["worker-gpu"]["security_opt"]


def test_every_queue_the_app_sends_to_is_served_and_the_checks_have_a_worker_of_their_own():
    from grpo_web import queues

    served = {
        name: flag(service["command"], "-Q").split(",")
        for name, service in COMPOSE["services"].items()
        if "celery" in str(service.get("command", "")) and "-Q" in str(service.get("command", "")).split()
    }
    routed = {route["queue"] for route in queues.ROUTES.values() if not route["queue"].startswith("training")}
    assert routed | {queues.DEFAULT_QUEUE} <= {q for qs in served.values() for q in qs}
    # the contract check a Start waits for never waits behind a reward test, a replay or an import
    assert [name for name, qs in served.items() if queues.CHECKS_QUEUE in qs] == ["worker-checks"]
    assert served["worker-checks"] == [queues.CHECKS_QUEUE]
