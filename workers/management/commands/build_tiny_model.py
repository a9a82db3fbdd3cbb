from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand

from workers.training.coldstart import build_tool_model, cold_start
from workers.training.tinymodel import build_tiny_model


class Command(BaseCommand):
    help = (
        "Build the tiny Qwen2-style demo model and its tokenizer locally (no download), and its cold-started copy "
        "('tiny-sft': a short SFT on worked arithmetic answers, so accuracy rewards fire)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--out", default=str(settings.GRPO_TINY_MODEL_DIR))
        parser.add_argument("--sft-out", default=str(settings.GRPO_TINY_SFT_MODEL_DIR))
        parser.add_argument("--tools-out", default=str(settings.GRPO_TINY_TOOLS_MODEL_DIR))
        parser.add_argument("--force", action="store_true", help="rebuild even if it exists")

    def handle(self, *args, out, sft_out, tools_out, force, **options):
        if (Path(out) / "config.json").exists() and not force:
            self.stdout.write(f"tiny model already at {out}")
        else:
            build_tiny_model(out)
            self.stdout.write(self.style.SUCCESS(f"tiny model written to {out}"))
        if (Path(sft_out) / "config.json").exists() and not force:
            self.stdout.write(f"cold-started tiny model already at {sft_out}")
        else:
            cold_start(out, sft_out)
            self.stdout.write(self.style.SUCCESS(f"cold-started tiny model written to {sft_out}"))
        if (Path(tools_out) / "config.json").exists() and not force:
            self.stdout.write(f"tool-calling tiny model already at {tools_out}")
        else:
            build_tool_model(tools_out)
            self.stdout.write(self.style.SUCCESS(f"tool-calling tiny model written to {tools_out}"))
