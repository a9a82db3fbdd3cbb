from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from grpo_web.api import urls as api_urls

urlpatterns = [
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("", include("runs.urls")),
    path("", include("rewards.urls")),
    path("", include("workers.urls")),
    path("api/", api_urls),
    path("admin/", admin.site.urls),
    # what a browser asks for before it has read a page's <link rel="icon">
    path("favicon.ico", login_not_required(RedirectView.as_view(url=static("favicon.svg"), permanent=True))),
]
