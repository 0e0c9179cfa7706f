"""Math answer checking: extract the final answer from a response and decide if it equals the gold answer.

The reward is the only signal GRPO learns from, so this file is built to fail closed:
- A wrong answer must never be rewarded. Integers and fractions compare exactly; a tolerance exists only when a
  side is written as a non-integer decimal, and it is half a unit in that decimal's last digit (`0.33` may stand
  for 1/3, `12346` never stands for 12345). Text that does not parse never matches anything but itself, and a
  gold answer that does not parse never yields reward 1.
- Untrusted text is never evaluated. `_Parser` below turns LaTeX into a sympy tree itself (no `eval`,
  `sympify` or `parse_expr`, which run Python), refuses numbers too large to compute (power towers, huge
  factorials), and `score_batch` runs every check in a worker process that is killed at a hard timeout.

Conventions (documented because graders disagree): `50\\%` equals `50` (the number written before the sign;
never 0.5); degrees signs, `\\$`, and units after a number are dropped; `x = 3` equals `3`; a bare list
`1, 2` is unordered (multiple answers) while `(1, 2)` is an ordered tuple and `(0, 1]` an interval whose brackets
must match; `e` is Euler's number and `i` the imaginary unit; `2\\frac{1}{2}` alone is the mixed number 5/2.
Sources of the failure cases handled here: shared notes on Math-Verify, Qwen2.5-Math, verl, prm800k graders.
"""
import argparse
import json
import math
import os
import random
import re
import select
import subprocess
import sys
import time
from functools import lru_cache

import sympy

MAX_ANSWER_CHARS = 1000      # longer "answers" are not answers
MAX_INT_DIGITS = 400         # integer literals longer than this are refused
MAX_RESULT_BITS = 20_000     # refuse to compute b**e (and n!) past ~6000 decimal digits
MAX_DEPTH = 60               # nesting depth of the expression parser
DEFAULT_TIMEOUT_S = 5.0


# ------------------------------------------------------------------------------------------------------------
# Extraction
# ------------------------------------------------------------------------------------------------------------
def _braced(text, start):
    """Return (content, end) of the brace group opening at text[start] == '{', or None if unclosed."""
    depth = 0
    for pos in range(start, len(text)):
        ch = text[pos]
        if ch == "\\":  # skip escaped characters such as \{ and \}
            continue
        if ch == "{" and (pos == 0 or text[pos - 1] != "\\"):
            depth += 1
        elif ch == "}" and (pos == 0 or text[pos - 1] != "\\"):
            depth -= 1
            if depth == 0:
                return text[start + 1:pos], pos + 1
    return None


def _last_boxed(text):
    """Content of the last \\boxed{...} / \\fbox{...} (nested braces), or \\boxed 5; None if none closes."""
    for match in reversed(list(re.finditer(r"\\(?:boxed|fbox)\b", text))):
        pos = match.end()
        while pos < len(text) and text[pos] == " ":
            pos += 1
        if pos < len(text) and text[pos] == "{":
            group = _braced(text, pos)
            if group is not None:
                return group[0]
        elif pos > match.end():  # "\boxed 5": one token up to whitespace or $
            token = re.match(r"[^\s$]+", text[pos:])
            if token:
                return token.group(0)
    return None


def extract_answer(text):
    """The final answer a response commits to, or None. Looked for in this order, each time the LAST one:
    1. \\boxed{...} or \\fbox{...} (nested braces; also `\\boxed 5`)
    2. <answer>...</answer>  (a \\boxed inside it was already found by 1)
    3. GSM8K style `#### 42`
    4. "the answer is ..." / "final answer: ..." up to the end of the line
    Reasoning models: only the text after the last </think> is searched, when there is one.
    """
    if not text:
        return None
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
    boxed = _last_boxed(text)
    if boxed is not None:
        return boxed.strip()
    tags = re.findall(r"<answer>(.*?)</answer>", text, flags=re.DOTALL)
    if tags:
        return tags[-1].strip()
    hashes = re.findall(r"####\s*([^\n]+)", text)
    if hashes:
        return hashes[-1].strip()
    said = re.findall(r"(?:final answer|the answer)\s*(?:is|:)\s*:?\s*([^\n]+)", text, flags=re.IGNORECASE)
    if said:
        answer = said[-1].strip().rstrip(".").strip()
        return answer.strip("$").strip() or None
    return None


# ------------------------------------------------------------------------------------------------------------
# Normalisation of answer strings (pure text, no math yet)
# ------------------------------------------------------------------------------------------------------------
_TEXT_CMDS = r"\\(?:text|textbf|textit|textrm|mbox|mathrm|mathbf|mathit|operatorname|textnormal)"
_UNIT_WORD = r"[A-Za-z][A-Za-z\s.\^\d/\-]*"


def _unwrap_text_commands(s):
    """Replace \\text{X} (and friends) by X, innermost first, with brace matching."""
    for _ in range(20):
        match = re.search(_TEXT_CMDS + r"\s*\{", s)
        if not match:
            return s
        group = _braced(s, match.end() - 1)
        if group is None:
            return s
        s = s[:match.start()] + group[0] + s[group[1]:]
    return s


