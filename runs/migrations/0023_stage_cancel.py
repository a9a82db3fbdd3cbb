from django.db import migrations, models


class Migration(migrations.Migration):
    """A recipe's cancel stops the evaluation or rejection-sampling job it is running: both can be cancelled."""

    dependencies = [
        ('runs', '0022_run_trainer'),
    ]

    operations = [
        migrations.AlterField(
            model_name='evaluation',
            name='status',
            field=models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('completed', 'Completed'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='queued', max_length=16),
        ),
        migrations.AlterField(
            model_name='rejectionjob',
            name='status',
            field=models.CharField(choices=[('queued', 'Queued'), ('running', 'Running'), ('completed', 'Completed'), ('failed', 'Failed'), ('cancelled', 'Cancelled')], default='queued', max_length=16),
        ),
    ]
