"""Pages of rejection-sampling jobs: the list, a new job, and a job's page with its samples."""

from __future__ import annotations

from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET

from runs.sampling.forms import RejectionJobForm
from runs.sampling.selectors import SAMPLE_FILTERS, owned_jobs, samples_page
from runs.sampling.services import JobRefused, RejectionSettings, rejection_job_create


def job_list(request):
    return render(request, "sampling/job_list.html", {"jobs": owned_jobs(request.user)})


def job_new(request):
    initial = {"dataset_version": request.GET.get("dataset_version"), "model": request.GET.get("model") or "tiny-sft"}
    form = RejectionJobForm(request.POST or None, owner=request.user, initial=initial)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            job = rejection_job_create(
                owner=request.user,
                name=data["name"],
                model=data["model"],
                dataset_version=data["dataset_version"],
                rewards=data["rewards_pinned"],
                settings=data["settings"],
                split=data["split"],
                mix_version=data.get("mix_version"),
            )
        except JobRefused as exc:
            for error in exc.errors:
                form.add_error(None, error)
        else:
            return redirect(job)
    return render(request, "sampling/job_new.html", {"form": form}, status=400 if form.errors else 200)


def job_detail(request, pk):
    job = get_object_or_404(owned_jobs(request.user), pk=pk)
    show = request.GET.get("show", "")
    show = show if show in SAMPLE_FILTERS else ""
    try:
        number = max(1, int(request.GET.get("page", 1)))
    except ValueError:
        number = 1
    return render(
        request,
        "sampling/job_detail.html",
        {
            "job": job,
            "settings": RejectionSettings(**job.settings),
            "page": samples_page(job, show=show, page=number),
            "show": show,
            "filters": list(SAMPLE_FILTERS),
        },
    )


@require_GET
def job_status_json(request, pk):
    job = get_object_or_404(owned_jobs(request.user), pk=pk)
    return JsonResponse(
        {
            "status": job.status,
            "finished": job.is_finished,
            "error": job.error,
            "stats": job.stats,
            "output_version": job.output_version_id,
        }
    )