def normalize(s):
    """Canonical text of an answer: LaTeX spacing and sizing gone, units and signs stripped. None if empty."""
    if s is None:
        return None
    s = s.strip()
    if not s or len(s) > MAX_ANSWER_CHARS:
        return None
    # thousands separators written in LaTeX: 1{,}000  16,\!386  1\,000
    s = s.replace("{,}", ",").replace(",\\!", ",")
    s = re.sub(r"(\d)\\[,;: ](?=\d{3}\b)", r"\1", s)
    for old, new in (("\\left", ""), ("\\right", ""), ("\\displaystyle", ""), ("\\!", ""), ("\\,", " "),
                     ("\\;", " "), ("\\:", " "), ("\\quad", " "), ("\\qquad", " "), ("~", " "),
                     ("\\dfrac", "\\frac"), ("\\tfrac", "\\frac"), ("\\dbinom", "\\binom"), ("\\tbinom", "\\binom"),
                     ("\\$", ""), ("$", ""), ("\\%", ""), ("%", ""), ("°", ""), ("\\degree", ""),
                     ("∞", "\\infty"), ("π", "\\pi"), ("∪", "\\cup"), ("≤", "<="), ("≥", ">="), ("−", "-"),
                     ("\\lbrace", "\\{"), ("\\rbrace", "\\}")):
        s = s.replace(old, new)
    s = re.sub(r"(\d)_\{(\d+)\}", r"\1_\2", s)                # 52_{8} -> 52_8 (a number in base 8)
    s = re.sub(r"\s*\\!?:\\!?\s*|\s*:\s*", ":", s)                # 4\!:\!51 and 1 : 2 -> 4:51, 1:2
    s = re.sub(r"(?<!\\)\\ ", " ", s)                     # "\ " is a space, "\\ " a row break
    s = re.sub(r"^[A-Za-z]\s*\\in\s*", "", s)                 # x \in [1, 2] -> [1, 2]
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ", "", s)
    s = re.sub(r"\\(?:leqslant|leq|le)(?![a-z])", "<=", s)
    s = re.sub(r"\\(?:geqslant|geq|ge)(?![a-z])", ">=", s)
    s = re.sub(r"\\lt(?![a-z])", "<", s)
    s = re.sub(r"\\gt(?![a-z])", ">", s)
    s = re.sub(r"\\(?:neq|ne)(?![a-z])", "!=", s)
    # units written as text after a number (5\text{ cm}, 3\mbox{ inches}): dropped, at the end only
    s = re.sub(r"(?<=[\d}\)])\s*" + _TEXT_CMDS + r"\s*\{\s*" + _UNIT_WORD + r"\}(?:\^\{?\d\}?)?\s*$", "", s)
    s = _unwrap_text_commands(s).strip()
    # plain unit words after a number at the very end ("5 cm", "12 square feet"); single letters are kept
    s = re.sub(r"(?<=\d)\s+(?:[A-Za-z]{2,}\.?\s*)+$", "", s)
    s = s.strip().rstrip(".").strip()
    # a whole-answer integer with thousands separators: 1,000 or 1,234,567.5 (but not a list like 1, 000)
    if re.fullmatch(r"[-+]?\d{1,3}(?:,\d{3})+(?:\.\d+)?", s):
        s = s.replace(",", "")
    # a whole-answer mixed number 2\frac{1}{2} -> (2+1/2)
    mixed = re.fullmatch(r"([-+]?)(\d+)\s*\\frac(?:\{(\d+)\}|(\d))(?:\{(\d+)\}|(\d))", s)
    if mixed:
        sign, whole = mixed.group(1), mixed.group(2)
        num, den = mixed.group(3) or mixed.group(4), mixed.group(5) or mixed.group(6)
        s = f"{sign}({whole}+\\frac{{{num}}}{{{den}}})"
    s = re.sub(r"\s+", " ", s).strip()
    return s or None


# ------------------------------------------------------------------------------------------------------------
# A small LaTeX -> sympy parser that builds the tree itself (never evaluates text as code)
# ------------------------------------------------------------------------------------------------------------
class ParseError(Exception):
    pass


_TOKEN = re.compile(r"\s*(\d+\.\d*|\.\d+|\d+|\\[a-zA-Z]+|\\[{}|]|<=|>=|!=|[A-Za-z]|[-+*/^_!()\[\]{}|,=<>'])")
_FUNCS = {"sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "cot": sympy.cot, "sec": sympy.sec,
          "csc": sympy.csc, "arcsin": sympy.asin, "arccos": sympy.acos, "arctan": sympy.atan, "sinh": sympy.sinh,
          "cosh": sympy.cosh, "tanh": sympy.tanh, "ln": sympy.log, "exp": sympy.exp}
_GREEK = {"alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta", "iota",
          "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon", "phi", "varphi", "chi", "psi",
          "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Phi", "Psi", "Omega"}


def _tokenize(s):
    tokens, pos = [], 0
    s = s.rstrip()
    while pos < len(s):
        match = _TOKEN.match(s, pos)
        if not match:
            raise ParseError(f"unexpected character {s[pos]!r}")
        tokens.append(match.group(1))
        pos = match.end()
    return tokens


