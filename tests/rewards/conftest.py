import pytest

from rewards.sandbox import Sandbox
from rewards.sandbox.code import CodeRunner
from tests.rewards.test_sandbox_hostile import MODES, on_the_hosts_uid


@pytest.fixture
def started_sandboxes():
    """``make(source, name, **kwargs)``: a started Sandbox; every one made is closed at the test's end."""
    made: list[Sandbox] = []

    def make(source: str, name: str, **kwargs) -> Sandbox:
        sb = Sandbox(source, name, **kwargs)
        made.append(sb)
        sb.start()
        return sb

    yield make
    for sb in made:
        sb.close()


@pytest.fixture(params=sorted(MODES))
def make_runner(request, monkeypatch):
    """``make(**kwargs)``: a started CodeRunner in each sandbox mode (a private root, and the fallback on the host's
    uid); every one made is closed at the test's end."""
    if request.param == "fallback":
        on_the_hosts_uid(monkeypatch)
    made: list[CodeRunner] = []

    def make(**kwargs) -> CodeRunner:
        runner = CodeRunner(slot=40 + len(made), **{"time_s": 1.0, **MODES[request.param], **kwargs})
        made.append(runner)
        runner.start()
        assert runner.isolation["private_mounts"] is (request.param == "private")
        return runner

    yield make
    for runner in made:
        runner.close()
