"""The spool's lines: whatever a batch holds, the writer writes a line (training never stops on a value)."""

import json

from grpo_web_attach.capture import event_line


class Picture:  # stands in for a PIL image a multimodal tool returned, which TRL keeps in its logs
    pass


def test_a_value_json_cannot_hold_is_named_and_the_line_is_written():
    completion = [
        {"role": "assistant", "content": "", "tool_calls": [{"function": {"name": "look", "arguments": {}}}]},
        {"role": "tool", "name": "look", "content": [{"type": "image", "image": Picture()}, {"type": "text"}]},
    ]
    line = event_line("rollouts", step=1, rows=[{"completion": completion, "reward": float("nan")}])
    event = json.loads(line)
    row = event["rows"][0]
    assert row["completion"][1]["content"][0] == {"type": "image", "image": f"<{__name__}.Picture>"}
    assert row["completion"][0] == completion[0] and row["reward"] is None
