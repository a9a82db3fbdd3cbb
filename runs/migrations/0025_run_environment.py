from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('runs', '0024_tools'),
    ]

    operations = [
        migrations.AddField(
            model_name='run',
            name='environment',
            field=models.JSONField(blank=True, default=dict, help_text="{name, builtin} or {name, version_id}, or {} for none: an environment class whose methods the model calls (TRL's environment_factory), one instance per rollout, run in the sandbox."),
        ),
    ]
