from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import RequestDataTooBig
from django.templatetags.static import static
from django.urls import include, path, reverse
from django.views import defaults
from django.views.generic import RedirectView

from grpo_web import manual
from grpo_web.api import urls as api_urls
from runs.lifecycle.views import import_too_large

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("runs.urls")),
    path("", include("rewards.urls")),
    path("", include("workers.urls")),
    path("api/", api_urls),
    path("admin/", admin.site.urls),
    path("docs/", manual.manual_page, name="manual"),
    path("docs/<slug:page>/", manual.manual_page, name="manual_page"),
    path("docs/<str:name>", manual.manual_file, name="manual_file"),
    # what a browser asks for before it has read a page's <link rel="icon">
    path("favicon.ico", login_not_required(RedirectView.as_view(url=static("favicon.svg"), permanent=True))),
]


def handler400(request, exception):
    """Django's 400, but a config pasted on the import page past the form's limit: refused there by its size (the
    CSRF check reads the body first, so the view itself never sees it)."""
    if (
        isinstance(exception, RequestDataTooBig)
        and request.path == reverse("run_import")
        and request.user.is_authenticated
    ):
        return import_too_large(request)
    return defaults.bad_request(request, exception)
