import ast
import operator

OPERATORS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


def evaluate(node):
    if isinstance(node, ast.Expression):
        return evaluate(node.body)
    if isinstance(node, ast.Constant) and type(node.value) in (int, float):
        return node.value
    if isinstance(node, ast.BinOp) and type(node.op) in OPERATORS:
        left, right = evaluate(node.left), evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > 100:
            raise ValueError("exponents above 100 are not supported")
        return OPERATORS[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in OPERATORS:
        return OPERATORS[type(node.op)](evaluate(node.operand))
    raise ValueError(f"unsupported expression: {ast.unparse(node)}")


class CalculatorSession:
    """The calculator as an environment (TRL's environment_factory): one instance per rollout. reset() reads the
    row's answer; the model calls calculator() as a tool; get_reward() is 1.0 when the calculator's last result is
    the answer, so the reward is earned by using the tool, not by guessing."""

    def __init__(self):
        self.answer, self.results = "", []

    def reset(self, **row):
        self.answer, self.results = str(row.get("answer", "")).strip(), []
        return None

    def calculator(self, expression: str) -> str:
        """Evaluate an arithmetic expression and return its value.

        Args:
            expression: The expression, with numbers, + - * / // % ** and parentheses, for example "12 * (3 + 4)".
        """
        value = evaluate(ast.parse(expression.strip(), mode="eval"))
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        self.results.append(str(value))
        return str(value)

    def get_reward(self) -> float:
        return 1.0 if self.results and self.results[-1] == self.answer else 0.0
