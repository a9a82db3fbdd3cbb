from django.apps import AppConfig
from django.db.backends.signals import connection_created
from django.db.models.signals import post_migrate, pre_delete, pre_save

from grpo_web.text import clean_names


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self):
        # names of datasets, runs, reward functions, recipes, teams, tokens and jobs are stored without control or
        # bidi characters (issue 30): once here, for every path a name comes in by
        pre_save.connect(clean_names, dispatch_uid="grpo_web_clean_names")
        # SQLite's text index lives in triggers, which a later migration that remakes the rollouts table drops
        post_migrate.connect(_text_index, sender=self, dispatch_uid="grpo_web_text_index")
        # and the function its exact check of non-ASCII text calls, on every SQLite connection
        from runs.textindex import register_sqlite_functions

        connection_created.connect(register_sqlite_functions, dispatch_uid="grpo_web_sqlite_functions")
        # a deleted run's rollouts go with its partition (PostgreSQL), emptied at once, before Django's DELETE of
        # them, which then finds none: whatever path deletes the run (its page, the API, a user's removal, the admin)
        pre_delete.connect(_drop_rollouts, sender="runs.Run", dispatch_uid="grpo_web_drop_rollouts")
        # a reward function a run pins is not deleted: rewards asks runs which pin it (rewards sits below runs)
        from rewards.services import VERSION_USERS
        from runs.deletion.selectors import reward_version_users

        if reward_version_users not in VERSION_USERS:
            VERSION_USERS.append(reward_version_users)


def _text_index(sender, using="default", **kwargs):
    from django.db import connections

    from runs.textindex import ensure_sqlite_index

    ensure_sqlite_index(connections[using])


def _drop_rollouts(sender, instance, using="default", **kwargs):
    from runs.partitions import drop_rollouts

    drop_rollouts(instance.pk)
