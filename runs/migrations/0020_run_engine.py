from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("runs", "0019_recipes")]

    operations = [
        migrations.AddField(
            model_name="run", name="engine",
            field=models.CharField(choices=[("local", "local"), ("ray", "Ray")], default="local", max_length=8,
                                   help_text="local: a worker trains on its own machine; ray: the worker submits the "
                                             "run to its Ray cluster (RAY_ADDRESS) as a Ray job (README \"Scale out\")."),
        ),
        migrations.AddField(
            model_name="run", name="num_workers",
            field=models.PositiveSmallIntegerField(default=1, help_text="Ray Train workers of a Ray run (DDP across "
                                                                        "them; each gets one GPU when the run asks "
                                                                        "for GPUs)."),
        ),
    ]
