from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("runs", "0028_run_origin_external_runs"),
    ]

    operations = [
        migrations.AlterField(
            model_name="apitoken",
            name="scope",
            field=models.CharField(
                choices=[("read", "Read"), ("write", "Write"), ("attach", "Attach")], default="read", max_length=8
            ),
        ),
    ]
