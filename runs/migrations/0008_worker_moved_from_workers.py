"""The Worker model moves from the workers app to runs (runs reads it when a run asks for GPUs or vLLM; runs never
imports workers). The table stays as it is: only Django's idea of which app owns it changes."""

from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0007_run_resumable_when_cancelled"),
        ("workers", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Worker",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False,
                                                   verbose_name="ID")),
                        ("name", models.CharField(help_text="Celery node name, e.g. gpu@host.", max_length=200,
                                                  unique=True)),
                        ("hostname", models.CharField(max_length=200)),
                        ("queues", models.JSONField(default=list)),
                        ("gpus", models.JSONField(default=list,
                                                  help_text="[{index, name, memory_mb}] as torch.cuda reports them.")),
                        ("vllm", models.BooleanField(default=False, help_text="vLLM is importable on this worker.")),
                        ("started_at", models.DateTimeField()),
                        ("last_seen", models.DateTimeField()),
                    ],
                    options={"db_table": "workers_worker", "ordering": ["name"]},
                ),
            ],
            database_operations=[],
        ),
    ]
