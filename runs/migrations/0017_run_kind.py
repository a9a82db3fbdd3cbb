from django.db import migrations, models


class Migration(migrations.Migration):

    dependencies = [
        ("runs", "0016_rollout_step_scores"),
    ]

    operations = [
        migrations.AddField(
            model_name="run",
            name="kind",
            field=models.CharField(choices=[("grpo", "GRPO"), ("sft", "SFT")], default="grpo",
                                   help_text="grpo: TRL's GRPOTrainer; sft: TRL's SFTTrainer (config holds SFTConfig "
                                             "fields, rewards only score its evaluations).", max_length=8),
        ),
        migrations.AlterField(
            model_name="run",
            name="config",
            field=models.JSONField(help_text="GRPOConfig (an SFT run: SFTConfig) fields under TRL's names."),
        ),
    ]
