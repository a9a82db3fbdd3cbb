from django.apps import AppConfig
from django.conf import settings
from django.db.models.signals import post_save


def _install_builtins(sender, instance, created, **kwargs):
    if created:
        from rewards.services import reward_builtins_install  # an AppConfig module loads before the models

        reward_builtins_install(owner=instance)


class RewardsConfig(AppConfig):
    name = "rewards"

    def ready(self):
        # Every new user starts with the built-in library, ready to pick for a run.
        post_save.connect(_install_builtins, sender=settings.AUTH_USER_MODEL, dispatch_uid="rewards_builtins")
