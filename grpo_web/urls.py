from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import path

from rewards import views as reward_views
from runs import views

urlpatterns = [
    path("", views.dashboard, name="dashboard"),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("datasets/upload/", views.dataset_upload, name="dataset_upload"),
    path("datasets/<int:pk>/", views.dataset_detail, name="dataset_detail"),
    path("datasets/<int:pk>/upload/", views.dataset_upload, name="dataset_upload_version"),
    path("datasets/<int:pk>/versions/<int:number>/", views.dataset_detail, name="dataset_version"),
    path("datasets/<int:pk>/versions/<int:number>/mapping/", views.dataset_mapping, name="dataset_mapping"),
    path("rewards/new/", reward_views.reward_new, name="reward_new"),
    path("rewards/<int:pk>/", reward_views.reward_detail, name="reward_detail"),
    path("rewards/<int:pk>/versions/<int:number>/", reward_views.reward_version, name="reward_version"),
    path("rewards/<int:pk>/diff/", reward_views.reward_diff, name="reward_diff"),
    path("rewards/<int:pk>/test/", reward_views.reward_test_start, name="reward_test_start"),
    path("rewards/<int:pk>/test/<str:task_id>/", reward_views.reward_test_result, name="reward_test_result"),
    path("runs/new/", views.run_new, name="run_new"),
    path("runs/<int:pk>/", views.run_detail, name="run_detail"),
    path("runs/<int:pk>/status.json", views.run_status_json, name="run_status_json"),
    path("runs/<int:pk>/metrics.json", views.run_metrics_json, name="run_metrics_json"),
    path("runs/<int:pk>/steps/<int:step>.json", views.run_step_json, name="run_step_json"),
    path("runs/<int:pk>/events", views.run_events, name="run_events"),
    path("admin/", admin.site.urls),
]
