"""A verl launch script pasted as verl publishes it (issue 44, item 6): its overrides are read as the shell and Hydra
read them, the import is the nested form's (same values, same notes), and what is not overrides is refused naming
its line.

Fidelity is checked against the real parts: bash itself runs each script with ``python3`` a shell function that prints
its arguments (nothing is launched), and Hydra composes verl's own ppo_trainer config with those words, as verl's
``main_ppo`` would. The scripts are verl's (tests/lifecycle/published_configs/verl_run_*.sh and
tests/lifecycle/verl_launch_scripts/, each with its source on its first line)."""

import os
import subprocess
from pathlib import Path

import pytest
import yaml
from django.urls import reverse

from runs.lifecycle.trl_yaml import parse_run_yaml
from runs.lifecycle.verl_launch import launch_script_mapping
from tests.lifecycle.published_corpus import CORPUS

SCRIPTS = sorted(CORPUS.glob("verl_run_*.sh")) + sorted((Path(__file__).parent / "verl_launch_scripts").glob("*.sh"))
HOME = "/home/tester"
SHELL = 'python3() { [ "$1" = -m ] && shift 2; printf "%s\\0" "$@"; }; python() { python3 "$@"; }; source /dev/stdin'


def bash_argv(script: str) -> list[str]:
    """The words bash passes to ``python3 -m verl.trainer.main_ppo`` when it runs ``script``."""
    done = subprocess.run(
        ["bash", "-c", SHELL],
        input=script,
        env={"HOME": HOME, "PATH": os.environ["PATH"]},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.split("\0")[:-1]


def composed(words: list[str]):
    """verl's ppo_trainer config with ``words`` applied, by Hydra, as verl's main_ppo composes it."""
    import verl
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(Path(verl.__file__).parent / "trainer" / "config"), version_base=None):
        return compose(config_name="ppo_trainer", overrides=words)


