"""Answer syntaxes other than LaTeX, rewritten token by token as LaTeX before latex.clean reads a value.

Entry point: as_latex(s) -> s rewritten (unchanged when no foreign syntax is found). Nothing is evaluated: each rule
rewrites text by its grammar, and every expansion is bounded.

  siunitx        \\num{2.5e3}, \\SI{60}{\\kilo\\metre\\per\\hour}, \\qty{11}{\\volt}, \\ang{30}: the number, its unit in text
  computer       Mathematica `3 Sqrt[2]`, `ArcTan[1]`, `Pi`, `E`, `Infinity`, rules `{{x -> -Sqrt[2]}, {x -> Sqrt[2]}}`;
  algebra        SymPy `4*sqrt(3)`, `-1 + 2*I`, `oo`, `zoo`; Python/NumPy `np.float64(7.0)`, `Fraction(1, 2)`,
                 `array([2., 3.])`
  separators     a tuple or point with semicolons `(2; 3)`, `M(2;\\ 3)`; French intervals with outward brackets
                 `]2 ; 7]`, `]-\\infty ; 3[` (an opening `]` or a closing `[` is an open end)
  roots          plain-text roots `2sqrt3`, `sqrt 50`, `5sqrt(2)`, `√(25*2)`: \\sqrt{...} over the number, letter or
                 parenthesised group after them (applied to a whole response: answer_span.find_span)
  ranges         `1, 2, \\ldots, 7` and `1, 2, 4, \\ldots, 64`: an arithmetic or geometric progression that reaches its
                 last term exactly, listed (at most MAX_RANGE terms; otherwise left as written)
"""
import re
from fractions import Fraction

MAX_RANGE = 1000  # a range written with an ellipsis is listed only up to this many terms

_SI_PREFIX = {"yocto": "y", "zepto": "z", "atto": "a", "femto": "f", "pico": "p", "nano": "n", "micro": "µ", "milli": "m",
              "centi": "c", "deci": "d", "deca": "da", "deka": "da", "hecto": "h", "kilo": "k", "mega": "M", "giga": "G",
              "tera": "T", "peta": "P", "exa": "E"}
_SI_UNIT = {"metre": "m", "meter": "m", "gram": "g", "second": "s", "ampere": "A", "kelvin": "K", "mole": "mol",
            "candela": "cd", "hour": "h", "minute": "min", "day": "d", "litre": "L", "liter": "L", "volt": "V",
            "ohm": "Ω", "watt": "W", "joule": "J", "newton": "N", "pascal": "Pa", "hertz": "Hz", "coulomb": "C",
            "farad": "F", "tesla": "T", "henry": "H", "radian": "rad", "degree": "°", "percent": "%", "celsius": "°C",
            "degreeCelsius": "°C", "kilogram": "kg", "electronvolt": "eV", "tonne": "t", "bar": "bar"}
_MACRO = r"\\(?:SI|qty|num|ang|SIrange|qtyrange|numrange|unit|si)\b"


def _braced_args(s, start, count):
    """The contents of `count` brace groups from s[start:] (skipping one optional [..]) and the end, or None."""
    args, i = [], start
    while len(args) < count:
        while i < len(s) and s[i] == " ":
            i += 1
        if i < len(s) and s[i] == "[" and not args:
            close = s.find("]", i)
            if close < 0:
                return None
            i = close + 1
            continue
        if i >= len(s) or s[i] != "{":
            return None
        depth, j = 0, i
        while j < len(s):
            depth += {"{": 1, "}": -1}.get(s[j], 0)
            if depth == 0:
                break
            j += 1
        if depth:
            return None
        args.append(s[i + 1:j])
        i = j + 1
    return args, i


def _si_unit(unit):
    """siunitx unit macros as a unit text: \\kilo\\metre\\per\\hour -> km/h; a literal unit (`km/h`) as written."""
    if "\\" not in unit:
        return unit.strip()
    numerator, denominator, prefix, per, last = [], [], "", False, None
    for word in re.findall(r"\\([A-Za-z]+)", unit):
        if word in _SI_PREFIX:
            prefix += _SI_PREFIX[word]
        elif word == "per":
            per = True
        elif word in ("squared", "cubed") and last:
            last[-1] += "^2" if word == "squared" else "^3"
        elif word not in ("square", "cubic"):
            last = denominator if per else numerator
            last.append(prefix + _SI_UNIT.get(word, word))
            prefix, per = "", False
    return " ".join(numerator or ["1"]) + "".join("/" + d for d in denominator)


