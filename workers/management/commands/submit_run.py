from pathlib import Path

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from runs.lifecycle.services import run_create
from runs.lifecycle.spec import RunRefused, RunSpec
from runs.lifecycle.trl_yaml import parse_run_yaml


class Command(BaseCommand):
    help = "Submit a run from a TRL GRPOConfig YAML (plus model_name_or_path, dataset_name, reward_funcs)."

    def add_arguments(self, parser):
        parser.add_argument("config", help="path to the YAML file")
        parser.add_argument("--user", required=True, help="the owner of the run (and of its dataset and rewards)")
        parser.add_argument(
            "--queue-anyway",
            action="store_true",
            help="queue a GPU or vLLM run even though no online worker has them yet",
        )

    def handle(self, *args, config, user, **options):
        owner = get_user_model().objects.filter(username=user).first()
        if owner is None:
            raise CommandError(f"no user {user!r}")
        try:
            text = Path(config).read_text()
        except OSError as exc:
            raise CommandError(str(exc)) from None
        imported = parse_run_yaml(text, owner=owner)
        for note in imported.notes:
            self.stdout.write(f"note: {note}")
        try:
            run = run_create(owner=owner, spec=RunSpec.from_imported(imported), queue_anyway=options["queue_anyway"])
        except RunRefused as exc:
            raise CommandError("\n".join(exc.errors)) from None
        if run.status == run.Status.CHECKING:  # a worker of the checks queue queues it or refuses it
            self.stdout.write(self.style.SUCCESS(f"run {run.pk}: {run.name}, its rewards being checked"))
        else:
            self.stdout.write(self.style.SUCCESS(f"queued run {run.pk}: {run.name}"))