def _safe_pow(base, exp):
    """base**exp, refusing results too large to compute (9^{9^{9^9}} would hang any CAS)."""
    if base.is_number and exp.is_number and exp.is_Rational and base.is_Rational and base != 0:
        size = max(abs(base.p), abs(base.q))
        if size > 1 and abs(exp) * math.log2(size) > MAX_RESULT_BITS:
            raise ParseError("number too large")
    elif exp.is_number and exp.is_Rational and abs(exp) > MAX_RESULT_BITS:
        raise ParseError("exponent too large")
    return sympy.Pow(base, exp)


class _Parser:
    """Recursive descent over the token list. Grammar (loosest binding first):
        expr   := ['+'|'-'] term (('+'|'-') term)*
        term   := unary (('*' | '/' | \\cdot | \\times | \\div | implicit) unary)*
        unary  := '-' unary | power
        power  := postfix ['^' unary]            (right-associative)
        postfix:= atom ['!']*  [_ subscript]
        atom   := number | letter | \\greek | \\pi | \\infty | \\frac{}{} | \\sqrt[n]{} | \\binom{}{}
                  | \\func[^p] arg | (expr) | {expr} | [expr] | |expr|
    `decimals` collects, for every decimal literal, the relative rounding error it stands for.
    """

    def __init__(self, text):
        self.tokens = _tokenize(text)
        self.pos = 0
        self.depth = 0
        self.decimal_tolerances = []
        self.symbols_seen = False

    def parse(self):
        if not self.tokens:
            raise ParseError("empty")
        value = self.expr()
        if self.pos != len(self.tokens):
            raise ParseError(f"unexpected {self.tokens[self.pos]!r}")
        return value

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, expected=None):
        token = self.peek()
        if token is None or (expected is not None and token != expected):
            raise ParseError(f"expected {expected!r}, got {token!r}")
        self.pos += 1
        return token

    def nested(self, fn):
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ParseError("too deeply nested")
        try:
            return fn()
        finally:
            self.depth -= 1

    def expr(self):
        sign = 1
        if self.peek() in ("+", "-"):
            sign = -1 if self.take() == "-" else 1
        value = sign * self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        return value

    _ATOM_START = re.compile(r"\d|\.\d|[A-Za-z]$|\\(?!cdot|times|div|cup|cap|in$|to$|mid$)[a-zA-Z]+|[({]|\\\{")

    def term(self):
        value = self.unary()
        while True:
            token = self.peek()
            if token in ("*", "\\cdot", "\\times"):
                self.take()
                value = value * self.unary()
            elif token in ("/", "\\div"):
                self.take()
                divisor = self.unary()
                if divisor == 0:
                    raise ParseError("division by zero")
                value = value / divisor
            elif token is not None and self._ATOM_START.match(token) and token not in ("\\pm", "\\mp"):
                value = value * self.power()  # implicit multiplication: 2x, 2\pi, x(y+1)
            else:
                return value

    def unary(self):
        if self.peek() == "-":
            self.take()
            return -self.nested(self.unary)
        if self.peek() == "+":
            self.take()
            return self.nested(self.unary)
        return self.power()

    def power(self):
        base = self.postfix()
        if self.peek() == "^":
            self.take()
            exponent = self.nested(self.unary) if self.peek() != "{" else self.group()
            return _safe_pow(base, exponent)
        return base

    def postfix(self):
        value = self.nested(self.atom)
        while self.peek() == "!":
            self.take()
            if not (value.is_Integer and 0 <= value <= 500):
                raise ParseError("factorial argument too large or not a small integer")
            value = sympy.factorial(value)
        return value

    def group(self):
        """A {...} group, or a single token argument as in \\frac12 or x^2."""
        if self.peek() == "{":
            self.take("{")
            value = self.nested(self.expr)
            self.take("}")
            return value
        token = self.peek()
        if token is not None and re.fullmatch(r"\d+", token) and len(token) > 1:
            self.tokens[self.pos] = token[1:]  # \frac12 -> 1 then 2
            return sympy.Integer(token[0])
        return self.nested(self.atom)

    def number(self, token):
        if "." in token:
            integer, _, frac = token.partition(".")
            if len((integer + frac).lstrip("0")) > MAX_INT_DIGITS:
                raise ParseError("number too long")
            value = sympy.Rational(int(integer or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac))
            if frac.strip("0") and value != 0:  # a non-integer decimal: remember its rounding
                self.decimal_tolerances.append(0.5 * 10 ** -len(frac) / abs(float(value)))
            return value
        if len(token) > MAX_INT_DIGITS:
            raise ParseError("number too long")
        return sympy.Integer(token)

    def atom(self):
        token = self.take()
        if re.fullmatch(r"\d+\.?\d*|\.\d+", token):
            return self.number(token)
        if re.fullmatch(r"[A-Za-z]", token):
            return self.symbol(token)
        if token in ("(", "[", "{"):
            value = self.nested(self.expr)
            self.take({"(": ")", "[": "]", "{": "}"}[token])
            return value
        if token == "|":
            value = self.nested(self.expr)
            self.take("|")
            return sympy.Abs(value)
        name = token[1:] if token.startswith("\\") else None
        if name == "frac":
            num = self.group()
            den = self.group()
            if den == 0:
                raise ParseError("division by zero")
            return num / den
        if name == "sqrt":
            index = sympy.Integer(2)
            if self.peek() == "[":
                self.take("[")
                index = self.nested(self.expr)
                self.take("]")
            return _safe_pow(self.group(), 1 / index)
        if name == "binom":
            n, k = self.group(), self.group()
            if not (n.is_Integer and k.is_Integer and 0 <= n <= 10_000):
                raise ParseError("binomial arguments")
            return sympy.binomial(n, k)
        if name == "pi":
            return sympy.pi
        if name == "infty":
            return sympy.oo
        if name in _GREEK:
            return self.symbol(name)
        if name == "log":
            base = None
            if self.peek() == "_":
                self.take()
                base = self.group()
            arg = self.func_arg()
            return sympy.log(arg, base) if base is not None else sympy.log(arg)
        if name in _FUNCS:
            exponent = None
            if self.peek() == "^":  # \sin^2 x
                self.take()
                exponent = self.group()
            value = _FUNCS[name](self.func_arg())
            return _safe_pow(value, exponent) if exponent is not None else value
        raise ParseError(f"unsupported token {token!r}")

    def func_arg(self):
        if self.peek() in ("(", "{", "["):
            return self.nested(self.atom)
        return self.nested(self.power)

    def symbol(self, name):
        if name == "e" and self.peek() != "_":
            return sympy.E
        if name == "i" and self.peek() != "_":
            return sympy.I
        if self.peek() == "_":
            self.take()
            sub = self.peek()
            if sub == "{":
                self.take()
                parts = []
                while self.peek() not in (None, "}"):
                    parts.append(self.take())
                self.take("}")
                sub = "".join(parts)
            else:
                self.take()
            name = f"{name}_{sub}"
        self.symbols_seen = True
        return sympy.Symbol(name)


