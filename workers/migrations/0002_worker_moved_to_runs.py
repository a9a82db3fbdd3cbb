"""The Worker model now belongs to the runs app (runs 0008); its table stays."""

from django.db import migrations


class Migration(migrations.Migration):

    dependencies = [
        ("workers", "0001_initial"),
        ("runs", "0008_worker_moved_from_workers"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(state_operations=[migrations.DeleteModel(name="Worker")],
                                            database_operations=[]),
    ]