def _number(text):
    """A siunitx number: 2.5e3 -> 2.5\\times10^{3}, `1,5` with a decimal comma -> 1.5."""
    text = text.strip().replace(" ", "")
    text = re.sub(r"^(-?\d+),(\d+)$", r"\1.\2", text)
    exp = re.fullmatch(r"(-?\d*\.?\d+)[eE]([-+]?\d+)", text)
    return f"{exp.group(1)}\\times10^{{{int(exp.group(2))}}}" if exp else text


def siunitx(s):
    out, i = [], 0
    for m in re.finditer(_MACRO, s):
        if m.start() < i:
            continue
        name = m.group(0)[1:]
        count = {"num": 1, "ang": 1, "unit": 1, "si": 1, "numrange": 2, "SIrange": 3, "qtyrange": 3}.get(name, 2)
        found = _braced_args(s, m.end(), count)
        if found is None:
            continue
        args, end = found
        if name in ("unit", "si"):
            text = f"\\text{{ {_si_unit(args[0])}}}"
        elif name == "ang":
            text = _number(args[0]) + "^\\circ"
        elif name in ("num",):
            text = _number(args[0])
        elif name == "numrange":
            text = f"{_number(args[0])} - {_number(args[1])}"
        elif count == 3:
            text = f"{_number(args[0])} - {_number(args[1])}\\text{{ {_si_unit(args[2])}}}"
        else:
            text = f"{_number(args[0])}\\text{{ {_si_unit(args[1])}}}"
        out.append(s[i:m.start()] + text)
        i = end
    return "".join(out) + s[i:] if out else s


# ---- computer algebra systems and Python: their printed forms as LaTeX ------------------------------------------------
_MMA_FUNCTION = {"Sqrt": "\\sqrt", "Sin": "\\sin", "Cos": "\\cos", "Tan": "\\tan", "Cot": "\\cot", "Sec": "\\sec",
                 "Csc": "\\csc", "ArcSin": "\\arcsin", "ArcCos": "\\arccos", "ArcTan": "\\arctan", "Log": "\\ln",
                 "Exp": "\\exp", "Sinh": "\\sinh", "Cosh": "\\cosh", "Tanh": "\\tanh", "Abs": "\\abs", "Gamma": "\\Gamma"}
