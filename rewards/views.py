import difflib
import json
import keyword

from django.conf import settings
from django.contrib import messages
from django.http import Http404, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST
from redis.exceptions import RedisError

from grpo_web import queues
from grpo_web.sharing import share_context, share_post
from rewards.forms import BLANK, BLANK_ENVIRONMENT, BLANK_TOOL, RewardEditForm, RewardNewForm, RewardTestForm
from rewards.label_suite import EXPECTATIONS, clean_suite, describe
from rewards.library import ENVIRONMENTS
from rewards.library import source as library_source
from rewards.lint import lint
from rewards.models import RewardFunction
from rewards.services import RewardCodeError, docstring, normalize, reward_create, reward_save


def _visible(request, pk, *, write: bool = False) -> RewardFunction:
    """The function when the user owns it or a team of theirs shares it (for writing, with ``write``); 404 otherwise."""
    return get_object_or_404(RewardFunction.objects.visible_to(request.user, write=write), pk=pk)


def python_name(name: str) -> str:
    """A slug (letters, digits, - and _) as a Python function name: count-digits -> count_digits."""
    function = name.replace("-", "_")
    return function if function.isidentifier() and not keyword.iskeyword(function) else f"reward_{function}"


def reward_new(request):
    form = RewardNewForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        name, template, kind = form.cleaned_data["name"], form.cleaned_data["template"], form.cleaned_data["kind"]
        # a blank function is named after the name typed (TRL logs a reward under its function's name)
        function = python_name(name)
        blank = {
            RewardFunction.Kind.TOOL: (BLANK_TOOL.replace("def my_tool(", f"def {function}(", 1), function),
            RewardFunction.Kind.ENVIRONMENT: (BLANK_ENVIRONMENT, "MyEnvironment"),
        }.get(kind, (BLANK.replace("def my_reward(", f"def {function}(", 1), function))
        code, entrypoint = (library_source(template), ENVIRONMENTS.get(template, template)) if template else blank
        if RewardFunction.objects.filter(owner=request.user, name=name).exists():
            form.add_error("name", "You already have a reward function with this name.")
        else:
            # a blank function starts without a description: the blank's docstring describes the contract, not it
            rf = reward_create(
                owner=request.user,
                name=name,
                source_code=code,
                entrypoint=entrypoint,
                description=docstring(code, entrypoint) if template else "",
                template=template,
                kind=kind,
            )
            return redirect(rf)
    return render(request, "rewards/reward_new.html", {"form": form}, status=400 if form.errors else 200)