@lru_cache(maxsize=4096)
def parse_math(text):
    """text -> (sympy expression, relative tolerance) or None when it is not a formula we can read.
    The tolerance is 0 for exact input, else the largest rounding a decimal literal in it stands for."""
    sci = re.fullmatch(r"([-+]?\d+(?:\.\d+)?)\s*[eE]\s*([-+]?\d+)", text)
    if sci:  # 4.5e33 (Minerva golds)
        text = f"{sci.group(1)}\\times 10^{{{sci.group(2)}}}"
    try:
        parser = _Parser(text)
        value = parser.parse()
    except (ParseError, RecursionError, ValueError, TypeError, ZeroDivisionError, OverflowError):
        return None
    if value.has(sympy.nan, sympy.zoo):
        return None
    if parser.symbols_seen and not value.free_symbols:
        return None  # letters that vanished: `I(0)` read as I*0 = 0 is a function value, not the number 0
    return value, max(parser.decimal_tolerances, default=0.0)


# ------------------------------------------------------------------------------------------------------------
# Comparing parsed values
# ------------------------------------------------------------------------------------------------------------
def _close(a, b, rel):
    """|a - b| <= rel * max(|a|, |b|), with exact arithmetic when rel == 0 (up to 1e-25 numerical noise)."""
    if a == b:
        return True
    if a.has(sympy.oo, -sympy.oo) or b.has(sympy.oo, -sympy.oo):
        return False
    va, vb = complex(sympy.N(a, 40)), complex(sympy.N(b, 40))
    if not all(math.isfinite(x) for x in (va.real, va.imag, vb.real, vb.imag)):
        return False
    scale = max(abs(va), abs(vb), 1e-300)
    return abs(va - vb) <= max(rel, 1e-25) * scale * (1 + 1e-9) or abs(va - vb) == 0


def _values_equal(pred, gold):
    """Numeric / symbolic equality of two parsed answers (expression, tolerance)."""
    (p, p_tol), (g, g_tol) = pred, gold
    if g_tol:
        rel = g_tol                      # the gold is rounded: accept anything that rounds to it
    elif p_tol:
        rel = min(p_tol, 1e-3)           # the prediction is rounded: at least 3 significant digits
    else:
        rel = 0.0                        # both exact: integers and fractions must match exactly
    try:
        if not p.free_symbols and not g.free_symbols:
            return _close(p, g, rel)
        if p.free_symbols != g.free_symbols:
            return False
        # identity of two formulas: equal at several random points (exact arithmetic where possible)
        rng = random.Random(0)
        symbols = sorted(g.free_symbols, key=str)
        checked = 0
        for _ in range(8):
            point = {s: sympy.Rational(rng.randint(-40, 40), rng.randint(1, 9)) + sympy.Rational(1, 7) for s in symbols}
            pv, gv = p.subs(point), g.subs(point)
            if pv.has(sympy.nan, sympy.zoo) or gv.has(sympy.nan, sympy.zoo):
                continue
            if not _close(pv, gv, max(rel, 1e-12)):
                return False
            checked += 1
            if checked == 4:
                return True
        return False
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError, AttributeError):
        return False


