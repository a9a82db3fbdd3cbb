from django.urls import path

from rewards import views

urlpatterns = [
    path("rewards/<int:pk>/lint/", views.reward_lint, name="reward_lint"),
    path("rewards/<int:pk>/share/", views.reward_share, name="reward_share"),
    path("rewards/new/", views.reward_new, name="reward_new"),
    path("rewards/<int:pk>/", views.reward_detail, name="reward_detail"),
    path("rewards/<int:pk>/versions/<int:number>/", views.reward_version, name="reward_version"),
    path("rewards/<int:pk>/diff/", views.reward_diff, name="reward_diff"),
    path("rewards/<int:pk>/test/", views.reward_test_start, name="reward_test_start"),
    path("rewards/<int:pk>/label-suite/", views.reward_label_suite_save, name="reward_label_suite_save"),
    path("rewards/<int:pk>/label-suite/test/", views.reward_label_suite_test, name="reward_label_suite_test"),
    path("rewards/<int:pk>/test/<str:task_id>/", views.reward_test_result, name="reward_test_result"),
]
