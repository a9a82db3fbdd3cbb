"""Each capability's URLs, at the paths they have always had (no namespaces: templates name URLs as before)."""

from django.urls import include, path

urlpatterns = [
    path("", include("runs.lifecycle.urls")),
    path("", include("runs.datasets.urls")),
    path("", include("runs.rollouts.urls")),
    path("", include("runs.review.urls")),
    path("", include("runs.evaluations.urls")),
    path("", include("runs.telemetry.urls")),
    path("", include("runs.compare.urls")),
    path("", include("runs.accounts.urls")),
    path("", include("runs.sampling.urls")),
    path("", include("runs.registry.urls")),
    path("", include("runs.recipes.urls")),
    path("", include("runs.deletion.urls")),
    path("", include("runs.attach.import_urls")),
]
