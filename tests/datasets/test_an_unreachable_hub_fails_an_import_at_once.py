"""A hub import on a server that cannot reach the hub fails at once, naming the hub's address, before datasets tries
(its retries took 31.5 s to fail while the page said only "loading")."""

import socket

import datasets
import pytest
from huggingface_hub import constants

from runs.datasets.importing import DatasetError, load_hf
from runs.datasets.importing.hf import hub_unreachable


def _closed_port() -> int:
    with socket.socket() as s:  # a port nothing listens on: a connect is refused at once, no packet leaves the host
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def unreachable_hub(monkeypatch):
    port = _closed_port()
    monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{port}")
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    return port


def test_the_import_is_refused_naming_the_hub_without_datasets_trying(unreachable_hub, monkeypatch, tmp_path):
    def load_dataset(*args, **kwargs):
        raise AssertionError("datasets was asked to reach the hub")

    monkeypatch.setattr(datasets, "load_dataset", load_dataset)
    with pytest.raises(DatasetError) as caught:
        load_hf(hub_id="openai/gsm8k", config="main", split="train", cache_dir=tmp_path)
    [error] = caught.value.errors
    assert error.startswith(f"cannot reach the Hugging Face hub for 'openai/gsm8k' (127.0.0.1:{unreachable_hub}: ")
    assert "ConnectionRefusedError" in error and error.endswith("); import a local copy by path instead")


def test_a_hub_that_takes_the_connection_is_reachable(monkeypatch):
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{server.getsockname()[1]}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        assert hub_unreachable() is None