def leaves(data: dict, prefix: str = "") -> dict:
    out = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(leaves(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def at_home(value):
    if isinstance(value, list):
        return [at_home(v) for v in value]
    return value.replace("~", HOME, 1) if isinstance(value, str) and value.startswith("~") else value


@pytest.mark.parametrize("path", SCRIPTS, ids=lambda p: p.name)
def test_every_override_is_read_as_bash_and_hydra_give_it_to_verl(path):
    from omegaconf import OmegaConf

    script = path.read_text()
    words = bash_argv(script)
    config = composed(words)
    data, notes, errors = launch_script_mapping(script)
    assert errors == []
    read = leaves(data)
    assert set(read) == {w.split("=", 1)[0].lstrip("+") for w in words}  # every override, nothing else
    for key, value in read.items():
        expected = OmegaConf.to_container(c) if OmegaConf.is_config(c := OmegaConf.select(config, key)) else c
        assert at_home(value) == expected, key
    if "$HOME" in script or "${HOME}" in script:
        assert "$HOME: read as ~ (the home folder of whoever runs it)" in notes


@pytest.fixture
def gsm8k(owner):
    import io
    import json

    from runs.datasets.services import dataset_import

    rows = [{"prompt": f"What is {i} + {i}?", "answer": str(2 * i)} for i in range(16)]
    data = "".join(json.dumps(r) + "\n" for r in rows).encode()
    return dataset_import(owner=owner, name="gsm8k", stream=io.BytesIO(data), source_name="gsm8k.jsonl")


REWARD = "\n    reward_funcs=[accuracy]"  # grpo-web's own key: verl scores by data_source, which no override names


def with_reward(script: str) -> str:
    """The script with grpo-web's reward key as one more override, after its last one."""
    return script.replace(" $@", " \\" + REWARD, 1)


@pytest.mark.django_db
@pytest.mark.parametrize("path", [p for p in SCRIPTS if "gsm8k" in p.read_text()], ids=lambda p: p.name)
def test_a_pasted_script_imports_as_its_nested_form_does(owner, gsm8k, path):
    script = with_reward(path.read_text())
    nested = yaml.safe_dump({**composed_nested(bash_argv(script)), "reward_funcs": ["accuracy"]}, sort_keys=False)
    from_script, from_yaml = parse_run_yaml(script, owner=owner), parse_run_yaml(nested, owner=owner)
    assert from_script.errors == from_yaml.errors == []
    assert from_script.trainer == "verl" and from_script.config == from_yaml.config
    assert (from_script.name, from_script.model, from_script.requested_gpus) == (
        from_yaml.name,
        from_yaml.model,
        from_yaml.requested_gpus,
    )
    script_only = [n for n in from_script.notes if n not in from_yaml.notes]
    assert all(n.startswith(("line ", "$HOME")) for n in script_only), script_only
    assert [n for n in from_yaml.notes if n not in from_script.notes] == []


def composed_nested(words: list[str]) -> dict:
    """Bash's words as the nested YAML a user would write by hand: each key at its dots, each value Hydra's, the home
    folder written ~."""
    from hydra.core.override_parser.overrides_parser import OverridesParser

    out: dict = {}
    for override in OverridesParser.create().parse_overrides(words):
        node = out
        *parents, leaf = override.key_or_group.split(".")
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = tilde(override.value())
    return out


def tilde(value):
    if isinstance(value, list):
        return [tilde(v) for v in value]
    return "~" + value[len(HOME) :] if isinstance(value, str) and value.startswith(HOME + "/") else value


@pytest.mark.django_db
def test_the_import_page_fills_the_run_form_from_a_pasted_script(owner_client, gsm8k):
    script = with_reward((CORPUS / "verl_run_qwen2-7b.sh").read_text())
    response = owner_client.post(reverse("run_import"), {"yaml": script})
    assert response.status_code == 200
    form = response.context["form"]
    assert form.initial["trainer"] == "verl" and form.initial["model"] == "Qwen/Qwen2-7B-Instruct"
    assert response.context["import_errors"] == []
    page = response.content.decode()
    assert "$HOME: read as ~ (the home folder of whoever runs it)" in page and "Qwen/Qwen2-7B-Instruct" in page


BASE = "set -x\npython3 -m verl.trainer.main_ppo \\\n    algorithm.adv_estimator=grpo \\\n    data.train_batch_size=8\n"


@pytest.mark.parametrize(
    "script, error",
    [
        ("for lr in 1e-6 2e-6; do\n" + BASE + "done\n", "line 1: 'for': a shell statement"),
        ('if [ -n "$X" ]; then\n  echo x\nfi\n' + BASE, "line 1: 'if': a shell statement"),
        ("N=$(nproc)\n" + BASE, "line 1: a command substitution ($(...))"),
        ("N=`nproc`\n" + BASE, "line 1: a command substitution (`...`)"),
        (BASE.replace("=8", "=$BATCH"), "line 4: $BATCH is not set in the script"),
        (BASE.replace("=8", "=8,16"), "line 4: data.train_batch_size: a sweep"),
        (BASE.replace("=8", "=[8,"), "line 4: data.train_batch_size=[8,: not a Hydra override"),
        (BASE.replace("data.train_batch_size=8", "~data.train_batch_size"), "line 4: ~data.train_batch_size: deletes"),
        (BASE.replace("data.train_batch_size=8", "actor@x=y"), "line 4: actor@x=y: deletes a key or picks"),
        (BASE.replace("\\\n    data", "--config-name=ppo_megatron_trainer \\\n    data"), "line 3: --config-name="),
        (BASE + BASE, "line 6: a second verl command"),
        (BASE.replace("=8", "='8"), "line 4: a ' quote is never closed"),
        (BASE.replace("grpo \\\n", "grpo \\\n# data.x=1 \\\n"), "line 5: 'data.train_batch_size=8' looks like an"),
        (
            BASE.replace("data.train_batch_size=8", "algorithm.adv_estimator.x=1"),
            "line 4: algorithm.adv_estimator.x: algorithm.adv_estimator was set to a value above",
        ),
        ("python3 -m verl.trainer.main_ppo $@\n", "sets no key=value override"),
        ("X=${Y:-${Z}}\n" + BASE, "line 1: $Z is not set in the script"),
        ("A=(x y)\n" + BASE, "line 1: A=( ... ): a shell array"),
    ],
)
def test_what_is_not_overrides_is_refused_naming_its_line(script, error):
    data, _, errors = launch_script_mapping(script)
    assert any(e.startswith(error) or error in e for e in errors), errors


@pytest.mark.django_db
def test_a_refused_script_is_refused_whole_through_the_import(owner):
    out = parse_run_yaml("for x in 1 2; do\n" + BASE + "done\n", owner=owner)
    assert out.errors and out.errors[0].startswith("line 1: 'for'") and out.config == {}


def test_hostile_scripts_get_a_message_never_an_exception():
    import random

    rng = random.Random(7)
    base = (CORPUS / "verl_run_qwen2-7b.sh").read_text()
    alphabet = "$`'\"\\{}()[]=,.~+@#;|&<>*?\n\t \x00é"
    for _ in range(400):
        chars = list(base)
        for _ in range(rng.randint(1, 6)):
            chars.insert(rng.randrange(len(chars)), rng.choice(alphabet))
        data, notes, errors = launch_script_mapping("".join(chars))
        assert isinstance(data, dict) and all(isinstance(e, str) and e for e in errors)


@pytest.mark.django_db(transaction=True)
def test_in_chromium_a_script_from_verls_examples_pasted_whole_fills_the_form(web_server, owner, gsm8k, page):
    from tests.conftest import log_in

    log_in(page, web_server)
    page.goto(f"{web_server}/runs/new/")
    page.click("summary:text('Import a TRL config')")
    page.fill(
        "#import-form textarea",
        with_reward((Path(__file__).parent / "verl_launch_scripts" / "run_qwen2-7b_math.sh").read_text()),
    )
    page.click("button:text('Fill the form')")
    page.wait_for_selector("#import-notes")
    assert "$HOME: read as ~" in page.inner_text("#import-notes")
    assert not page.query_selector("#import-errors")
    assert page.input_value("#id_model") == "Qwen/Qwen2-7B-Instruct"
    assert page.input_value("#id_trainer") == "verl"
