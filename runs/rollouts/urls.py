from django.urls import path

from runs.rollouts import views

urlpatterns = [
    path("search/", views.search, name="search"),
    path("runs/<int:pk>/rollouts/", views.run_rollouts, name="run_rollouts"),
    path("runs/<int:pk>/rollouts.json", views.run_rollouts_json, name="run_rollouts_json"),
    path("runs/<int:pk>/rollouts/<int:rollout_id>/", views.rollout_link, name="rollout_link"),
    path("runs/<int:pk>/steps/<int:step>/groups/<int:group>/", views.group_link, name="group_link"),
    path("runs/<int:pk>/rollouts.jsonl", views.run_rollouts_jsonl, name="run_rollouts_jsonl"),
    path("runs/<int:pk>/rollouts.parquet", views.run_rollouts_parquet, name="run_rollouts_parquet"),
    path("runs/<int:pk>/rollouts/sft/", views.run_rollouts_sft, name="run_rollouts_sft"),
    path("runs/<int:pk>/labels/", views.run_labels, name="run_labels"),
    path("runs/<int:pk>/reflection/", views.run_reflection, name="run_reflection"),
    path("runs/<int:pk>/reflection.json", views.run_reflection_json, name="run_reflection_json"),
    path("runs/<int:pk>/prompts/", views.run_prompts, name="run_prompts"),
    path("runs/<int:pk>/prompts.json", views.run_prompts_json, name="run_prompts_json"),
    path("runs/<int:pk>/prompts/<slug:key>/", views.run_prompt, name="run_prompt"),
    path("runs/<int:pk>/prompts/<slug:key>.json", views.run_prompt_json, name="run_prompt_json"),
    path("runs/<int:pk>/replays/new/", views.run_replay_new, name="run_replay_new"),
    path("runs/<int:pk>/replays/<int:replay_id>/", views.run_replay, name="run_replay"),
    path("runs/<int:pk>/replays/<int:replay_id>.json", views.run_replay_json, name="run_replay_json"),
    path("runs/<int:pk>/replays/<int:replay_id>.jsonl", views.run_replay_jsonl, name="run_replay_jsonl"),
    path("runs/<int:pk>/steps/<int:step>/tokens.json", views.run_step_tokens_json, name="run_step_tokens_json"),
    path("runs/<int:pk>/detectors/", views.run_detectors, name="run_detectors"),
    path("runs/<int:pk>/health.json", views.run_health_json, name="run_health_json"),
    path("runs/<int:pk>/zero_variance.json", views.run_zero_variance_json, name="run_zero_variance_json"),
]
