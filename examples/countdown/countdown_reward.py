"""The reward of the Countdown example: a file of the kind `train.py --reward FILE.py:FUNCTION` takes.

Countdown: reach the target using each given number exactly once, with + - * / (parentheses allowed). The response
is one expression, or steps separated by commas, each `EXPRESSION=RESULT` putting its result back among the numbers
still to use (a scratchpad; RESULT must be what the expression computes):

    row {"numbers": [3, 5, 7], "target": 16}     "7*3-5"           -> 1.0
                                                 "7*3=21,21-5=16"  -> 1.0
                                                 "7*3=20,20-4=16"  -> 0.0   (7*3 is not 20, and 4 is not given)
                                                 "7+5+3"           -> 0.0   (15, not 16)
                                                 "7*3"             -> 0.0   (5 not used)

Expressions are parsed with `ast` into integers and + - * / and computed with exact fractions: nothing the model
writes is ever executed (no eval).
"""
import ast
from fractions import Fraction

OPS = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
       ast.Div: lambda a, b: a / b}
MAX_CHARS = 100   # a longer response is not an answer (and is never parsed)


def evaluate(node, used):
    """The value (a Fraction) of an expression tree of integers and + - * /, appending each integer to `used`;
    ValueError for anything else (names, calls, powers, unary minus, floats) and for a division by zero."""
    if isinstance(node, ast.Constant) and type(node.value) is int:
        used.append(node.value)
        return Fraction(node.value)
    if isinstance(node, ast.BinOp) and type(node.op) in OPS:
        left, right = evaluate(node.left, used), evaluate(node.right, used)
        if isinstance(node.op, ast.Div) and right == 0:
            raise ValueError("division by zero")
        return OPS[type(node.op)](left, right)
    raise ValueError(f"not allowed: {type(node).__name__}")


def countdown(response: str, row: dict) -> float:
    """1.0 when the response reaches row["target"] using each of row["numbers"] exactly once (see above), else 0.0."""
    if len(response) > MAX_CHARS:
        return 0.0
    pool = list(row["numbers"])    # the numbers still to use: each step takes some and gives back its result
    for step in response.strip().split(","):
        expression, equals, result = step.partition("=")
        try:
            used = []
            value = evaluate(ast.parse(expression.strip(), mode="eval").body, used)
        except (SyntaxError, ValueError):
            return 0.0
        if equals and not (result.strip().isdigit() and int(result) == value):
            return 0.0             # a result that is not what the expression computes
        for number in used:
            if number not in pool:
                return 0.0         # a number it does not have, or has used already
            pool.remove(number)
        pool.append(value)
    return 1.0 if pool == [row["target"]] else 0.0
