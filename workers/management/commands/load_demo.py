from django.core.management.base import BaseCommand

from grpo_web.env import envstr
from runs.datasets.demo import demo_load


class Command(BaseCommand):
    help = "Create the demo user (password from GRPO_DEMO_PASSWORD, default 'demo') and the demo datasets."

    def handle(self, *args, **options):
        password = envstr("GRPO_DEMO_PASSWORD", "demo")
        user, versions = demo_load(password=password)
        for v in versions:
            self.stdout.write(f"dataset: {v} ({v.row_count} rows)")
        self.stdout.write(self.style.SUCCESS(f"login: {user.username} / {password}"))
