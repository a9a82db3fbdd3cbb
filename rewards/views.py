from django.shortcuts import get_object_or_404, render

from rewards.models import RewardFunction


def reward_detail(request, pk):
    reward = get_object_or_404(RewardFunction, pk=pk, owner=request.user)
    return render(request, "rewards/reward_detail.html", {"reward": reward})
