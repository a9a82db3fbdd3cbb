from django.conf import settings
from django.core.management.base import BaseCommand


class Command(BaseCommand):
    help = "Build the tiny Qwen2-style demo model and its tokenizer locally (no download)."

    def add_arguments(self, parser):
        parser.add_argument("--out", default=str(settings.GRPO_TINY_MODEL_DIR))
        parser.add_argument("--force", action="store_true", help="rebuild even if it exists")

    def handle(self, *args, out, force, **options):
        from pathlib import Path

        from workers.tinymodel import build_tiny_model

        if (Path(out) / "config.json").exists() and not force:
            self.stdout.write(f"tiny model already at {out}")
            return
        build_tiny_model(out)
        self.stdout.write(self.style.SUCCESS(f"tiny model written to {out}"))
