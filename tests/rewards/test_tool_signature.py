"""A tool's signature is read from its source without running it, and a tool the model could not be shown (no
docstring, an undocumented or untyped parameter, *args) is refused with the reason. The stand-in the training
program gives TRL has the tool's name, types and docstring, so transformers' get_json_schema (what TRL shows the
model) describes the user's function, and calling it forwards the model's arguments."""

import pytest

from rewards.library import TOOLS, source
from rewards.toolspec import ToolError, stand_in, tool_signature

GOOD = '''
import os

def lookup(city: str, days: int = 3, metric: bool = True) -> str:
    """Forecast for a city.

    Args:
        city: The city's name.
        days: How many days ahead.
        metric: Celsius when true.
    """
    return os.getcwd()
'''


def test_it_reads_names_types_defaults_and_descriptions_without_running_the_code():
    sig = tool_signature(GOOD, "lookup")
    assert sig.name == "lookup" and sig.description == "Forecast for a city."
    assert [(p.name, p.type, p.required, p.default) for p in sig.params] == [
        ("city", "str", True, None),
        ("days", "int", False, 3),
        ("metric", "bool", False, True),
    ]


def test_the_stand_in_gives_transformers_the_users_schema_and_forwards_the_arguments():
    from transformers.utils import get_json_schema

    calls = []
    tool = stand_in(tool_signature(GOOD, "lookup"), lambda arguments: calls.append(arguments) or "sunny")
    schema = get_json_schema(tool)
    assert schema["function"]["name"] == "lookup"
    assert schema["function"]["parameters"]["required"] == ["city"]
    assert schema["function"]["parameters"]["properties"]["days"] == {
        "type": "integer",
        "description": "How many days ahead.",
    }
    assert tool(city="Oslo", days=2) == "sunny" and calls == [{"city": "Oslo", "days": 2}]


@pytest.mark.parametrize(
    "code, message",
    [
        ("def t(x: str):\n    return x\n", "no docstring"),
        ('def t(x):\n    """Do.\n\n    Args:\n        x: a thing\n    """\n', "has no type hint"),
        ('def t(x: set):\n    """Do.\n\n    Args:\n        x: a thing\n    """\n', "'set' is not one of"),
        ('def t(x: str, y: int):\n    """Do.\n\n    Args:\n        x: a thing\n    """\n', "'y' is not described"),
        ('def t(*args: str):\n    """Do."""\n', "named parameters only"),
        ('def t(**kw: str):\n    """Do."""\n', "named parameters only"),
        (
            'def t(x: __import__("os").system("true")):\n    """Do.\n\n    Args:\n        x: a\n    """\n',
            "is not one of",
        ),
        ('def t(x: str = f()):\n    """Do.\n\n    Args:\n        x: a\n    """\n', "must be a literal"),
        ("def t(x: str:\n", "line 1"),
        ("def other(x: str):\n    pass\n", "no top-level function named 't'"),
    ],
)
def test_it_refuses_what_the_model_could_not_be_shown(code, message):
    with pytest.raises(ToolError, match=message):
        tool_signature(code, "t")


def test_the_library_tools_are_valid_tools_and_the_calculator_computes():
    from rewards.library import function

    for name in TOOLS:
        assert tool_signature(source(name), name).params
    calculator = function("calculator")
    assert calculator("12 * (3 + 4)") == "84" and calculator("7 / 2") == "3.5" and calculator("-3 + 2") == "-1"
    for hostile in ("__import__('os')", "2 ** 1000000", "x + 1"):
        with pytest.raises(ValueError):
            calculator(hostile)
