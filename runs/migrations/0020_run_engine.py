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
        migrations.AddField(
            model_name="run", name="ray_slot_base",
            field=models.PositiveSmallIntegerField(blank=True, editable=False, null=True,
                                                   help_text="A Ray run's first sandbox slot on the cluster's nodes, "
                                                             "held while an attempt runs (its lease is set): no two "
                                                             "live Ray runs hold the same range "
                                                             "(workers.supervisor.ray_slot_base)."),
        ),
        migrations.AddConstraint(
            model_name="run",
            constraint=models.UniqueConstraint(condition=models.Q(("lease__isnull", False)), fields=("ray_slot_base",),
                                               name="run_ray_slots_one_live_run"),
        ),
    ]
