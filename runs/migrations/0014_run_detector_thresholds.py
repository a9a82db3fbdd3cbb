from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0013_run_sandbox_weak'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='detector_thresholds',
            field=models.JSONField(blank=True, default=dict, help_text="The reward-hacking detectors' thresholds this run changed (runs.rollouts.detectors.DEFAULTS holds the rest)."),
        ),
    ]