_MMA_CONSTANT = {"Pi": "\\pi", "E": "e", "I": "i", "Infinity": "\\infty", "ComplexInfinity": "\\infty", "Degree": "^\\circ"}
_MMA_CALL = re.compile(r"\b(" + "|".join(_MMA_FUNCTION) + r")\[([^\[\]]*)\]")
_MMA = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z]*)*\[|->|\b(?:Pi|Infinity)\b")
_SYMPY = re.compile(r"(?<=[\w)])\s*\*\*\s*(?=[\w(.-])|\d\s*\*\s*(?:I|sqrt|pi|[a-z])\b|\b(?:oo|zoo|sqrt\(|Rational\(|Fraction\(|np\.\w+\(|array\()")


def _mathematica(s):
    rules = re.findall(r"\{\s*([A-Za-z]\w*)\s*->\s*((?:[^{}]|\{[^{}]*\})+?)\s*\}", s)
    if rules and re.fullmatch(r"\s*\{\s*(?:\{[^{}]*\}\s*,?\s*)+\}\s*", s):
        s = ", ".join(f"{name} = {value}" for name, value in rules)  # {{x -> -Sqrt[2]}, {x -> Sqrt[2]}}
    for _ in range(8):  # innermost calls first: Sqrt[ArcTan[1]]
        s, n = _MMA_CALL.subn(lambda m: f"\\left|{m.group(2)}\\right|" if m.group(1) == "Abs" else
                              (f"{_MMA_FUNCTION[m.group(1)]}{{{m.group(2)}}}" if m.group(1) == "Sqrt" else
                               f"{_MMA_FUNCTION[m.group(1)]}({m.group(2)})"), s)
        if not n:
            break
    s = re.sub(r"\b(" + "|".join(_MMA_CONSTANT) + r")\b(?!\[)", lambda m: _MMA_CONSTANT[m.group(1)] + " ", s)
    return re.sub(r"\s*->\s*", " = ", s).replace("==", "=")


def _python(s):
    s = re.sub(r"\b(?:np|numpy)\.(?:float|int|uint|complex)\d*\(\s*([^()]*?)\s*\)", r"\1", s)  # np.float64(7.0)
    s = re.sub(r"\b(?:Fraction|Rational)\(\s*(-?\d+)\s*,\s*(-?\d+)\s*\)", r"\\frac{\1}{\2}", s)  # Fraction(1, 2)
    s = re.sub(r"\b(?:np\.|numpy\.)?array\(\s*\[([^\[\]]*)\]\s*\)", lambda m: "\\{" + re.sub(r"(?<=\d)\.(?!\d)", "", m.group(1)) + "\\}", s)
    s = re.sub(r"(?<![\w\\])z?oo\b", "\\\\infty ", s)                 # oo, zoo: SymPy's infinity
    s = re.sub(r"(?<=[\d\s*+-])I\b(?!\w)", "i", s) if re.search(r"[\d)]\s*\*\s*I\b|[-+]\s*I\b", s) else s  # 2*I
    s = re.sub(r"(?<![\w\\])sqrt\(([^()]*)\)", r"\\sqrt{\1}", s)  # sqrt(3) -> \\sqrt{3}
    s = re.sub(r"(?<![\w\\])(sqrt|exp|log|sin|cos|tan)\(", lambda m: ("\\sqrt(" if m.group(1) == "sqrt" else
                                                               "\\ln(" if m.group(1) == "log" else f"\\{m.group(1)}("), s)
    s = re.sub(r"(?<![\w\\])E\b(?![\w(])", "e", s) if re.search(r"\bexp\(|\bE\s*\*\*", s) else s
    s = re.sub(r"(?<=[\w)\]])\s*\*\*\s*(?=[\w(.-])", "^", s)  # (a power between operands; `**5**` is bold)
    return re.sub(r"(?<=[\w)])\s*\*\s*(?=[\w(\\])", r" \\cdot ", s)


# ---- separators: semicolon tuples and French (outward bracket) intervals ---------------------------------------------
_END = r"[-+]?\s*(?:\\infty|∞|\d+(?:[.,]\d+)?|\\frac\{[^{}]*\}\{[^{}]*\}|[a-z])"
_FRENCH = re.compile(r"(?:(?<![\w)\]}])|(?<=\\cup)|(?<=\\cap)|(?<=\\in))([\[\]])\s*(" + _END + r")\s*[;,]\s*(" + _END + r")\s*([\[\]])(?![\w(])")


def _french_interval(m):
    if m.group(1) == "[" and m.group(4) == "]":
        return m.group(0).replace(";", ",")
    lo, hi = (re.sub(r"^\+\s*", "", x.replace("∞", "\\infty")) for x in (m.group(2), m.group(3)))
    return ("(" if m.group(1) == "]" else "[") + f"{lo}, {hi}" + (")" if m.group(4) == "[" else "]")


def separators(s):
    s = re.sub(r"(?<!\\)\\(?:[,;:!]|\s(?=[-+\d]))", " ", s)  # (LaTeX spacing: `]2\\,;\\,7]`)
    if ";" in s:
        s = re.sub(r"(?<![\w\\])((?:[A-Z]\s*)?)\(([^();,]+(?:;[^();,]+)+)\)",
                   lambda m: "(" + ", ".join(x.strip() for x in m.group(2).split(";")) + ")", s)  # M(2; 3) -> (2, 3)
    return _FRENCH.sub(_french_interval, s)


# ---- ranges written with an ellipsis ---------------------------------------------------------------------------------
_ELLIPSIS = r"(?:\\[lc]?dots|\.\.\.|…)"
_INT = r"-?\s*\d+"
_RANGE = re.compile(rf"((?:{_INT}\s*,\s*){{2,}}){_ELLIPSIS}\s*,\s*({_INT})(?![\d.])")


def _listed(m):
    firsts = [int(x.replace(" ", "")) for x in re.findall(_INT, m.group(1))]
    last = int(m.group(2).replace(" ", ""))
    step = firsts[1] - firsts[0]
    if step and all(b - a == step for a, b in zip(firsts, firsts[1:])) and (last - firsts[0]) % step == 0 \
            and 0 < (last - firsts[0]) // step < MAX_RANGE:
        return ", ".join(str(x) for x in range(firsts[0], last + (1 if step > 0 else -1), step))
    ratio = Fraction(firsts[1], firsts[0]) if firsts[0] else 0
    if ratio.denominator == 1 and abs(ratio) > 1 and all(b == a * ratio for a, b in zip(firsts, firsts[1:])):
        terms = list(firsts)
        while abs(terms[-1]) < abs(last) and len(terms) < MAX_RANGE:
            terms.append(int(terms[-1] * ratio))
        if terms[-1] == last:
            return ", ".join(str(x) for x in terms)
    return m.group(0)


_ROOT = re.compile(r"(?<![\\A-Za-z])(?:sqrt|√)\s*(?:\(([^()\n]{1,40})\)|(\d+(?:\.\d+)?|[A-Za-z](?![A-Za-z])))")


def roots(s):
    """Roots written in plain text as LaTeX (see the module docstring): `x = 2sqrt3` -> `x = 2\\sqrt{3}`."""
    return _ROOT.sub(lambda m: "\\sqrt{" + (m.group(1) or m.group(2)) + "}", s) if "sqrt" in s or "√" in s else s


def ranges(s):
    return _RANGE.sub(_listed, s.replace("−", "-")) if re.search(_ELLIPSIS, s) else s


# Relation signs by their Unicode variants; `~` set apart by spaces and \\simeq are "approximately"; an examiner's marks
# after a line (`(M1)`, `(A1)(A1)`, `(AG)`, `[2]`) are no part of it
_SIGNS = {"⩾": "\\ge ", "≧": "\\ge ", "⩽": "\\le ", "≦": "\\le ", "≃": "\\approx "}
_SIGN_OR_MARK = re.compile(r"[⩾≧⩽≦≃~]|\\simeq|\((?:[MABR]\d|FT|AG|Dep)\)")
_MARKS = re.compile(r"(?:\s*\((?:[MABR]\d|FT|AG|Dep)\))+(?:\s*\[\d+\])?(?=\s|$)")


def signs(s):
    for old, new in _SIGNS.items():
        s = s.replace(old, new)
    s = re.sub(r"(?<=[\w})])\s+~\s+(?=[-\d.])|\\simeq(?![a-z])", " \\\\approx ", s)
    return _MARKS.sub(" ", s) if "(" in s else s


_ANY_FOREIGN = re.compile(r"\\(?:SI|qty|num|ang|unit|si|SIrange|qtyrange|numrange|simeq|[lc]?dots)(?![a-z])|[A-Z][a-z]+[A-Za-z]*\[|->|"
                          r"\b(?:Pi|Infinity|z?oo|I)\b|\*|\(\s*\d+\s*,|\b(?:np|numpy)\.|\barray\(|[;\]⩾≧⩽≦≃~…]|\.\.\.|\((?:[MABR]\d|FT|AG|Dep)\)")


def as_latex(s):
    """s with every foreign syntax above rewritten as LaTeX (see the module docstring)."""
    if not _ANY_FOREIGN.search(s):
        return s  # (one search decides for most answers)
    s = signs(s) if _SIGN_OR_MARK.search(s) else s
    s = re.sub(r"\\(?:left|right)\s*(?=[\[\]])", "", s) if "]" in s else s  # \\left]-2, 2\\right[
    if "\\" in s and re.search(_MACRO, s):
        s = siunitx(s)
    if _MMA.search(s):
        s = _mathematica(s)
    if _SYMPY.search(s):
        s = _python(s)
    if ";" in s or "]" in s:
        s = separators(s)
    return ranges(s)


# ---- a session transcript: the inputs are no statements, the outputs and the prose are read as LaTeX ------------------
_TRANSCRIPT = re.compile(r"^[ \t]*(?:>>>|In\s*\[\d*\]\s*:=?|Out\s*\[\d*\]\s*[:=]?)|\b[A-Z][a-z]+[A-Za-z]*\[[^\[\]\n]*\]", re.M)


def _command_call(line):
    """The end of a computer-algebra command that opens the line (`Solve[x^2 == 2, x]`, `Simplify[Sqrt[18]] // N`), else 0."""
    m = re.match(r"\s*[A-Z][a-z]+(?:[A-Z][a-z]*)*\[", line)
    if not m or m.group(0).strip()[:-1] in _MMA_FUNCTION:
        return 0
    depth, i = 0, m.end() - 1
    for i in range(m.end() - 1, len(line)):
        depth += {"[": 1, "]": -1}.get(line[i], 0)
        if depth == 0:
            break
    if depth:
        return 0
    tail = re.match(r"(?:\s*//\s*\w+)*", line[i + 1:])
    return i + 1 + tail.end()


# ---- a formal statement: a response that ends on a Lean proof states its answer in the theorem -----------------------
_LEAN_BLOCK = re.compile(r"```\s*lean4?\s*\n(.*?)```\s*$", re.S | re.I)
_LEAN_STATEMENT = re.compile(r"\b(?:theorem|lemma|example)\b[^:]*?:\s*(.+?)\s*:=", re.S)


def lean_answer(text):
    """A response that ends on a Lean block whose theorem states an equation (`(2 : ℕ) ^ 10 = 1024`, `2 ^ 100 % 7 = 2`)
    or an extremum (`IsLeast S 1`, `IsGreatest S 9`), with that value stated after it ("The answer is 1024."); other
    text is returned as it is."""
    block = _LEAN_BLOCK.search(text or "") if "```" in (text or "") else None
    statement = _LEAN_STATEMENT.search(block.group(1)) if block else None
    prose = text[:block.start()] if block else ""
    if statement is None or re.search(r"\b(?:sorry|admit)\b", block.group(1)) \
            or re.search(r"\banswer\b|\\boxed|\bnot\s+sure|\bfail|\berror|\bdoes\s*n[o']t\s+compile", prose, re.I):
        return text  # (an unproved statement, or prose that answers or doubts, is read as written)
    claim = " ".join(statement.group(1).split())
    value = re.fullmatch(r"[^=]*[^=<>:!]=\s*(-?\d+(?:\s*/\s*\d+)?)", claim) or re.fullmatch(r"Is(?:Least|Greatest)\s+.+\s(-?\d+)", claim)
    return f"{text.rstrip()}\n\nThe answer is {value.group(1)}." if value else text


_FINAL_CODE = re.compile(r"```[\w+-]*[ \t]*\n(.*?)```\s*$", re.DOTALL)
_OUTPUT_COMMENT = re.compile(r"^[ \t]*(?:print\(.*\)[ \t]*)?#[ \t]*(?:(?:output|prints?|result|->|=>|→|=)[ \t]*:?[ \t]*)?"
                             r"(-?\d[\d,_]*(?:\.\d+)?)[ \t]*$", re.IGNORECASE | re.MULTILINE)


def code_output(text):
    """A response that ends on a code block whose last `print(...)` states its output in a comment (`print(total)  #
    -> 2318`, `# Output: 25`), with that output stated after it ("The output is 2318."); other text as it is."""
    block = _FINAL_CODE.search(text or "") if "```" in (text or "") else None
    outputs = _OUTPUT_COMMENT.findall(block.group(1)) if block and "print" in block.group(1) else []
    prose = re.sub(r"```.*?```", " ", text[:block.start()], flags=re.DOTALL) if block else ""
    if len(set(outputs)) != 1 or re.search(r"\d", prose):
        return text  # (several outputs, or prose that states its own numbers: the prose is read)
    return f"{text.rstrip()}\n\nThe output is {outputs[-1].replace('_', '')}."


def transcript(text):
    """A response holding an interpreter session (`>>> np.mean(x)` / `np.float64(7.0)`; `In[1]:= D[x Sin[x], x]` /
    `Out[1]= x Cos[x] + Sin[x]`) or computer-algebra commands (`Simplify[Sqrt[18]] gives 3 Sqrt[2]`): input lines,
    commands and code fences dropped, output prompts peeled, each output set in math and every line rewritten by the
    rules above (a rewritten value after a colon, `is` or `=` set in math). Other text is returned as it is."""
    if not text or ("[" not in text and ">>>" not in text) or not _TRANSCRIPT.search(text):
        return text
    lines, block, after_input = [], [], False

    def close_block():
        if block:  # an output that spans lines (a printed matrix) is one value
            joined = " ".join(x.strip() for x in block)
            lines.append(joined if "$" in joined else f"${joined}$")
            block.clear()

    for line in text.split("\n"):
        if re.match(r"\s*(?:>>>|\.\.\.\s|In\s*\[\d*\]\s*:=?)", line):
            close_block()
            after_input = True
            continue
        if re.match(r"\s*```", line) or not line.strip():
            close_block()
            after_input = False
            lines.append("" if line.strip() else line)
            continue
        output = re.match(r"\s*Out\s*\[\d*\]\s*[:=]?\s*", line)
        body = line[output.end():] if output else line
        command = _command_call(body)
        if command:
            body = re.sub(r"^\s*(?:=|→|->|gives|yields|returns|is)?\s*", "", body[command:])
            output = output or re.match(r"", body)
        rewritten = _mathematica(body) if command or _MMA.search(body) else body
        rewritten = _python(rewritten) if _SYMPY.search(rewritten) else rewritten
        if not rewritten.strip():
            continue
        if after_input or output:
            block.append(rewritten)
            if output and not after_input:
                close_block()
            continue
        tail = re.match(r"(.*(?::\s|\bis\s|\bare\s|=\s?))(.+?)(\.?)\s*$", rewritten)
        changed = rewritten != body and tail and "$" not in rewritten
        lines.append(f"{tail.group(1)}${tail.group(2)}${tail.group(3)}" if changed else rewritten)
    close_block()
    return "\n".join(lines)
