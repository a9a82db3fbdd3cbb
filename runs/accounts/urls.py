from django.urls import path

from runs.accounts import views

urlpatterns = [
    path("settings/tokens/", views.tokens, name="tokens"),
    path("settings/tokens/<int:pk>/revoke/", views.token_revoke_view, name="token_revoke"),
    path("settings/teams/", views.teams, name="teams"),
    path("settings/teams/<int:pk>/members/", views.team_member_add, name="team_member_add"),
    path("settings/teams/<int:pk>/leave/", views.team_leave_view, name="team_leave"),
    path("datasets/<int:pk>/share/", views.dataset_share, name="dataset_share"),
    path("runs/<int:pk>/share/", views.run_share, name="run_share"),
]