def reward_detail(request, pk):
    """The editor: saving changed code creates the next version."""
    # saving is a new version: the owner's, or a team's that may write; readers see the editor read-only
    rf = _visible(request, pk, write=request.method == "POST")
    latest = rf.latest_version
    initial = {"description": rf.description, "entrypoint": latest.entrypoint, "source": latest.source}
    form = RewardEditForm(request.POST or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        try:
            version, created = reward_save(
                function=rf,
                source_code=form.cleaned_data["source"],
                entrypoint=form.cleaned_data["entrypoint"],
                description=form.cleaned_data["description"],
            )
        except RewardCodeError as exc:
            form.add_error("source", str(exc))
        else:
            messages.success(request, f"Saved version {version.number}." if created else "No changes to save.")
            if created and rf.label_suite:  # the new version's agreement with the labels, shown in the list
                queues.enqueue(
                    queues.REWARD_LABEL_SUITE,
                    kwargs={
                        "owner_id": request.user.pk,
                        "function_id": rf.pk,
                        "source": version.source,
                        "entrypoint": version.entrypoint,
                    },
                )
            return redirect(rf)
    versions = list(rf.versions.all())
    return render(
        request,
        "rewards/reward_detail.html",
        {
            "reward": rf,
            "form": form,
            "versions": versions,
            "latest": latest,
            "can_write": RewardFunction.objects.visible_to(request.user, write=True).filter(pk=rf.pk).exists(),
            "share_url": reverse("reward_share", args=[rf.pk]),
            **share_context(rf, request.user),
            "sandbox_weak_allowed": settings.GRPO_SANDBOX_ALLOW_WEAK,
            "suite": rf.label_suite,
            "suite_described": [describe(e) for e in (rf.label_suite or {}).get("expectations", [])],
            "expectation_kinds": EXPECTATIONS,
        },
        status=400 if form.errors else 200,
    )


def reward_version(request, pk, number):
    rf = _visible(request, pk)
    version = get_object_or_404(rf.versions, number=number)
    return render(request, "rewards/reward_version.html", {"reward": rf, "version": version})


def reward_diff(request, pk):
    rf = _visible(request, pk)
    try:
        a, b = int(request.GET.get("a", "")), int(request.GET.get("b", ""))
    except ValueError:
        raise Http404("pick two versions") from None
    old = get_object_or_404(rf.versions, number=a)
    new = get_object_or_404(rf.versions, number=b)
    unified = "".join(
        difflib.unified_diff(
            old.source.splitlines(keepends=True), new.source.splitlines(keepends=True), fromfile=f"v{a}", tofile=f"v{b}"
        )
    )
    return render(request, "rewards/reward_diff.html", {"reward": rf, "old": old, "new": new, "unified": unified})


@require_POST
def reward_lint(request, pk):
    """The editor's lint as you type: {"source", "entrypoint"} (form-encoded) -> {"diagnostics": [...]}."""
    rf = _visible(request, pk)
    source, entrypoint = request.POST.get("source", ""), request.POST.get("entrypoint", "")
    return JsonResponse({"diagnostics": lint(normalize(source), entrypoint.strip(), kind=rf.kind)})


@require_POST
def reward_test_start(request, pk):
    """Queue a test of the editor's current code on the sandbox queue; the page polls for the result."""
    rf = _visible(request, pk)
    form = RewardTestForm(request.POST)
    if not form.is_valid():
        return JsonResponse({"errors": form.errors.get_json_data()}, status=400)
    data = form.cleaned_data
    # the dataset version and run are checked against the user by the task, which reads them (the pickers come from
    # the API, which lists only what the user may see)
    result = queues.enqueue(
        queues.REWARD_TEST,
        kwargs={
            "owner_id": request.user.pk,
            "function_id": rf.pk,
            "source": data["source"],
            "entrypoint": data["entrypoint"],
            "dataset_version_id": data["dataset_version"],
            "rows": data["rows"],
            "completions": form.completion_list(),
            "run_id": data.get("run") or None,
        },
    )
    return JsonResponse({"task": result.id, "poll": f"/rewards/{rf.pk}/test/{result.id}/"}, status=202)


@require_POST
def reward_label_suite_save(request, pk):
    """The function's label suite (rewards.label_suite), as a JSON body; whoever may change the function may set it."""
    rf = _visible(request, pk, write=True)
    try:
        suite = clean_suite(json.loads(request.body or b"{}"))
    except RecursionError:
        return JsonResponse({"error": "the suite is nested too deeply"}, status=400)
    except (ValueError, UnicodeDecodeError) as exc:  # SuiteError is a ValueError, as json's own errors are
        return JsonResponse({"error": str(exc)}, status=400)
    rf.label_suite = suite
    rf.save(update_fields=["label_suite"])
    return JsonResponse({"suite": suite, "described": [describe(e) for e in suite.get("expectations", [])]})


@require_POST
def reward_label_suite_test(request, pk):
    """Queue the editor's current code against the label suite on the sandbox queue; polled as the Test is."""
    rf = _visible(request, pk)
    source, entrypoint = normalize(request.POST.get("source", "")), request.POST.get("entrypoint", "").strip()
    if not source.strip() or not entrypoint:
        return JsonResponse({"errors": {"source": [{"message": "give the code and its entrypoint"}]}}, status=400)
    if not rf.label_suite:
        return JsonResponse(
            {"errors": {"suite": [{"message": "choose the suite's runs and labels first"}]}}, status=400
        )
    result = queues.enqueue(
        queues.REWARD_LABEL_SUITE,
        kwargs={"owner_id": request.user.pk, "function_id": rf.pk, "source": source, "entrypoint": entrypoint},
    )
    return JsonResponse({"task": result.id, "poll": f"/rewards/{rf.pk}/test/{result.id}/"}, status=202)


@require_GET
def reward_test_result(request, pk, task_id):
    rf = _visible(request, pk)
    return task_result_answer(request, task_id, "the test task failed", function_id=rf.pk)


def task_result_answer(request, task_id: str, failed: str, **ids) -> JsonResponse:
    """A polled task's answer: not ready yet, the broker away (503: the page polls again), or its value, a failure
    said as ``failed: ...``. A value that is not this user's (or not of each of ``ids``, where it names one) is a 404.
    The reward editor's test and the dataset page's code-tests bench both answer their polls with it."""
    try:
        result = queues.result(task_id)
        ready = result.ready()
    except (OSError, RedisError) as exc:  # the broker is away: the page polls again
        return JsonResponse(
            {"ready": False, "error": f"the task queue is unavailable ({type(exc).__name__})"}, status=503
        )
    if not ready:
        return JsonResponse({"ready": False})
    value = result.result if result.successful() else {"error": f"{failed}: {result.result!r}"}
    owners = {"owner_id": request.user.pk, **ids}
    if not isinstance(value, dict) or any(value.get(key) not in (None, want) for key, want in owners.items()):
        raise Http404
    return JsonResponse({"ready": True, **value})


@require_POST
def reward_share(request, pk):
    return share_post(request, _visible(request, pk))
