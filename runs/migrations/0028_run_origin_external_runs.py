import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0027_run_tags_notes_pinned_metric"),
    ]

    operations = [
        migrations.AlterField(
            model_name="run",
            name="dataset_version",
            field=models.ForeignKey(
                blank=True,
                help_text="The data the run trains on; a run trained elsewhere has none (dataset_label names its data).",
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="runs",
                to="runs.datasetversion",
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="origin",
            field=models.CharField(
                choices=[
                    ("app", "trained by grpo-web"),
                    ("attached", "trained elsewhere, attached"),
                    ("imported", "trained elsewhere, imported"),
                ],
                db_index=True,
                default="app",
                help_text="app: trained by grpo-web; attached: a client in the user's own training script sends it "
                "(runs.attach); imported: made from files a training framework wrote.",
                max_length=8,
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="dataset_label",
            field=models.CharField(
                blank=True, help_text="A run trained elsewhere: the dataset name its source reported.", max_length=500
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="reported_host",
            field=models.TextField(blank=True, help_text="A run trained elsewhere: the host its source reported."),
        ),
        migrations.AddField(
            model_name="run",
            name="reported_command",
            field=models.TextField(blank=True, help_text="A run trained elsewhere: the command line its source reported."),
        ),
        migrations.AddField(
            model_name="run",
            name="last_contact_at",
            field=models.DateTimeField(
                blank=True, help_text="An attached run: when its client last sent anything.", null=True
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="received_bytes",
            field=models.BigIntegerField(
                default=0, help_text="An attached run: bytes of its client's spool (event log) taken so far."
            ),
        ),
        migrations.AddField(
            model_name="run",
            name="resume_key_hash",
            field=models.CharField(
                blank=True, help_text="An attached run: sha256 of the key its client resumes it with.", max_length=64
            ),
        ),
    ]