def _split_top(s, separators):
    """Split at separators that are not inside (), [], {}; returns stripped parts."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        ch = s[i]
        if ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth == 0:
            for sep in separators:
                if s.startswith(sep, i):
                    parts.append(s[start:i].strip())
                    start = i + len(sep)
                    i = start - 1
                    break
        i += 1
    parts.append(s[start:].strip())
    return parts


def _strip_outer(s, open_, close):
    if s.startswith(open_) and s.endswith(close):
        inner = s[len(open_):len(s) - len(close)]
        depth = 0
        for ch in inner:  # the outer pair must enclose everything: (1)+(2) is not a group
            depth += ch in "([{"
            depth -= ch in ")]}"
            if depth < 0:
                return None
        return inner if depth == 0 else None
    return None


def _match_unordered(preds, golds):
    if len(preds) != len(golds) or len(golds) > 30:
        return False
    remaining = list(preds)
    for g in golds:
        for k, p in enumerate(remaining):
            if _equiv(p, g):
                del remaining[k]
                break
        else:
            return False
    return True


_REL_OPS = ("<=", ">=", "!=", "<", ">")


def _as_interval(s):
    """'x > 5', '-2 <= x < 1', 'x \\in [a, b)', '(a, b]' -> (lo, hi, lo_closed, hi_closed) strings, else None."""
    s = re.sub(r"^[A-Za-z]\s*\\in\s*", "", s)
    for open_, close in (("(", ")"), ("[", "]"), ("(", "]"), ("[", ")")):
        if s.startswith(open_) and s.endswith(close) and len(_split_top(s[1:-1], [","])) == 2:
            lo, hi = _split_top(s[1:-1], [","])
            return lo, hi, open_ == "[", close == "]"
    parts = re.split(r"(<=|>=|<|>)", s)
    if len(parts) == 3:
        lhs, op, rhs = (p.strip() for p in parts)
        var_left = re.fullmatch(r"[A-Za-z]", lhs) is not None
        var_right = re.fullmatch(r"[A-Za-z]", rhs) is not None
        if var_left == var_right:
            return None
        bound = rhs if var_left else lhs
        upper = (op in ("<", "<=")) == var_left      # x < b or b > x: an upper bound
        closed = "=" in op
        return ("-\\infty", bound, False, closed) if upper else (bound, "\\infty", closed, False)
    if len(parts) == 5 and parts[1] in ("<", "<=") and parts[3] in ("<", "<=") \
            and re.fullmatch(r"[A-Za-z]", parts[2].strip()):
        return parts[0].strip(), parts[4].strip(), parts[1] == "<=", parts[3] == "<="
    return None


def _intervals_equal(p, g):
    pi, gi = _as_interval(p), _as_interval(g)
    if pi is None or gi is None:
        return False
    return pi[2:] == gi[2:] and _equiv(pi[0], gi[0]) and _equiv(pi[1], gi[1])


def _matrix_rows(s):
    match = re.fullmatch(r"\\begin\{([pbvB]?matrix|array)\}(?:\{[^}]*\})?(.*)\\end\{\1\}", s, flags=re.DOTALL)
    if not match:
        return None
    rows = [r for r in re.split(r"\\\\", match.group(2)) if r.strip()]
    return [[c.strip() for c in r.split("&")] for r in rows]


def _equiv(pred, gold):
    """Both normalised. Structure first (lists, intervals, equations), then values."""
    if pred == gold or pred.replace(" ", "") == gold.replace(" ", ""):
        return True
    # multiple choice: gold is a letter A-E, possibly in parentheses
    letter = re.fullmatch(r"\(?([A-E])\)?", gold)
    if letter:
        return re.fullmatch(r"\(?" + letter.group(1) + r"\)?(?:\s.*)?", pred) is not None
    # ratios and times: ordered parts (3:1 is not 1:3)
    if ":" in gold:
        g_parts, p_parts = gold.split(":"), pred.split(":")
        return len(g_parts) == len(p_parts) and all(_equiv(p, g) for p, g in zip(p_parts, g_parts))
    # \pm expands to two answers
    if "\\pm" in gold or "\\pm" in pred:
        def expand(s):
            return [x for part in _split_top(s, [","]) for x in
                    ([part.replace("\\pm", "+", 1), part.replace("\\pm", "-", 1)] if "\\pm" in part else [part])]
        return _match_unordered(expand(pred), expand(gold))
    # unions of intervals (order-free)
    if "\\cup" in gold or "\\cup" in pred:
        return _match_unordered(_split_top(pred, ["\\cup"]), _split_top(gold, ["\\cup"]))
    # matrices and vectors
    g_rows, p_rows = _matrix_rows(gold), _matrix_rows(pred)
    if g_rows is not None or p_rows is not None:
        return (g_rows is not None and p_rows is not None and len(g_rows) == len(p_rows)
                and all(len(a) == len(b) and all(_equiv(x, y) for x, y in zip(a, b)) for a, b in zip(p_rows, g_rows)))
    # sets: unordered; the prediction may leave out the braces
    g_set = _strip_outer(gold, "\\{", "\\}")
    if g_set is not None and "|" not in g_set and ":" not in g_set:
        p_set = _strip_outer(pred, "\\{", "\\}")
        return _match_unordered(_split_top(p_set if p_set is not None else pred, [","]), _split_top(g_set, [","]))
    # inequalities and intervals (direction and brackets matter)
    if any(op in gold for op in _REL_OPS) or any(op in pred for op in _REL_OPS) and "=" not in gold:
        if _intervals_equal(pred, gold):
            return True
        if any(op in gold for op in _REL_OPS):
            return False
    # equations and assignments
    g_sides, p_sides = _split_top(gold, ["="]), _split_top(pred, ["="])
    g_simple = len(g_sides) == 2 and re.fullmatch(r"[A-Za-z](?:_\{?\w+\}?)?", g_sides[0]) is not None
    p_simple = len(p_sides) == 2 and re.fullmatch(r"[A-Za-z](?:_\{?\w+\}?)?", p_sides[0]) is not None
    if len(g_sides) == 2 and len(p_sides) == 2 and not (g_simple and p_simple and g_sides[0] != p_sides[0]):
        if g_simple and p_simple:
            return _equiv(p_sides[1], g_sides[1])
        return _equations_equal(p_sides, g_sides)
    if len(g_sides) == 2 and g_simple and len(p_sides) == 1:
        return _equiv(pred, g_sides[1])
    if len(g_sides) == 1 and len(p_sides) >= 2:
        # x = 3 for 3, or a chain a+2z = 5+96 = 101 ending in the gold; never `x^2-4 = 0` for 0
        if p_simple or len(p_sides) >= 3:
            return _equiv(p_sides[-1], gold)
        return False
    if len(g_sides) >= 2 or len(p_sides) >= 2:
        return False
    # tuples and intervals: brackets must match; bare lists: unordered
    g_items, p_items = _split_top(gold, [","]), _split_top(pred, [","])
    g_group = next(((o, c) for o, c in (("(", ")"), ("[", "]"), ("(", "]"), ("[", ")"))
                    if _strip_outer(gold, o, c) is not None or (gold.startswith(o) and gold.endswith(c)
                                                                and len(g_items) == 1)), None)
    if g_group and len(_split_top(gold[1:-1], [","])) > 1:
        if not (pred.startswith(g_group[0]) and pred.endswith(g_group[1])):
            return False
        inner_g, inner_p = _split_top(gold[1:-1], [","]), _split_top(pred[1:-1], [","])
        return len(inner_g) == len(inner_p) and all(_equiv(p, g) for p, g in zip(inner_p, inner_g))
    if len(g_items) > 1 or len(p_items) > 1:
        return _match_unordered(p_items, g_items)
    # words, case-insensitive (before math: "even" is not e*v*e*n)
    if _is_words(gold):
        return _is_words(pred) and _words(pred) == _words(gold)
    # single values
    g_val, p_val = parse_math(gold), parse_math(pred)
    if g_val is not None and p_val is not None:
        return _values_equal(p_val, g_val)
    return False


def _is_words(s):
    """Plain words (`even`, `Monday`, `no solution`): a run of 3+ letters; `xy` stays a product of symbols."""
    return re.fullmatch(r"[A-Za-z][A-Za-z\s\-']*", s) is not None and re.search(r"[A-Za-z]{3}", s) is not None


def _words(s):
    return " ".join(s.lower().replace("-", " ").split())


def _equations_equal(p_sides, g_sides):
    """lhs1 - rhs1 and lhs2 - rhs2 are proportional by a nonzero constant (y = 2x+1 vs 2y - 4x = 2)."""
    p = [parse_math(x) for x in p_sides]
    g = [parse_math(x) for x in g_sides]
    if None in p or None in g:
        return False
    if _values_equal(p[0], g[0]) and _values_equal(p[1], g[1]):
        return True
    dp, dg = p[0][0] - p[1][0], g[0][0] - g[1][0]
    if dp.free_symbols != dg.free_symbols or not dg.free_symbols:
        return False
    rng = random.Random(1)
    ratios = []
    for _ in range(6):
        point = {s: sympy.Rational(rng.randint(-30, 30), rng.randint(1, 7)) + sympy.Rational(1, 11) for s in dg.free_symbols}
        a, b = dp.subs(point), dg.subs(point)
        if b == 0 or a.has(sympy.nan, sympy.zoo) or b.has(sympy.nan, sympy.zoo):
            continue
        ratios.append(a / b)
    return len(ratios) >= 3 and ratios[0] != 0 and all(_close(r, ratios[0], 1e-12) for r in ratios)


@lru_cache(maxsize=4096)
def gold_is_valid(gold):
    """Can this gold answer be graded at all? Not when it is empty, longer than MAX_ANSWER_CHARS, has unbalanced
    brackets or no letter or digit. (Golds that are not formulas, like `52_8` or `3:1`, still compare.)"""
    g = normalize(gold)
    if g is None or not re.search(r"[A-Za-z0-9]", g):
        return False
    depth = 0
    for ch in g:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


def is_equiv(pred, gold):
    """Are the answer strings `pred` and `gold` the same mathematical object? Never raises; False when unsure."""
    try:
        p, g = normalize(pred), normalize(gold)
        if p is None or g is None:
            return False
        return _equiv(p, g)
    except (RecursionError, ValueError, TypeError, AttributeError, ZeroDivisionError, OverflowError, MemoryError):
        return False


def math_reward(response, gold):
    """1.0 if the answer extracted from `response` equals `gold`, else 0.0."""
    answer = extract_answer(response)
    return 1.0 if answer is not None and is_equiv(answer, gold) else 0.0


def format_reward(response, mode="strict"):
    """The <think>/<answer> format reward of the Perplexity study (off by default in training).
    strict: the whole response is one <think>...</think> block followed by one <answer>...</answer> block.
    loose:  at least one complete block of each, in that order."""
    if mode == "strict":
        pattern = r"\s*<think>(?:(?!</?think>).)*</think>\s*<answer>(?:(?!</?answer>).)*</answer>\s*"
        return 1.0 if re.fullmatch(pattern, response, flags=re.DOTALL) else 0.0
    if mode == "loose":
        return 1.0 if re.search(r"<think>.*?</think>.*?<answer>.*?</answer>", response, flags=re.DOTALL) else 0.0
    raise ValueError(f"format_reward mode must be 'strict' or 'loose', got {mode!r}")


# ------------------------------------------------------------------------------------------------------------
# Parallel scoring with a hard per-item timeout (worker processes, killed when late)
# ------------------------------------------------------------------------------------------------------------
def _serve(memory_limit_bytes):
    """Worker loop: one JSON request per stdin line ({"response", "gold"}), one JSON reply per stdout line."""
    try:
        import resource
        resource.setrlimit(resource.RLIMIT_AS, (memory_limit_bytes, memory_limit_bytes))
    except (ImportError, ValueError, OSError):
        pass
    debug_sleep = float(os.environ.get("REWARD_TEST_HANG_S", "0"))  # tests only: simulate a check that hangs
    for line in sys.stdin:
        item = json.loads(line)
        if debug_sleep and item["response"] == "<hang>":
            time.sleep(debug_sleep)
        try:
            reply = {"score": math_reward(item["response"], item["gold"])}
        except Exception as exc:  # noqa: BLE001 -- a crash is reported to the parent, never propagated
            reply = {"error": type(exc).__name__}
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()


class _Worker:
    """A grading process: a plain `python -c` child (no fork of a parent holding vLLM threads, and no re-import
    of the caller's __main__ as multiprocessing's spawn would do), killed with SIGKILL when late."""

    def __init__(self, memory_limit_bytes):
        here = os.path.dirname(os.path.abspath(__file__))
        code = f"import sys; sys.path.insert(0, {here!r}); import reward; reward._serve({memory_limit_bytes})"
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True, encoding="utf-8")
        self.started = None

    def send(self, response, gold):
        self.proc.stdin.write(json.dumps({"response": response, "gold": gold}) + "\n")
        self.proc.stdin.flush()
        self.started = time.monotonic()

    def kill(self):
        self.proc.kill()
        self.proc.wait()


_POOL = []  # persistent workers: starting one costs ~0.5 s of imports, so they are reused across batches


def score_batch(responses, golds, workers=2, timeout_s=DEFAULT_TIMEOUT_S, ids=None, stats=None,
                memory_limit_gb=4.0):
    """math_reward for each (response, gold) in parallel worker processes, each item with a hard timeout.

    A late item's worker is killed (SIGKILL also stops C-level big-integer work) and replaced; a late or
    crashing item scores 0.0. The batch always returns a list of len(responses) floats. `stats`, when a dict,
    receives counts: timeouts, errors, invalid_gold. A gold answer that cannot be graded is warned about
    (with its id from `ids`) and scores 0.0 without being checked. workers=0 grades in-process (no timeout).
    """
    if len(responses) != len(golds):
        raise ValueError(f"{len(responses)} responses but {len(golds)} gold answers")
    counts = {"timeouts": 0, "errors": 0, "invalid_gold": 0}
    scores = [0.0] * len(responses)
    todo = []
    for k, gold in enumerate(golds):
        if gold_is_valid(gold):
            todo.append(k)
        else:
            counts["invalid_gold"] += 1
            where = ids[k] if ids is not None else f"item {k}"
            print(f"reward.py: warning: gold answer {gold!r} of {where} cannot be parsed; it scores 0",
                  file=sys.stderr)
    if workers <= 0:
        for k in todo:
            scores[k] = math_reward(responses[k], golds[k])
    else:
        limit = int(memory_limit_gb * 2**30)
        while len(_POOL) < workers:
            _POOL.append(_Worker(limit))
        queue = list(reversed(todo))
        busy = {}  # worker index -> item index
        while queue or busy:
            for w in range(workers):
                if w not in busy and queue:
                    k = queue.pop()
                    try:
                        _POOL[w].send(responses[k], golds[k])
                    except OSError:  # a dead worker: replace it and retry the item
                        _POOL[w].kill()
                        _POOL[w] = _Worker(limit)
                        _POOL[w].send(responses[k], golds[k])
                    busy[w] = k
            ready, _, _ = select.select([_POOL[w].proc.stdout for w in busy], [], [], 0.05)
            now = time.monotonic()
            for w in list(busy):
                worker, k = _POOL[w], busy[w]
                if worker.proc.stdout in ready:
                    line = worker.proc.stdout.readline()
                    reply = json.loads(line) if line else {"error": "worker died"}
                    if now - worker.started > timeout_s and line:
                        counts["timeouts"] += 1          # answered, but too late: scores 0 like any timeout
                    elif "score" in reply:
                        scores[k] = float(reply["score"])
                    else:
                        counts["errors"] += 1
                        if not line:  # died (memory limit, segfault): replace it
                            worker.kill()
                            _POOL[w] = _Worker(limit)
                    del busy[w]
                elif now - worker.started > timeout_s:
                    counts["timeouts"] += 1
                    worker.kill()
                    _POOL[w] = _Worker(limit)
                    del busy[w]
    if stats is not None:
        for key, value in counts.items():
            stats[key] = stats.get(key, 0) + value
    return scores


# ------------------------------------------------------------------------------------------------------------
# CLI
# ------------------------------------------------------------------------------------------------------------
def main():
    parser = argparse.ArgumentParser(description="Grade math answers. Examples:\n"
                                     "  python reward.py --response 'so \\boxed{1/2}' --gold '\\frac12'\n"
                                     "  python reward.py graded.jsonl   (rows with 'response' and 'gold')",
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("file", nargs="?", help="JSONL file of {'response', 'gold'} rows to grade")
    parser.add_argument("--response", help="one model response to grade")
    parser.add_argument("--gold", help="the gold answer for --response")
    parser.add_argument("--workers", type=int, default=2, help="grading processes for FILE")
    parser.add_argument("--timeout_s", type=float, default=DEFAULT_TIMEOUT_S, help="hard limit per item")
    args = parser.parse_args()
    if args.response is not None:
        if args.gold is None:
            parser.error("--response needs --gold")
        answer = extract_answer(args.response)
        print(f"extracted: {answer!r}")
        print(f"gold:      {args.gold!r} ({'valid' if gold_is_valid(args.gold) else 'INVALID'})")
        print(f"correct:   {math_reward(args.response, args.gold) == 1.0}")
        return
    if not args.file:
        parser.error("give a FILE or --response/--gold")
    responses, golds = [], []
    with open(args.file, encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
                responses.append(row["response"])
                golds.append(row["gold"])
            except (json.JSONDecodeError, KeyError, TypeError) as exc:
                sys.exit(f"{args.file}:{line_no}: bad row ({exc}); need an object with 'response' and 'gold'")
    stats = {}
    start = time.time()
    scores = score_batch(responses, golds, workers=args.workers, timeout_s=args.timeout_s, stats=stats)
    elapsed = time.time() - start
    print(f"{len(scores)} rows, accuracy {sum(scores) / max(len(scores), 1):.4f}, {elapsed:.1f}s, {stats}")


# ------------------------------------------------------------------------------------------------------------
# Code problems (rows with `tests`): the sandboxed code reward lives in code_reward.py and is re-exported here so
# that the loop imports one module; score_problems picks the reward by each row's data.
# ------------------------------------------------------------------------------------------------------------
from code_reward import DEFAULT_TIMEOUT_S as CODE_TIMEOUT_S  # noqa: E402
from code_reward import STAT_KEYS as CODE_STAT_KEYS  # noqa: E402,F401
from code_reward import code_reward, score_code_batch  # noqa: E402,F401


def score_problems(responses, problems, workers=2, timeout_s=DEFAULT_TIMEOUT_S, code_timeout_s=None, stats=None):
    """Grade responses[i] against problems[i] by the problem's data: a row with `tests` gets the code reward (its
    program run against the tests in a sandbox, hard limit code_timeout_s seconds per item, default
    code_reward.DEFAULT_TIMEOUT_S), a row with `answer` the math grader (score_batch, timeout_s). Returns floats in
    [0, 1]; `stats` receives both graders' counts (timeouts, invalid_gold, code_timeouts, sandbox_refusals, ...)."""
    if len(responses) != len(problems):
        raise ValueError(f"{len(responses)} responses but {len(problems)} problems")
    scores = [0.0] * len(responses)
    is_code = [p.get("tests") is not None for p in problems]
    math_rows = [i for i, c in enumerate(is_code) if not c]
    code_rows = [i for i, c in enumerate(is_code) if c]
    if math_rows:
        part = score_batch([responses[i] for i in math_rows], [problems[i]["answer"] for i in math_rows], workers=workers,
                           timeout_s=timeout_s, ids=[problems[i]["id"] for i in math_rows], stats=stats)
        for i, s in zip(math_rows, part):
            scores[i] = s
    if code_rows:
        part = score_code_batch([responses[i] for i in code_rows], [problems[i]["tests"] for i in code_rows],
                                workers=workers, timeout_s=code_timeout_s or CODE_TIMEOUT_S, stats=stats)
        for i, s in zip(code_rows, part):
            scores[i] = s
    return scores


if __name__ == "__main__":
    main()
