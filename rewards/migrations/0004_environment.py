from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ('rewards', '0003_tools'),
    ]

    operations = [
        migrations.AlterField(
            model_name='rewardfunction',
            name='kind',
            field=models.CharField(choices=[('reward', 'reward function'), ('tool', 'tool'), ('environment', 'environment')], default='reward', help_text="A reward function scores completions; a tool is called by the model while it generates (TRL's tools); an environment is a class whose methods are tools, one instance per rollout (TRL's environment_factory). All run in the sandbox.", max_length=12),
        ),
    ]
