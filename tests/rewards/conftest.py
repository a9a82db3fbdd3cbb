import pytest

from rewards.sandbox import Sandbox


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
