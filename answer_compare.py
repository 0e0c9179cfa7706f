"""Stage 3 of the grader: are two answer texts (the extracted prediction, the gold) the same mathematical object?

Entry points: equivalent(pred, gold) (reward.is_equiv bounds it; _equiv on texts cleaned by latex.clean), gold_is_valid;
split_top, canon, rounds_to, significant_digits for answer_question.py. Structure is compared first (cases,
clock times, dates, unit vectors, choices, words, intervals, matrices, lists and tuples, units and percent, relations),
then values (latex.parse_math builds the sympy tree; nothing is evaluated from text).

Exact values compare exactly: integers of any size, fractions, radicals, pi (`2^64-1` is not `2^64`, `1/2^99` not
`1/2^98`); irrationals by a zero test of their difference (30 digits, 1200 bits), never a loose tolerance.
THE DECIMAL POLICY, one rule wherever a decimal meets an exact value:
  - a decimal prediction is the number it writes (`0.5` = `1/2`, `0.625` = `5/8`). It stands for an exact gold with no
    finite decimal (`\\ln 2`, `2/7`) only with a repeat mark (`0.\\overline{285714}`, `0.(285714)`, `0.\\dot{2}8571\\dot{4}`,
    a combining overline, or a first full period and three digits at least before an ellipsis: `0.285714...`), or when
    the question asks for a rounding ("to the nearest hundredth", "to 4 decimal places", "to 3 significant figures":
    answer_question.rounding_asked) and it is the gold correctly rounded with at least that precision (rounded_equal): `0.6931` is
    `\\ln 2` only then, `0.2857` is never `2/7`.
  - a decimal gold is a rounding and its own precision decides: an exact prediction equals it when correctly rounded
    at the gold's last digit and the gold shows ROUNDED_GOLD_DIGITS significant digits (`\\sqrt3` = `1.732` = `1.73`;
    `1/3` is not `0.3`; an exact value whose expansion ends is compared exactly: `1/8` is not `0.13`); a decimal
    prediction must equal it as written (`0.533` is not `0.53`).
  - "approximately X" and `\\approx X` equal only a rounded (decimal) gold; an exact value stated before its rounding
    (`x = \\frac13 \\approx 0.33`) is the answer, a computation before it (`3 \\times 4.99 \\approx 15`) is working.
Percent: X% is X/100, and also the bare X when X >= 1. Units: dropped when one side has none; two known units must
agree (as powers of SI dimensions: `kg m s^-2` is `N`; one kind in two units is converted: 250 cm = 2.5 m); a compound quantity equals the gold in either unit (`1 h 30 min` = 90 = 1.5). Several answers: lists and sets
are unordered multisets, tuples ordered (brackets kept: `(0, 9)` is not `[0, 9)`), named parts (`a = 5, b = 11`, "(a) 5
(b) 11", "mean = 4, median = 3") in the order the gold lists them; a hedge (`3 \\text{ or } 5`) is never one of them.
Relations: a label is stripped and a chain's value is its last side; a side before it is a label, working (a
computation on numbers, a quantity in a unit, a derivation, clock arithmetic) or a formula evaluated at given values
(a later computation on numbers: `2\\pi r = 2 \\cdot \\pi \\cdot 3 = 6\\pi`); else an unknown makes it an equation (`y = 2x + 1 = 7`
is not 7). Equations compare as equations (proportional, or solved for one symbol); inequalities as sets.
Forms (details in each function): the empty set, `\\pm`, answers by cases against formulas (a grid of points beside
each bound: `|x+3|`, `x^2 \\operatorname{sgn} x`), matrices and vectors (a column, a transposed row, a tuple, unit vectors
`2\\mathbf{j} + \\mathbf{k}`), clock times on either clock (midnight, noon), dates (`March 14` = `3/14`), weekdays
(`Thu.`), ratios (`3:1` = `6:2` = `3`, "5 to 8"), numerals in a base, words, option letters, an engineer's `j`.
A gold that cannot be parsed never yields reward 1 (score_batch warns and counts it).
"""
import itertools
import math
import operator
import random
import re
from fractions import Fraction
from functools import lru_cache

import sympy

from answer_forms import bearings_equal, congruence, constant_families_equal, dimensions, factorization, families_equal, set_intervals, up_to_constant, without_remainder
from numerals import roman_value
from latex import NOT_UNITS, clean, compound_units, is_english, is_infinite, parse_math, split_unit, unit_dimensions, unit_key

EXACT_DIGITS = 30            # significant digits asked of the difference of two irrational values...
ZERO_TEST_BITS = 1200        # ...and the working precision (bits) beyond which a difference with none is zero
ROUNDED_GOLD_DIGITS = 3      # a decimal gold with this many significant digits is a rounding (see the decimal policy)


def _mixed_number(s):
    """A mixed number alone is its value: 2\frac{1}{2} is 5/2, not 2 * 1/2."""
    mixed = re.fullmatch(r"([-+]?)(\d+)\s*\\frac\s*(?:\{(\d+)\}|(\d))\s*(?:\{(\d+)\}|(\d))", s) \
        or re.fullmatch(r"([-+]?)(\d+)\s+(?:(\d+)|(\d))/(?:(\d+)|(\d))", s)                   # 2 1/2
    if not mixed:
        return s
    sign, whole = mixed.group(1), mixed.group(2)
    num, den = mixed.group(3) or mixed.group(4), mixed.group(5) or mixed.group(6)
    return f"{sign}({whole}+\\frac{{{num}}}{{{den}}})"


# ------------------------------------------------------------------------------------------------------------
# Comparing values
# ------------------------------------------------------------------------------------------------------------
_SIMPLE_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)")
_CONSTANT_NAME = re.compile(r"[CcKk](?:_\{?\w+\}?)?")   # the gold's arbitrary constants: C, c, C_1, c_2, K
_RENAMABLE_NAME = re.compile(r"(?:[A-Z]|[ckmn])(?:_\{?\w+\}?)?")  # the prediction's own names for them: A, B, c_1, n


def _numbers_equal(p, g):
    """Two constants: exactly equal (rationals); for irrationals, their difference evaluates to zero: sympy's
    adaptive evalf either finds a nonzero digit of p - g (then they differ, however tiny: pi + 10^{-60} is not pi)
    or exhausts ZERO_TEST_BITS of precision without one (then they are equal: sqrt2 + sqrt3 = sqrt(5 + 2 sqrt6))."""
    if p == g:
        return True
    if is_infinite(p) or is_infinite(g):
        return False
    if p.is_Rational and g.is_Rational:
        return False
    diff = sympy.N(p - g, EXACT_DIGITS, maxn=ZERO_TEST_BITS)
    if diff == 0:
        return True
    if diff.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo) or not diff.is_number:
        return False
    # a Float with (almost) no significant bits is evalf's "zero to the precision I could reach"
    return all(part == 0 or (isinstance(part, sympy.Float) and part._prec <= 10) for part in diff.as_real_imag())


def _renamed_constants(p, g):
    """The prediction with its arbitrary constants renamed to the gold's, every way that fits: a general solution
    may name them as it likes (`c_1 e^t + c_2 e^{-t}`, `A e^t + B e^{-t}` for `C_1 e^t + C_2 e^{-t}`). Only when
    every symbol the gold alone has is named like a constant (C, c, K, C_1, ...), as many as the prediction's own."""
    extra_p = sorted(p.free_symbols - g.free_symbols, key=str)
    extra_g = sorted(g.free_symbols - p.free_symbols, key=str)
    if not extra_g or len(extra_p) != len(extra_g) or len(extra_g) > 4 \
            or not all(_CONSTANT_NAME.fullmatch(s.name) for s in extra_g) \
            or not all(_RENAMABLE_NAME.fullmatch(s.name) for s in extra_p):
        return [p]
    return [p.subs(dict(zip(extra_p, names)), simultaneous=True) for names in itertools.permutations(extra_g)]


def _exprs_equal(p, g):
    """Parsed answers: constants by _numbers_equal, formulas by agreement at random rational points (exact
    arithmetic), which decides polynomial and rational identities with negligible error."""
    if p == g:
        return True  # the same tree (sympy orders the factors of a product: `F_{n-k-1} F_k` is `F_k F_{n-k-1}`)
    if p.has(sympy.Sum, sympy.Product) or g.has(sympy.Sum, sympy.Product):
        return False  # an unevaluated sum (`\\sum_{k=0}^{n-1} F_k F_{n-k-1}`) compares only by its structure
    if not p.free_symbols and not g.free_symbols:
        return _numbers_equal(p, g)
    if any(_same_function(q, g) for q in _renamed_constants(p, g)):
        return True
    return bool(up_to_constant(p, g))  # antiderivatives: `-\frac14 \cos 2x + C` and `\frac12 \sin^2 x + C` differ by a constant


def _same_function(p, g):
    """Agreement at random rational points (see _exprs_equal)."""
    if p.free_symbols != g.free_symbols:
        return False
    rng = random.Random(0)
    symbols = sorted(g.free_symbols, key=str)
    checked = 0
    integers = p.has(sympy.factorial, sympy.binomial) or g.has(sympy.factorial, sympy.binomial)  # n! at whole n
    for _ in range(10):
        point = {s: sympy.Integer(rng.randint(1, 12)) if integers else
                 sympy.Rational(rng.randint(-40, 40), rng.randint(1, 9)) + sympy.Rational(1, 7) for s in symbols}
        pv, gv = p.subs(point), g.subs(point)
        if pv.has(sympy.nan, sympy.zoo) or gv.has(sympy.nan, sympy.zoo):
            continue
        if not _numbers_equal(pv, gv):
            return False
        checked += 1
        if checked == 4:
            return True
    return False


def rounds_to(decimal_text, exact, places=None, asked=False):
    """Is the decimal `decimal_text` the exact number `exact` correctly rounded: at `places` decimals (negative: tens,
    hundreds), or by default at its own last digit (an integer's own precision is its last nonzero digit: 1200 is
    rounded to hundreds)? Unless a rounding was asked for, never for an exact value whose decimal expansion ends (its
    rounding is another number: 0.13 is not 1/8)."""
    decimal = re.fullmatch(r"([-+]?)(\d*)(?:\.(\d+))?", decimal_text.strip())
    if decimal is None or exact.free_symbols or not exact.is_number or is_infinite(exact) or (_terminates(exact)
                                                                                             and not asked):
        return False
    if places is None:
        places = len(decimal.group(3) or "") or -(len(decimal.group(2)) - len(decimal.group(2).rstrip("0")))
    half_unit = sympy.Rational(10) ** -places / 2
    value = sympy.Rational(decimal_text.strip())
    return bool(abs(sympy.N(exact - value, 30)) <= half_unit)


def _terminates(exact):
    """A rational whose decimal expansion ends (its denominator divides a power of ten: 1/8, 3/20)."""
    if not exact.is_Rational:
        return False
    q = int(exact.q)
    for prime in (2, 5):
        while q % prime == 0:
            q //= prime
    return q == 1


def significant_digits(decimal_text):
    digits = re.sub(r"[^\d]", "", decimal_text).lstrip("0")
    return len(digits) if "." in decimal_text else len(digits.rstrip("0"))


def _expansion_shown(decimal_text, exact):
    """`0.285714...` for 2/7: the written decimals begin the exact rational's non-terminating expansion and show all of
    it up to the end of a first full period, and three digits of it at least (the ellipsis is the repeat mark)."""
    if not exact.is_Rational or _terminates(exact) or exact.q > 10**6:
        return False
    q, pre = int(exact.q), 0
    for prime in (2, 5):
        while q % prime == 0:
            q, pre = q // prime, pre + 1
    period, power = 1, 10 % q
    while power != 1 and period <= 60:
        power, period = power * 10 % q, period + 1
    sign, digits = ("-", decimal_text[1:]) if decimal_text.startswith("-") else ("", decimal_text.lstrip("+"))
    places = len(digits.split(".")[1])
    if sign != ("-" if exact < 0 else "") or period > 60 or places < pre + max(period, 3):  # (`0.5...` is no 5/9)
        return False
    truncated = abs(exact.p) * 10 ** places // exact.q
    return digits.replace(".", "").lstrip("0") == str(truncated).lstrip("0")


def _values_equal(p, g):
    """Single values (cleaned text, no units, lists or relations)."""
    p, g = _mixed_number(p), _mixed_number(g)
    truncated = re.fullmatch(r"([-+]?\d*\.\d+)\s*\\[lc]?dots", p)
    if truncated:  # `0.285714\ldots`: a truncated expansion (latex.repeating_decimals)
        gp = parse_math(g)
        if gp is not None and gp.is_Rational and not _terminates(gp):
            return _expansion_shown(truncated.group(1), gp)
        p = truncated.group(1)  # else as written: `1.5...` is 1.5
    if _SIMPLE_NUMBER.fullmatch(p) and _SIMPLE_NUMBER.fullmatch(g):
        return Fraction(p) == Fraction(g)  # the common case, without sympy
    if re.fullmatch(r"[A-Za-z]{2,}", p) and re.fullmatch(r"[A-Za-z]{2,}", g):
        return p.lower() == g.lower()  # a word's letters are not commuting variables: NO is not ON
    pp, gp = parse_math(p), parse_math(g)
    if pp is None or gp is None:
        return False
    try:
        if re.fullmatch(r"[-+]?\d*\.\d+", g) and "." not in p and significant_digits(g) >= ROUNDED_GOLD_DIGITS \
                and rounds_to(g, pp):
            return True  # \sqrt{17} for a gold 4.123, \frac{8}{3} for 2.6667: the gold's own precision decides
        return _exprs_equal(pp, gp)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError, AttributeError):
        return False


# ------------------------------------------------------------------------------------------------------------
# Units and percent (the units themselves: latex.split_unit)
# ------------------------------------------------------------------------------------------------------------
def _clock_minutes(value, unit):
    """Minutes after midnight of a time that is on one clock only: `H:MM` with am/pm, `HH:MM` past 12:59 or with a
    leading zero (the 24-hour clock: `17:30`, `07:15`, `00:00`), "noon", "midnight"; None otherwise (`10:15` alone is
    either)."""
    named = re.fullmatch(r"(?:12(?::00)?\s*)?(noon|midday|midnight)", value.strip(), re.I)
    if named and unit is None:
        return 0 if named.group(1).lower() == "midnight" else 720
    time = re.fullmatch(r"(\d{1,2})(?::(\d{2}))?", value.strip())
    if time is None or (unit not in ("am", "pm") and (unit is not None or not time.group(2) or int(time.group(1)) < 13
                                                      and not time.group(1).startswith("0"))):
        return None
    hours, minutes = int(time.group(1)), int(time.group(2) or 0)
    if hours > 23 or minutes > 59 or (unit and not 1 <= hours <= 12):
        return None
    return (hours % 12 + (12 if unit == "pm" else 0) if unit else hours) * 60 + minutes


def _units_conflict(pu, gu):
    """Both answers carry known units, and they differ (5 m vs 5 cm, 9 p.m. vs 9 a.m.)."""
    known = [u for u in (pu, gu) if u and "word:" not in u]
    if len(known) < 2 or pu == gu:
        return False
    dimensions = [unit_dimensions(u) for u in known]  # `kg m s^-2` is `N`, `m s^-2` is `m/s^2`, `J/s` is `W`
    return None in dimensions or dimensions[0] != dimensions[1]


def _percent_equal(p, pu, g, gu):
    """X% is X/100; X% is also the bare X when X >= 1 (see the module docstring)."""
    if pu == gu:
        return _equiv(p, g)
    pct, other = (p, g) if pu == "%" else (g, p)
    if (pu if pu != "%" else gu) not in (None,):
        return False  # a percent against another unit
    value = parse_math(pct)
    if value is None or value.free_symbols:
        return False
    fraction = _as_text(value / 100)  # (the prediction stays first: `3/12 = 0.25` is working and its value, for 25%)
    if _equiv(fraction, other) if pu == "%" else _equiv(other, fraction):
        return True
    return bool(abs(value) >= 1) and (_equiv(pct, other) if pu == "%" else _equiv(other, pct))


def _as_text(expr):
    """A rational back to text our parser reads (used for X/100)."""
    if expr.is_Rational:
        return f"\\frac{{{expr.p}}}{{{expr.q}}}" if expr.q != 1 else str(expr.p)
    raise ValueError("not rational")


# ------------------------------------------------------------------------------------------------------------
# Structure: lists, tuples, sets, intervals, relations, matrices
# ------------------------------------------------------------------------------------------------------------
def split_top(s, separators):
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
                if s.startswith(sep, i) and (not sep[0].isalpha() or (_word_boundary(s, i, len(sep)))):
                    parts.append(s[start:i].strip())
                    start = i + len(sep)
                    i = start - 1
                    break
        i += 1
    parts.append(s[start:].strip())
    return parts


def _word_boundary(s, i, n):
    return (i == 0 or not s[i - 1].isalpha() and s[i - 1] != "\\") and (i + n == len(s) or not s[i + n].isalpha())


def _enclosed(s, open_, close):
    """The inside of s when one bracket pair encloses all of it ((1)+(2) is not enclosed), else None."""
    if not (s.startswith(open_) and s.endswith(close)) or len(s) < len(open_) + len(close):
        return None
    inner = s[len(open_):len(s) - len(close)]
    return inner if balanced(inner) else None


def balanced(s):
    """Every closing bracket of s has an earlier opening one, and none is left open (kinds are not matched)."""
    depth = 0
    for ch in s:
        depth += ch in "([{"
        depth -= ch in ")]}"
        if depth < 0:
            return False
    return depth == 0


_NAME = r"(?:\\(?:angle|measuredangle|triangle|overline|widehat|overarc|arc)\s*\{?\s*[A-Za-z]+\s*\}?|(?:\\[a-zA-Z]+|[A-Za-z]+)" \
        r"(?:_(?:\{\s*[\w,]+(?:\s+\w+)*\s*\}|\w+))?(?:\^\s*\{?\s*(?:-1|[A-Za-z*])\s*\}?)?'*(?:\([^()=]*\))?)"  # f^{-1}(x), y^s, x^*
_NAMES = rf"(?:m\s*)?{_NAME}(?:\s*{_NAME}){{0,3}}"
_LABEL = re.compile(rf"\s*(?:{_NAMES}|\|\s*{_NAMES}\s*\||{_NAMES}\s*:\s*{_NAMES}|\\frac\s*\{{\s*{_NAMES}\s*\}}\s*\{{\s*{_NAMES}\s*\}}"
                    rf"|\(\s*{_NAME}(?:\s*,\s*{_NAME})+\s*\)|\\int\s*[^=<>]{{1,80}}?\s*d[a-z])\s*")  # \int x^2 dx


def _is_label(side):
    """A name for the answer rather than a value: x, x_1, f(x), AB, P(A), \\angle ABC, (x, y), a name in words (`mean`,
    `the total cost`; not `or`, `not`, `about`: see latex.NOT_UNITS)."""
    if re.fullmatch(r"\s*[A-Z]\s*\(\s*[A-Za-z][A-Za-z\s,'-]*\)\s*", side):
        return True  # P(heart), P(at least one six): a probability named in words
    words = re.fullmatch(r"\s*(?:(?:the|an?)\s+)?([A-Za-z]{2,}(?:\s+[A-Za-z]{2,}){0,2})\s*", side, re.I)
    if words and not any(w.lower() in NOT_UNITS for w in words.group(1).split()):
        return True
    if any(w.islower() and (w in NOT_UNITS or is_english(w)) for w in re.findall(r"(?<![\\A-Za-z])[A-Za-z]{2,}", side)):
        return False
    return _LABEL.fullmatch(side) is not None and not re.fullmatch(r"\s*\\(?:pi|infty|e)\s*", side) \
        and not re.search(r"\\(?:sqrt|sin|cos|tan|log|ln)\b|\\frac\s*\{\s*\d", side)


# A scalar factored out of a vector or matrix (`\\frac15(3, 4)`, `-\\frac12 \\begin{pmatrix}4 & -2 \\\\ -3 & 1\\end{pmatrix}`,
# `(1, 2, 2)/3`): the object with the scalar multiplied into each entry
_TUPLE_OBJECT = r"\([^()]*,[^()]*\)"
_MATRIX_OBJECT = r"\\begin\{[pbvB]?matrix\}.*?\\end\{[pbvB]?matrix\}"
_SCALAR = r"-?\s*(?:\\frac\s*(?:\{[^{}]*(?:\{[^{}]*\}[^{}]*)?\}|\d)\s*(?:\{[^{}]*(?:\{[^{}]*\}[^{}]*)?\}|\d)|\d+(?:\.\d+)?|\\sqrt\s*\{?\d+\}?)"


def _scalar_distributed(s):
    """The vector or matrix of `c (entries)` or `(entries)/c` with c multiplied into each entry (parsed trees; the
    products written back as LaTeX), else None."""
    m = re.fullmatch(rf"\s*({_SCALAR})\s*(?:\\cdot|\\times)?\s*({_TUPLE_OBJECT}|{_MATRIX_OBJECT})\s*", s, re.S)
    divided = None if m else re.fullmatch(rf"\s*({_TUPLE_OBJECT})\s*/\s*({_SCALAR})\s*", s)
    if not m and not divided:
        return None
    scalar, obj = (m.group(1), m.group(2)) if m else (f"\\frac{{1}}{{{divided.group(2)}}}", divided.group(1))
    value = parse_math(scalar)
    if value is None or value.free_symbols or value == 0:
        return None

    def times(entry):
        parsed = parse_math(entry.strip())
        return None if parsed is None else sympy.latex(sympy.simplify(value * parsed))

    if obj.startswith("("):
        entries = [times(e) for e in split_top(obj[1:-1], [","])]
        return None if None in entries else "(" + ", ".join(entries) + ")"
    kind, body = re.fullmatch(r"\\begin\{([pbvB]?matrix)\}(.*?)\\end\{\1\}", obj, re.S).groups()
    rows = [[times(e) for e in row.split("&")] for row in re.split(r"\\\\", body) if row.strip()]
    if any(None in row for row in rows):
        return None
    return f"\\begin{{{kind}}}" + " \\\\ ".join(" & ".join(row) for row in rows) + f"\\end{{{kind}}}"


# A point, vector or set written with its name (`M(5, -2)`, `P'(1, 2)`, `\\vec{AB} = (3, -4)`, `S = ]3; 5[`) or a solution
# set of one tuple (`\\{(7, 3)\\}`): the object itself
_OBJECT = r"[(\[]\s*[^()\[\]=]*,[^()\[\]=]*[)\]]"
_OBJECT_NAME = re.compile(rf"\s*(?:[A-Z](?:_\{{?\w+\}}?)?'*\s*(?={_OBJECT}\s*$)|(?:\\(?:overrightarrow|vec|mathbf|overline)\s*\{{\s*\w+\s*\}}"
                          rf"|\\(?:vec|mathbf)\s+\w|[A-Za-z](?:_\{{?\w+\}}?)?)\s*=\s*(?={_OBJECT}\s*$))")


def _named_object(s):
    """The object of `M(5, -2)`, `\\vec{AB} = (3, -4)`, `S = (3, \\infty)`, `\\{(7, 3)\\}`; None for anything else."""
    single = re.fullmatch(rf"\s*\\\{{\s*(\([^()]*,[^()]*\))\s*\\\}}\s*", s)
    if single:
        return single.group(1)
    name = _OBJECT_NAME.match(s)
    return s[name.end():] if name else None


def _is_quantity_name(side):
    """m+n, a+2z, xy: a polynomial in letters with no constant term and no powers -- the quantity a problem asks
    for, restated before its value (`m+n = 29`); `x^2-4` or `2x+3` are not."""
    parsed = parse_math(side)
    if parsed is None or not parsed.free_symbols:
        return False
    try:
        poly = sympy.Poly(parsed, *sorted(parsed.free_symbols, key=str))
    except (sympy.PolynomialError, sympy.GeneratorsNeeded, ValueError, TypeError):
        return False
    coeffs = poly.coeffs()
    return all(sum(m) >= 1 and max(m) <= 1 for m in poly.monoms()) and all(c.is_Integer and c > 0 for c in coeffs) \
        and (len(coeffs) > 1 or coeffs[0] == 1)


class _Shape:
    """An answer's outer structure. kind: single | tuple (ordered; `brackets` kept) | set | list (unordered; 'or'
    alternatives too) | assign (ordered values of `a = 1, b = 2`)."""

    def __init__(self, kind, items, brackets=None, labels=None):
        self.kind, self.items, self.brackets, self.labels = kind, items, brackets, labels


def _shape(s):
    s = re.sub(r"^[A-Za-z](?:_\{?\w+\}?)?\s*\\in\s*", "", s)           # x \in {1, 2} -> {1, 2}
    inner = _enclosed(s, "\\{", "\\}")
    if inner is None and re.fullmatch(r"\{[^{}]*[,;][^{}]*\}", s):
        inner = s[1:-1]                                               # {1, 2, 3} written without backslashes, {-4 ; 4}
    if inner is not None and "|" not in inner and ":" not in inner:
        return _Shape("set", [x for item in split_top(inner, [",", ";"]) for x in _expand_pm(item)] if inner.strip() else [])
    if re.fullmatch(r"[-+]?\d+(?:\.\d+)?(?:\s+[-+]?\d+(?:\.\d+)?)+", s):
        return _Shape("list", s.split())  # `1 \quad 2` (cleaned to `1 2`): two values side by side, a list
    groups = split_top(s, [";"])
    if len(groups) > 1 and all(len(split_top(x, [","])) > 1 for x in groups):
        return _Shape("list", groups)  # `p=5,q=2; p=7,q=2`: semicolons separate solutions, commas their parts
    parts = [p for p in split_top(s, [",", ";", "and", "or", "\\quad"]) if p]
    parts = [x for p in parts for x in _expand_pm(p)]           # 1 \pm \sqrt 2 -> two answers
    if len(parts) > 1:
        sides = [split_top(p, ["="]) for p in parts]
        if all(len(x) >= 2 and _is_label(x[0]) for x in sides):   # (x = 2\cos(\pi/3) = 1: a labelled chain, its last side)
            labels = [_canon_label(x[0]) for x in sides]
            if len(set(labels)) == 1:
                return _Shape("list", [x[-1] for x in sides])        # x = 1 or x = 2: the solutions
            return _Shape("assign", [x[-1] for x in sides], labels=labels)
        return _Shape("list", parts)
    sides = split_top(s, ["="])
    if len(sides) == 2 and _is_label(sides[0]) and _shape(sides[1]).kind != "single":
        return _shape(sides[1])                                          # (x, y) = (2, 3) -> (2, 3)
    for open_, close in (("(", ")"), ("[", "]"), ("(", "]"), ("[", ")")):
        inner = _enclosed(s, open_, close)
        if inner is not None:
            items = split_top(inner, [","]) if "," in inner else split_top(inner, [";"])
            if len(items) > 1:
                return _Shape("tuple", items, open_ + close)
    return _Shape("single", [s])


def _expand_pm(s):
    pm = re.search(r"\\(?:pm|mp)", s)
    if pm is None or len(re.findall(r"\\(?:pm|mp)", s)) > 3 or "=" in s[:pm.start()] and not _is_label(s[:pm.start()].split("=")[0]):
        return [s]
    head, tail = s[:pm.start()], s[pm.end():]
    return _expand_pm(head + "+" + tail) + _expand_pm(head + "-" + tail)


def _distinct(items):
    """The items with repeats dropped (`(3,17,3,7)` listed twice is one solution)."""
    kept = []
    for item in items:
        if not any(canon(item) == canon(k) or _equiv(item, k) for k in kept):
            kept.append(item)
    return kept


def _match_unordered(preds, golds):
    if len(preds) > len(golds) and len(preds) <= 20 and len(_distinct(golds)) == len(golds):
        preds = _distinct(preds)  # a solution named twice is still one solution (unless the gold repeats one too)
    if len(preds) != len(golds) or len(golds) > 50:
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


def _match_ordered(preds, golds):
    return len(preds) == len(golds) and all(_equiv(p, g) for p, g in zip(preds, golds))


def _shapes_equal(p, g):
    if g.kind == "tuple":
        if p.kind == "tuple":
            return p.brackets == g.brackets and _match_ordered(p.items, g.items)
        return p.kind == "assign" and _match_ordered(p.items, g.items)
    if g.kind == "assign":
        if p.kind == "assign" and sorted(p.labels) == sorted(g.labels) and len(set(g.labels)) == len(g.labels):
            by_label = dict(zip(p.labels, p.items))                  # a_3 = 2, a_37 = 19 in any order
            return all(_equiv(by_label[label], item) for label, item in zip(g.labels, g.items))
        return p.kind in ("assign", "tuple", "list") and _match_ordered(p.items, g.items)
    if g.kind in ("list", "set"):
        if p.kind == "assign" and g.kind == "list" and len(set(p.labels)) == len(p.labels):
            if len({re.sub(r"_\{?\d+\}?$", "", x) for x in p.labels}) == 1 and all(re.search(r"_\{?\d+\}?$", x) for x in p.labels):
                return _match_unordered(p.items, g.items)  # \lambda_1 = 3, \lambda_2 = 1: one quantity's values, numbered
            return _match_ordered(p.items, g.items)  # named parts in the order the gold lists them: (a) 32, (b) 25 = 32, 25
        if p.kind == "single":
            return len(g.items) == 1 and _equiv(p.items[0], g.items[0])
        if p.kind == "tuple" and p.brackets != "()":
            return False  # (1, 2] and [1, 2] are intervals, not the solutions 1 and 2
        return _match_unordered(p.items, g.items)
    # a single gold: a one-element set, or one answer written several ways ("15\frac{39}{40}, or \frac{639}{40}");
    # never a list of different answers: that is a hedge
    if p.kind in ("set", "list") and p.items and all(_equiv(x, p.items[0]) for x in p.items[1:]):
        return _equiv(p.items[0], g.items[0])
    return False


# ---- intervals and inequalities ------------------------------------------------------------------------------
_INEQ = re.compile(r"\\le|\\ge|<|>")


def _interval_like(s):
    return "\\cup" in s or _INEQ.search(s) is not None or (
        any(_enclosed(s, o, c) is not None for o, c in (("(", "]"), ("[", ")"))) or
        ("\\infty" in s and any(_enclosed(s, o, c) is not None for o, c in (("(", ")"), ("[", "]")))))


def _as_interval(s):
    """'x > 5', '-2 \\le x < 1', '(a, b]' -> (lo, hi, lo_closed, hi_closed) strings, else None."""
    s = re.sub(r"^[A-Za-z]\s*\\in\s*", "", s.strip())
    if s in ("R", "\\mathbb{R}", "\\mathbb R", "\\R"):
        return "-\\infty", "\\infty", False, False
    for open_, close in (("(", ")"), ("[", "]"), ("(", "]"), ("[", ")")):
        inner = _enclosed(s, open_, close)
        if inner is not None and len(split_top(inner, [","])) == 2:
            lo, hi = split_top(inner, [","])
            return lo, hi, open_ == "[", close == "]"
    single = _enclosed(s, "\\{", "\\}")
    if single is not None and "," not in single:                  # {-1} in {-1} \cup [0, 7)
        return single, single, True, True
    parts = [p.strip() for p in _INEQ.split(s)]
    ops = _INEQ.findall(s)
    is_var = [_is_label(p) and re.search(r"[A-Za-z]", p) is not None and not re.fullmatch(r"-?\\infty", p)
              for p in parts]
    if len(parts) == 2 and is_var[0] != is_var[1]:
        op, bound = ops[0], parts[1] if is_var[0] else parts[0]
        upper = (op in ("<", "\\le")) == is_var[0]                 # x < b  or  b > x: an upper bound
        closed = op in ("\\le", "\\ge")
        return ("-\\infty", bound, False, closed) if upper else (bound, "\\infty", closed, False)
    if len(parts) == 2 and not any(is_var):
        return _solved_inequality(parts, ops[0])
    if len(parts) == 3 and is_var[1] and not is_var[0] and not is_var[2] and len(set(ops)) <= 2:
        if all(op in ("<", "\\le") for op in ops):
            return parts[0], parts[2], ops[0] == "\\le", ops[1] == "\\le"
        if all(op in (">", "\\ge") for op in ops):
            return parts[2], parts[0], ops[1] == "\\ge", ops[0] == "\\ge"
    return None


def _linear_root(lhs, rhs):
    """(a, root) when lhs - rhs = a*(x - root) for a single symbol x and numbers a != 0, root; else None."""
    sides = [parse_math(x) for x in (lhs, rhs)]
    if any(x is None for x in sides):
        return None
    diff = sympy.expand(sides[0] - sides[1])
    if len(diff.free_symbols) != 1:
        return None
    (x,) = diff.free_symbols
    slope = diff.diff(x)
    if slope.free_symbols or slope == 0 or not slope.is_real:
        return None
    root = -diff.subs(x, 0) / slope
    return (slope, root) if root.is_Rational else None


def _solved_inequality(parts, op):
    """`-x > -1` is `x < 1`: a linear inequality in one variable, solved (dividing by a negative flips it)."""
    solved = _linear_root(*parts)
    if solved is None:
        return None
    slope, root = solved
    upper = (op in ("<", "\\le")) == bool(slope > 0)
    closed = op in ("\\le", "\\ge")
    bound = _as_text(root)
    return ("-\\infty", bound, False, closed) if upper else (bound, "\\infty", closed, False)


def _abs_intervals(s):
    """`|x - 1| < 2`, `1 \\le |z| \\le \\frac{3}{2}`, `|x| > 3`: an absolute value of a linear expression in one
    variable bounded by numbers, solved into its intervals [(lo, hi, lo_closed, hi_closed)]; None otherwise."""
    parts, ops = [p.strip() for p in _INEQ.split(s)], _INEQ.findall(s)
    bars = [k for k, part in enumerate(parts) if re.fullmatch(r"\|[^|]+\|", part)]
    if len(bars) != 1 or len(parts) not in (2, 3):
        return None
    k = bars[0]
    if len(parts) == 3 and (k != 1 or not (set(ops) <= {"<", "\\le"} or set(ops) <= {">", "\\ge"})):
        return None
    solved = _linear_root(parts[k][1:-1], "0")
    bounds = [parse_math(part) for j, part in enumerate(parts) if j != k]
    if solved is None or any(b is None or not b.is_Rational for b in bounds):
        return None
    slope, root = solved
    lower, upper, lower_closed, upper_closed = None, None, False, False   # bounds on |x - root| * |slope|
    for j, op in enumerate(ops):                                          # op between parts[j] and parts[j + 1]
        bound, bound_is_left = (parts[j], True) if j + 1 == k else (parts[j + 1], False) if j == k else (None, None)
        if bound is None:
            continue
        value = parse_math(bound) / abs(slope)
        is_upper = (op in ("<", "\\le")) != bound_is_left               # |e| < b, or b > |e|
        if is_upper:
            upper, upper_closed = value, op in ("\\le", "\\ge")
        else:
            lower, lower_closed = value, op in ("\\le", "\\ge")
    if (upper is not None and upper <= 0) or (lower is not None and lower < 0) or \
            (lower is not None and upper is not None and lower >= upper):
        return None  # empty or every real: not written this way on purpose
    t = _as_text
    if lower is None or (lower == 0 and lower_closed):
        return [(t(root - upper), t(root + upper), upper_closed, upper_closed)]
    if upper is None:
        return [("-\\infty", t(root - lower), False, lower_closed),
                (t(root + lower), "\\infty", lower_closed, False)]
    return [(t(root - upper), t(root - lower), upper_closed, lower_closed),
            (t(root + lower), t(root + upper), lower_closed, upper_closed)]


def _intervals_equal(p, g):
    """Unions of intervals (order-free) with matching brackets; None when either side is not one."""
    ps, gs = split_top(p, ["\\cup", "or"]), split_top(g, ["\\cup", "or"])
    pi, gi = ([i for x in xs for i in (_abs_intervals(x) or [_as_interval(x)])] for xs in (ps, gs))
    if None in pi or None in gi:
        return None
    if len(pi) != len(gi):
        return False
    remaining = list(pi)
    for a in gi:
        for k, b in enumerate(remaining):
            if a[2:] == b[2:] and _equiv(b[0], a[0]) and _equiv(b[1], a[1]):
                del remaining[k]
                break
        else:
            return False
    return True


# ---- relations -----------------------------------------------------------------------------------------------
def _equations_equal(p_sides, g_sides):
    """lhs1 - rhs1 and lhs2 - rhs2 are proportional by a nonzero constant (y = 2x+1 vs 2y - 4x = 2)."""
    p = [parse_math(x) for x in p_sides]
    g = [parse_math(x) for x in g_sides]
    if None in p or None in g:
        return False
    if _exprs_equal(p[0], g[0]) and _exprs_equal(p[1], g[1]):
        return True
    dp, dg = p[0] - p[1], g[0] - g[1]
    if dp.free_symbols != dg.free_symbols or not dg.free_symbols:
        return False
    if _same_solution(dp, dg):
        return True
    rng = random.Random(1)
    ratios = []
    for _ in range(8):
        point = {s: sympy.Rational(rng.randint(-30, 30), rng.randint(1, 7)) + sympy.Rational(1, 11) for s in dg.free_symbols}
        a, b = dp.subs(point), dg.subs(point)
        if b == 0 or a.has(sympy.nan, sympy.zoo) or b.has(sympy.nan, sympy.zoo):
            continue
        ratios.append(a / b)
    return len(ratios) >= 3 and ratios[0] != 0 and all(_numbers_equal(r, ratios[0]) for r in ratios)


def _same_solution(dp, dg):
    """The equations dp = 0 and dg = 0 both state one symbol linearly, and solved for it they are the same formula
    (`I \\frac{d\\omega}{dt} + 2B\\omega = T` and `\\frac{d\\omega}{dt} = \\frac{T}{I} - \\frac{2B}{I}\\omega`, both
    T = ...). An equation multiplied by a factor that can vanish (`x(x-1) = 0` vs `x - 1 = 0`) is not linear in it."""
    for x in sorted(dg.free_symbols, key=str)[:6]:
        try:
            slopes = [d.diff(x) for d in (dp, dg)]
            if any(s == 0 or x in s.free_symbols for s in slopes):
                continue
            solutions = [sympy.cancel(-d.subs(x, 0) / s) for d, s in zip((dp, dg), slopes)]
        except (TypeError, ValueError, ZeroDivisionError, sympy.PolynomialError):
            continue
        if solutions[0].free_symbols == solutions[1].free_symbols and _same_function(*solutions):
            return True
    return False


def _canon_label(side):
    """One name, however decorated: `y^s(p)` and `y` (a letter superscript and the arguments), `v(0)` and `v_0`."""
    side = re.sub(r"[\s{}]", "", side)
    side = re.sub(r"^([A-Za-z])\((\d+)\)$", r"\1_\2", side)
    return re.sub(r"^([A-Za-z])(?:\^[A-Za-z*])?(?:\([A-Za-z](?:,[A-Za-z])*\))?$", r"\1", side)


_DERIVATION = re.compile(r"\\int|\\frac\s*\{\s*d\s*\}\s*\{\s*d\s*[a-z]\s*\}|\\frac\s*\{\s*d\s*[a-z]*\s*\}|\\lim|\\[lc]?dots|"
                         r"[\]|]\s*_|\\circ|(?<![A-Za-z\\])[A-Za-z]\s*\(\s*[A-Za-z]\s*\([^()]*\)\s*\)")  # (`\ln(1+x)|_0^1`)


def _is_derivation(side):
    """The quantity being worked out, written as the operation that gives it: an integral, a derivative, a limit,
    an elided sum (`1 + 2 + \\cdots + 2^{n-1}`), an evaluation bracket, a composition (`g(f(x))`, `(f \\circ g)(x)`).
    In a chain `A = B = ... = Z` such a side, like a label or working, is not the answer: Z is."""
    return _DERIVATION.search(side) is not None


def _is_working(side):
    """A computation with no unknowns (`5+5+1`, `\\frac{3}{4} \\cdot 8`, a tuple of them `(\\frac{0+6}{2}, \\frac{4-2}{2})`,
    numerals in a base `34_5 + 12_5`, clock times `2:00 - 5 h`), or a quantity in a unit (`1.5 h`): the work before a
    chain's value."""
    value = parse_math(side)
    if value is not None and not value.free_symbols:
        return True
    number, unit = split_unit(side)
    if unit and "word:" not in unit and parse_math(number) is not None and not parse_math(number).free_symbols:
        return True
    if re.fullmatch(r"\s*\d{1,2}:\d{2}(?:\s*[-+]\s*(?:\d{1,2}:\d{2}|\d+(?:\.\d+)?\s*(?:h|hours?|min|minutes?)))+\s*", side):
        return True
    quantities = re.sub(r"(?<=\d)\s*([A-Za-z]+)(?:\^\{?\d\}?)?", lambda m: " " if unit_key(m.group(1)) else m.group(0), side)
    if quantities != side and parse_math(quantities) is not None and not parse_math(quantities).free_symbols:
        return True  # `2 m \times 1.5 m`, `100 cm \times 100 cm`: quantities in units, computed
    shape = _shape(side)
    if shape.kind == "tuple" and shape.brackets == "()":
        return all(_is_working(x) for x in shape.items)
    return re.fullmatch(rf"\s*{_BASE_NUMERAL}(?:\s*(?:[-+*]|\\times|\\cdot)\s*{_BASE_NUMERAL})+\s*", side) is not None


_BASE_NUMERAL = r"\(?[0-9A-Fa-f]+\)?_\{?\(?\d+\)?\}?"


def _substituted(side):
    """A computation on numbers after sides with unknowns (`2\\pi r = 2 \\cdot \\pi \\cdot 3`, `a^2 + b^2 = (a+b)^2 - 2ab = 100 -
    42`): the formulas before it were evaluated at the given values, so they are the quantity asked and its working
    (`y = 2x + 1 = 7`, where no computation follows, stays an equation)."""
    quotient = re.fullmatch(r"\s*(?:\\[dt]?frac\s*\{\s*(\d+)\s*\}\s*\{\s*(\d+)\s*\}|(\d+)\s*/\s*(\d+))\s*", side)
    if quotient:  # `W/t = 1200/60 = 20`: a quotient not in lowest terms is a division being carried out
        top, bottom = (int(x) for x in (quotient.group(1) or quotient.group(3), quotient.group(2) or quotient.group(4)))
        return bottom > 1 and math.gcd(top, bottom) > 1
    return _COMPUTATION.search(side) is not None and _is_working(side)


def _chain_value(sides):
    """A chain of three or more sides (`z = 1 + 1 = 2`) stands for its first side if that is a label, and its last:
    the sides between are working."""
    if len(sides) < 3:
        return sides
    return [sides[0], sides[-1]] if _is_label(sides[0]) else sides[-1:]


def _bound_variable(p_sides, gold):
    """`f(t) = t^2 + 5` against a gold formula in one other letter (`x^2 + 5`): the formula with its variable renamed
    to the gold's (a function's variable is a bound name), else None."""
    label = re.fullmatch(r"\s*[A-Za-z](?:_\{?\w+\}?)?(?:\^\{?-1\}?)?\s*\(\s*([a-z])\s*\)\s*", p_sides[0])
    value, target = parse_math(p_sides[1]), parse_math(gold)
    if label is None or value is None or target is None or len(target.free_symbols) != 1:
        return None
    (letter,) = target.free_symbols
    if value.free_symbols != {sympy.Symbol(label.group(1))} or letter.name == label.group(1) or len(letter.name) != 1:
        return None
    return re.sub(rf"(?<![A-Za-z\\]){label.group(1)}(?![A-Za-z])", letter.name, p_sides[1])


def _roman_equal(p, g):
    """Roman numerals (numerals.roman_value, two letters at least: `C` alone is an option letter): a gold so written
    asks for the numeral, the last side of the prediction's chain (`90 = 100 - 10 = XC`); a number gold equals the
    numeral's value (`XLIII` is 43). None when neither side is one."""
    gold = roman_value(g) if len(g.strip()) > 1 else None
    if gold is not None:
        last = split_top(p, ["="])[-1].strip()
        return len(last) > 1 and roman_value(last) == gold
    if re.fullmatch(r"\d+", g.strip()) and len(p.strip()) > 1 and roman_value(p) is not None:
        return roman_value(p) == int(g)
    return None


def _relations_equal(p_sides, g_sides):
    """At least one side has '='. Labels are stripped; the prediction's value is its last side (see below)."""
    g_sides = _chain_value(g_sides)
    g_value = parse_math(g_sides[0]) if len(g_sides) == 1 else None
    g_constant = g_value is not None and not g_value.free_symbols
    if len(g_sides) == 1 or (len(g_sides) == 2 and _is_label(g_sides[0])):
        gold = g_sides[-1]
        if len(p_sides) == 1:
            return _equiv(p_sides[0], gold)
        renamed = _bound_variable(p_sides, gold) if len(p_sides) == 2 and len(g_sides) == 1 else None
        if renamed is not None:
            return _equiv(renamed, gold)  # `f(t) = t^2 + 5` for `x^2 + 5`: the function, whatever its variable is called
        if len(g_sides) == 2 and len(p_sides) == 2 and _is_label(p_sides[0]):
            if _canon_label(p_sides[0]) != _canon_label(g_sides[0]):  # x = 3 is not y = 3; but `P = 100 - 0.8X_d`
                return _equations_equal(p_sides, g_sides)              # is `X_d = 125 - 1.25P` solved for P
            return _equiv(p_sides[1], gold)
        if len(g_sides) == 2 and len(p_sides) == 2 and not _is_label(p_sides[0]):
            return _equations_equal(p_sides, g_sides)                 # 2y = 4x + 2 vs y = 2x + 1
        if re.fullmatch(r"[-+]?\d+(?:\.\d+)?", p_sides[0].strip()) or len({canon(x) for x in p_sides}) == 1:
            return all(_equiv(x, gold) for x in p_sides)              # 3 = 3, \sqrt{16} = 4: each side is the value
        # the last side is the value (`c = I(0)`); a side before it is a label, the quantity asked for, or working:
        # a computation without unknowns (`x = 5+5+1 = 7 = 11` is 11, its slips are not graded); a side with an
        # unknown must itself be the answer (`2x + 3 = 7` is an equation, not 7)
        computed = max((k for k, side in enumerate(p_sides) if k and _substituted(side)), default=0)
        values = [s for k, s in enumerate(p_sides[:-1]) if k >= computed and not (
            _is_label(s) or (g_constant and _is_quantity_name(s)) or _is_working(s) or _is_derivation(s))]
        return all(_equiv(v, gold) for v in values + p_sides[-1:])
    if len(p_sides) != len(g_sides):
        return False
    if len(g_sides) == 2:
        return _equations_equal(p_sides, g_sides)
    return _match_ordered(p_sides, g_sides)


# ---- matrices ------------------------------------------------------------------------------------------------
_MATRIX = re.compile(r"\\begin\{([pbBvV]?matrix|smallmatrix|array)\}(?:\{[^}]*\})?((?:(?!\\end\{\1\}).)*)\\end\{\1\}",
                     re.DOTALL)


def _matrix(s):
    """(kind, rows of entry strings) of a whole-answer matrix, else None."""
    s = s.strip()
    for open_, close in (("(", ")"), ("[", "]")):
        inner = _enclosed(s, open_, close)
        if inner is not None and _MATRIX.fullmatch(inner.strip()):
            s = inner.strip()
    transposed = re.search(r"\^\s*\{?\s*(?:T|\\top|\\intercal|t)\s*\}?$", s)  # a row written ^T is a column
    match = _MATRIX.fullmatch(s[:transposed.start()].strip() if transposed else s)
    if not match:
        return None
    body = match.group(2).strip().rstrip("\\")  # a row break before \end (cleaned to `\end` when escaped twice)
    rows = [[c.strip() for c in r.split("&")] for r in re.split(r"\\\\", body) if r.strip()]
    if transposed:
        if any(len(r) != len(rows[0]) for r in rows):
            return None
        rows = [list(column) for column in zip(*rows)]
    return match.group(1), rows


def _determinant_text(kind_rows):
    """A vmatrix is a determinant: its value, as text our parser reads (entries must parse)."""
    _, rows = kind_rows
    if not rows or any(len(r) != len(rows) for r in rows) or len(rows) > 6:
        return None
    entries = [[parse_math(c) for c in r] for r in rows]
    if any(e is None for r in entries for e in r):
        return None
    det = sympy.Matrix(entries).det()
    return det


_ONE_MATRIX = re.compile(r"\\begin\{([pbB]?matrix|smallmatrix|array)\}(?:\{[^}]*\})?(.*?)\\end\{\1\}", re.DOTALL)


def _matrix_arithmetic(s):
    """The value (a sympy Matrix) of sums, differences and products of written-out matrices and numbers
    (`A + B`, `A B`, `2 A - B`, `A \\cdot B`, in the order written), or None when s is not only that."""
    matrices = []

    def placeholder(match):
        matrices.append(_matrix(match.group(0)))
        return f" M{len(matrices) - 1} "
    skeleton = _ONE_MATRIX.sub(placeholder, s)
    numbers = re.sub(r"\\frac\s*\{[^{}]*\}\s*\{[^{}]*\}|\\sqrt\s*\{[^{}]*\}", "1", skeleton)  # `\frac{1}{2} A` scales A
    if not matrices or len(matrices) > 6 or None in matrices or re.search(r"[{}\\](?!cdot|times)", numbers):
        return None
    values = []
    for _, rows in matrices:
        if len(rows) > 6 or any(len(r) != len(rows[0]) for r in rows):
            return None
        entries = [[parse_math(c) for c in r] for r in rows]
        if any(e is None for r in entries for e in r):
            return None
        values.append(sympy.Matrix(entries))
    total = None
    for sign, term in re.findall(r"([-+]?)\s*([^-+]+)", skeleton):
        product = sympy.Integer(-1 if sign == "-" else 1)
        for factor in re.split(r"\s*(?:\\cdot|\\times|\*)\s*|\s+", term.strip()):
            if re.fullmatch(r"M\d", factor):
                factor_value = values[int(factor[1:])]
            else:
                factor_value = parse_math(factor)
                if factor_value is None or factor_value.free_symbols:
                    return None
            try:
                product = product * factor_value
            except (sympy.ShapeError, TypeError, ValueError):
                return None  # shapes that do not multiply
        if not isinstance(product, sympy.MatrixBase):
            return None
        try:
            total = product if total is None else total + product
        except (sympy.ShapeError, TypeError, ValueError):
            return None
    return total


def _matrices_equal(p, g):
    pm, gm = _matrix(p), _matrix(g)
    if pm is None and gm is not None and gm[0] not in ("vmatrix", "Vmatrix"):
        value = _matrix_arithmetic(p)  # [[1, 2], [3, 4]] + [[5, 6], [7, 8]] against the written sum
        if value is not None:
            rows = gm[1]
            if value.shape != (len(rows), len(rows[0])) or any(len(r) != value.shape[1] for r in rows):
                return False
            entries = [[parse_math(c) for c in r] for r in rows]
            return all(entries[i][j] is not None and _exprs_equal(value[i, j], entries[i][j])
                       for i in range(value.shape[0]) for j in range(value.shape[1]))
    if (pm and pm[0] in ("vmatrix", "Vmatrix")) or (gm and gm[0] in ("vmatrix", "Vmatrix")):
        pv = _determinant_text(pm) if pm and pm[0].lower() == "vmatrix" else parse_math(p)
        gv = _determinant_text(gm) if gm and gm[0].lower() == "vmatrix" else parse_math(g)
        return pv is not None and gv is not None and _exprs_equal(pv, gv)
    if pm is None or gm is None:
        # a column or row vector against a tuple of the same entries
        vec, other = (pm, g) if pm else (gm, p)
        if vec is None:
            return False
        entries = [c for r in vec[1] for c in r] if len(vec[1]) == 1 or all(len(r) == 1 for r in vec[1]) else None
        shape = _shape(other)
        return entries is not None and shape.kind == "tuple" and shape.brackets in ("()", "[]") \
            and _match_ordered(shape.items, entries)
    p_rows, g_rows = pm[1], gm[1]
    return len(p_rows) == len(g_rows) and all(len(a) == len(b) and _match_ordered(a, b) for a, b in zip(p_rows, g_rows))


def _date(s):
    """(month, day, year or None) of latex.clean's `date(3,14)`, or of `3/14`, `3/14/2024` (month first; day first when
    the first number cannot be a month: `14/3`); None otherwise."""
    canonical = re.fullmatch(r"date\((\d+),(\d+)(?:,(\d+))?\)", s.strip())
    numeric = re.fullmatch(r"(\d{1,2})\s*/\s*(\d{1,2})(?:\s*/\s*(\d{4}))?", s.strip())
    found = canonical or numeric
    if found is None:
        return None
    first, second, year = int(found.group(1)), int(found.group(2)), found.group(3) and int(found.group(3))
    if numeric and first > 12:
        first, second = second, first
    return (first, second, year) if 1 <= first <= 12 and 1 <= second <= 31 else None


_UNIT_VECTOR = re.compile(r"\\hat\{([ijk])\}|(?<![\\A-Za-z])([ijk])(?![A-Za-z])")


def vector_entries(s):
    """The entries of a written-out vector: a tuple, a one-row or one-column matrix (texts), else None."""
    matrix = _matrix(s)
    if matrix is not None and matrix[0] not in ("vmatrix", "Vmatrix"):
        rows = matrix[1]
        return [c for r in rows for c in r] if len(rows) == 1 or all(len(r) == 1 for r in rows) else None
    shape = _shape(s)
    return shape.items if shape.kind == "tuple" and shape.brackets in ("()", "[]") else None


def _unit_vectors_equal(p, g):
    """A vector written with unit vectors (`2\\mathbf{j} + \\mathbf{k}`, `3\\hat{i} - 2\\hat{j}`; plain `3i - 2j + k` when it
    has no other letter) against a tuple or a one-column or one-row matrix: the same entries. None when neither side
    is such a pair."""
    for combination, other in ((p, g), (g, p)):
        entries = vector_entries(other)
        if entries is None or len(entries) not in (2, 3) or not _UNIT_VECTOR.search(combination) or vector_entries(combination):
            continue
        if "\\hat" not in combination and re.search(r"(?<![\\A-Za-z])(?![ijk](?![A-Za-z]))[A-Za-z]", combination):
            return None  # plain letters other than i, j, k: not a vector
        names = [sympy.Symbol(f"U_{k}") for k in range(3)]
        value = parse_math(_UNIT_VECTOR.sub(lambda m: f" U_{'ijk'.index(m.group(1) or m.group(2))} ", combination))
        if value is None or not value.free_symbols <= set(names):
            return None
        try:
            poly = sympy.Poly(value, *names)
        except (sympy.PolynomialError, sympy.GeneratorsNeeded, ValueError, TypeError):
            return None
        if poly.total_degree() > 1 or poly.coeff_monomial(1) != 0 or any(poly.coeff_monomial(n) != 0 for n in names[len(entries):]):
            return False
        values = [parse_math(e) for e in entries]
        return None not in values and all(_exprs_equal(poly.coeff_monomial(n), v) for n, v in zip(names, values))
    return None


# ------------------------------------------------------------------------------------------------------------
# Equivalence
# ------------------------------------------------------------------------------------------------------------
_CHOICE = re.compile(r"\(?\s*([A-E])\s*\)?")
_OPTION_VALUE = re.compile(r"(?:\(\s*[A-E]\s*\)|[A-E]\s*[.:)])\s*(?!or\b|and\b)([^()A-Za-z].*)")  # `(B) 45`, `C. 12`


def canon(s):
    s = re.sub(r"(?<=\d)\s+(?=\d)", " ", s)   # `1 2` (from `1 \quad 2`) stays two numbers, never 12
    s = re.sub(r"(?<!\d)\s+|\s+(?!\d)", "", s)
    return re.sub(r"([_^])\{(\w)\}", r"\1\2", s)


def _is_words(s):
    """Plain words (`even`, `Monday`, `no solution`): a run of 3+ letters; `xy` stays a product of symbols."""
    return re.fullmatch(r"[A-Za-z][A-Za-z\s\-']*", s) is not None and re.search(r"[A-Za-z]{3}", s) is not None


COPULA = re.compile(r"^(?:(?:so|thus|hence|therefore),?\s+)?(?:(?:the|its|their)\s+[\w\s()'^{}-]{0,60}?|[A-Za-z](?:\s*\(\s*[a-z]\s*\))?\s+)"
                     r"\b(?:is|are)\s+(?:an?\s+)?", re.IGNORECASE)  # "the function is even", "f is odd" (not "it is correct")


# A statement of what something does, in one verb after its subject: "the series diverges", "so the sequence converges"
VERB_PREDICATE = re.compile(r"(?:(?:so|thus|hence|therefore),?\s+)?(?:the|this|it|its|our)\b(?:\s+[a-z-]+){0,3}?\s+(?!not\b|is\b|are\b)"
                            r"([a-z]+s)\s*", re.IGNORECASE)


def _words(s):
    """Words compared: lowercase, "odd function" is "odd", "neither even nor odd" is "neither"."""
    s = " ".join(s.lower().replace("-", " ").split())
    s = re.sub(r"^(?:an?|the) (?=\w)", "", s)  # `\text{a trapezoid}` is the word `trapezoid`
    s = re.sub(r"^neither (even|odd) nor (?!\1)(even|odd)$", "neither", s)
    s = re.sub(r"^(?:there is )?(?:not enough information|insufficient (?:information|data)|(?:it )?cannot be determined)$",
               "cannot be determined", s)  # one refusal, however worded
    s = re.sub(r"^(?:dne|does not exist|(?:it )?doesn'?t exist|nonexistent|non existent)$", "does not exist", s)  # a limit's verdict
    return re.sub(r"^(even|odd|neither)(?: functions?)$", r"\1", s)


def _choice_equal(p, letter):
    """A multiple-choice answer: one letter, alone or with its option text (`(E) 42`, `B. 12`); never two."""
    p = re.sub(r"^(?:option|choice|answer)\s*:?\s*", "", p.strip(), flags=re.IGNORECASE)
    match = re.fullmatch(r"\(\s*([A-E])\s*\)(.*)|([A-E])(?:\s*[.:)]\s*(.*))?", p, flags=re.DOTALL)
    if not match:
        return False
    found, rest = match.group(1) or match.group(3), match.group(2) or match.group(4) or ""
    if re.search(r"\(\s*[A-E]\s*\)|\b(?:or|and)\b|(?<![A-Za-z\\])[A-E](?![A-Za-z])", rest):
        return False  # another option named in the same answer: a hedge
    return found == letter


_NOT_EQUAL = re.compile(r"^([A-Za-z])\s*\\ne\s*([^,;=<>]+)$")   # x \ne 2: every real but 2


_MEASUREMENT = re.compile(r"[-+]?(?:\d*\.\d+(?:\s*\\times\s*10\^\{?-?\d+\}?)?|\d+\s*\\times\s*10\^\{?-?\d+\}?)"
                          r"(?:\s*[A-Za-z][A-Za-z./^{}\d\s-]{0,20})?")  # 0.2, 1.70 \times 10^4 m: a rounded value
_DECIMAL_POINT = re.compile(r"[-+]?\d+\.\d+")
_DECIMAL_COMMA = re.compile(r"([-+]?\d+),(\d+)")


def _decimal_comma_equal(p, g):
    """`1000,99` and `0,111` are decimals written with a comma (`1,000` is a thousand, `1, 22` a list): a prediction
    so written equals the same decimal written with a point, and nothing else. A gold so written is read as a
    decimal only with 2+ decimals (`1,22`, `0,111`): `0,1` and `1,2` are lists of small solutions."""
    for a, b, is_gold in ((p, g, False), (g, p, True)):
        comma = _DECIMAL_COMMA.fullmatch(a)
        if not comma or not _DECIMAL_POINT.fullmatch(b):
            continue
        whole, decimals = comma.group(1).lstrip("+-"), comma.group(2)
        if (len(decimals) != 3 or whole == "0") and (not is_gold or len(decimals) >= 2):
            return Fraction(f"{comma.group(1)}.{decimals}") == Fraction(b)
    return False


_DOMAIN = re.compile(r"(?:\s*,\s*(?:(?:for|where|with|if|when)\s+)?|\s+(?:for|where|with|if|when)\s+)"
                     r"((?:[-+\w.\\{}]+\s*(?:\\le|\\ge|<|>)\s*)?([A-Za-z])\s*(?:\\le|\\ge|<|>)\s*[-+\w.\\{}]+)$")


def _split_domain(s):
    """(value, domain) of a value with a trailing domain (`x^2 + 2, x \\ge 0`, `\\sqrt{x} for x > 0`), else (s, None)."""
    match = _DOMAIN.search(s)
    if match is None or _INEQ.search(s[:match.start()]) or \
            not re.search(rf"(?<![A-Za-z\\]){match.group(2)}(?![A-Za-z])", s[:match.start()]):
        return s, None
    return s[:match.start()], match.group(1)


# ---- answers by cases ------------------------------------------------------------------------------------------
CASE_WORD = re.compile(r"\b(?:if|when|whenever|for|otherwise|else)\b|\\begin\{cases\}", re.I)
_PARITY = re.compile(r"^(?:([a-z])\s+(?:is\s+)?(?:an?\s+)?(even|odd)(?:\s+(?:number|integer))?|(even|odd)\s+([a-z]))$")
_SIGN = re.compile(r"^(?:(positive|negative|nonnegative|non-negative|nonpositive|non-positive)\s+([a-z])|([a-z])\s+(?:is\s+)?"
                   r"(positive|negative|nonnegative|non-negative|nonpositive|non-positive))$")
_SIGN_TEST = {"positive": lambda v: v > 0, "negative": lambda v: v < 0, "nonnegative": lambda v: v >= 0,
              "nonpositive": lambda v: v <= 0}
_RELATION_TEST = {"<": operator.lt, ">": operator.gt, "\\le": operator.le, "\\ge": operator.ge, "=": operator.eq,
                  "\\ne": operator.ne}


def _condition(text):
    """A case's condition as (test(point) -> bool, symbols, integer symbols), or None: "n is even", "odd n",
    "positive k", `a > 0`, `x \\ge y`. "otherwise" is the condition None (the remaining points)."""
    text = re.sub(r"\s+", " ", text.strip().strip("$ ")).lower() if not re.search(r"[A-Z]", text) else text.strip()
    parity = _PARITY.match(text)
    if parity:
        name, kind = (parity.group(1), parity.group(2)) if parity.group(1) else (parity.group(4), parity.group(3))
        x = sympy.Symbol(name)
        return (lambda v: v[x] % 2 == (kind == "odd")), {x}, {x}
    sign = _SIGN.match(text)
    if sign:
        word, name = (sign.group(1), sign.group(2)) if sign.group(1) else (sign.group(4), sign.group(3))
        x, test = sympy.Symbol(name), _SIGN_TEST[word.replace("-", "")]
        return (lambda v: bool(test(v[x]))), {x}, set()
    parts = re.split(r"(<|>|\\le|\\ge|\\ne|=)", text)
    if len(parts) != 3:
        return None
    left, right = parse_math(parts[0].strip()), parse_math(parts[2].strip())
    if left is None or right is None or not (left.free_symbols | right.free_symbols):
        return None
    test = _RELATION_TEST[parts[1]]
    return ((lambda v: bool(test(left.xreplace(v), right.xreplace(v)))), left.free_symbols | right.free_symbols, set(),
            {side for side in (left, right) if side.is_Rational})  # the bound, where the grid looks closely


def parse_cases(s):
    """[(value, condition)] of an answer by cases (`\\begin{cases} 1 & n odd \\\\ 0 & n even \\end{cases}`, "5 if n is
    even, 6 if n is odd", "3 when a > 0 and 4 otherwise", "0 for even n and 1 for odd n", `f(x) = x if x \\ge 0 and
    f(x) = -x if x < 0`), with condition None for "otherwise"; None when s is not one."""
    if not CASE_WORD.search(s) or len(s) > 400:
        return None
    env = re.fullmatch(r"\s*(?:[A-Za-z](?:\([a-z]\))?\s*=\s*)?\\begin\{cases\}(.*)\\end\{cases\}\s*", s, re.DOTALL)  # (f(x) = ...)
    if env:
        rows = [[cell.strip().rstrip(",;") for cell in row.split("&")] for row in re.split(r"\\\\", env.group(1)) if row.strip()]
        pairs = [(row[0], re.sub(r"^\s*(?:if|for|when)\s+", "", row[1].strip()) if len(row) == 2 else None) for row in rows]
        if any(len(row) != 2 for row in rows):
            return None
    elif re.match(r"\s*(?:if|when)\b", s, re.I):  # "If n is even, the answer is 5; if n is odd, it is 6."
        pairs = []
        for part in re.split(r"\s*(?:;|\.\s+|,\s*(?:and\s+|but\s+)?(?=(?:if|when|otherwise|else)\b))\s*", s.strip().rstrip("."),
                             flags=re.I):
            said = r"(?:(?:the\s+)?(?:answer|value|result|total|count|number|sum)(?:\s+\w+){0,3}?\s+(?:is|equals|=)|it\s+is|it's|" \
                   r"we\s+get|we\s+have)"
            case = re.fullmatch(rf"(?:(?:if|when)\s+(.+?)|otherwise|else)(?:\s*,\s*(?:then\s+)?(?:{said}\s+)?|\s+(?:then\s+)?{said}\s+)"
                                r"([^,;]+)", part.strip(), re.I)
            if case is None:
                return None
            pairs.append((case.group(2), case.group(1) or "otherwise"))
    else:
        pairs = []
        for part in re.split(r"\s*(?:,|;)\s*(?:and\s+|or\s+)?|\s+(?:and|or)\s+(?=.*?\b(?:if|when|whenever|for|otherwise|else)\b)", s):
            part = part.strip()
            other = re.fullmatch(r"(?:otherwise|else)\s*,?\s*(.+)|(.+?)\s+otherwise", part)
            if other:
                pairs.append((other.group(1) or other.group(2), "otherwise"))
                continue
            case = re.fullmatch(r"(.+?)\s+(?:if|when|whenever|for)\s+(.+)", part)
            if case is None:
                return None
            pairs.append((case.group(1), case.group(2)))
    out = []
    for value, condition in pairs:
        value = split_top(value.strip(), ["="])[-1].strip()
        parsed = parse_math(value)
        test = None if condition.strip().lower() in ("otherwise", "else") else _condition(condition)
        if parsed is None or (test is None and condition.strip().lower() not in ("otherwise", "else")):
            return None
        out.append((parsed, test))
    if len(out) < 2 or sum(test is None for _, test in out) > 1:
        return None
    return out


def _cases_value(cases, point):
    """The value at a point of an answer by cases (None where no case holds), or of a plain expression."""
    if not isinstance(cases, list):
        return cases.xreplace(point)
    for value, test in cases:
        if test is not None and test[0](point):
            return value.xreplace(point)
    rest = [value for value, test in cases if test is None]
    return rest[0].xreplace(point) if rest else None


def _cases_equal(p, g):
    """An answer by cases against another or a formula: the same value at each point of a grid over its symbols
    (integers for a parity symbol, also fractions otherwise), wherever the gold has one, and each of the gold's cases
    met. None when neither side is an answer by cases."""
    pc, gc = parse_cases(p), parse_cases(g)
    if pc is None and gc is None:
        return None
    sides = []
    for cases, text in ((pc, p), (gc, g)):
        if cases is None:
            sides_of = split_top(text, ["="])
            cases = parse_math(sides_of[-1] if len(sides_of) == 2 and _is_label(sides_of[0]) else text)  # (f(x) = |x+3|)
            if cases is None:
                return False
        sides.append(cases)
    symbols, integers, bounds = set(), set(), set()
    for cases in sides:
        if isinstance(cases, list):
            for value, test in cases:
                symbols |= value.free_symbols | (test[1] if test else set())
                integers |= test[2] if test else set()
                bounds |= test[3] if test and len(test) > 3 else set()
        else:
            symbols |= cases.free_symbols
    if len(symbols) > 3 or len(bounds) > 6:
        return False
    names = sorted(symbols, key=str)
    near = sorted({b + d for b in bounds for d in (-1, sympy.Rational(-1, 2), 0, sympy.Rational(1, 2), 1)})  # both sides of
    grids = [[sympy.Integer(k) for k in (-3, -2, -1, 0, 1, 2, 3, 4, 5, 6)] + [b for b in near if b.is_Integer] if x in integers else
             near + [sympy.Integer(k) for k in (-3, -1, 0, 1, 2, 5)] + [sympy.Rational(7, 2), sympy.Rational(-5, 3)] for x in names]
    met, compared = set(), 0
    for values in itertools.islice(itertools.product(*grids), 200):
        point = dict(zip(names, values))
        gold = _cases_value(sides[1], point)
        if gold is None:
            continue
        pred = _cases_value(sides[0], point)
        if pred is None or pred.free_symbols or gold.free_symbols or not _numbers_equal(pred, gold):
            return False
        compared += 1
        if isinstance(sides[1], list):
            met.add(next((k for k, (_, test) in enumerate(sides[1]) if test is None or test[0](point)), None))
    return compared >= 3 and (not isinstance(sides[1], list) or len(met) == len(sides[1]))


def _valid_numeral(digits, base):
    try:
        return 2 <= base <= 36 and int(digits, base) is not None
    except ValueError:
        return False


def _forms_equal(p, g):
    """The forms of answer_forms.py: congruence classes, prime factorizations, solution families; None when the gold is
    of none of them (or the prediction is a residue and the gold an integer: compared as written)."""
    same = bearings_equal(p, g)
    if same is not None:  # `S 60° E` = `120°`, `NW` = `315°`
        return same
    if re.search(r"(?<![A-Za-z\\])[Cc]_?\{?\d", g):
        same = constant_families_equal(p, g)
        if same is not None:  # `y = A \sin(x + \varphi)` for `y = C_1 \cos x + C_2 \sin x`: one family of solutions
            return same
    gc = congruence(g)
    if gc is not None:
        pc = congruence(p)
        return pc is not None and pc[1] == gc[1] and (pc[0] - gc[0]) % gc[1] == 0
    pc = congruence(p)
    if pc is not None and re.fullmatch(r"-?\d+", g.strip()):
        return pc[0] == int(g)  # `2^{100} \equiv 2 \pmod 7` (cleaned to `2 \pmod{7}`) for the remainder 2
    gd = dimensions(g)
    if gd is not None:  # `8 \\times 5` is a shape: `5 by 8`, `8 m by 5 m`; not the area 40, nor `10 \\times 4`
        pd = dimensions(split_top(p, ["="])[-1])
        if pd is not None or not factorization(g):
            return pd == gd
    gf = factorization(g)
    if gf:  # `2^3 \cdot 3^2 \cdot 5` asks for the factorization: `360 = 2 \times 2 \times 2 \times 3 \times 3 \times 5`
        return factorization(split_top(p, ["="])[-1]) == gf
    if "\\pi" in g and re.search(r"(?<![A-Za-z\\])[kmnj](?![A-Za-z])", g):
        return families_equal(p, g)
    return None


# A function or a sequence defined with its own name for the variable (`f(t) = 2t + 3`, `a_k = 2 \cdot 3^k`, `p(x) = x^2 -
# 4x + 3`, `f: n \mapsto n + 1`): the variable is bound by the definition, so it equals a gold in another letter
# (`2x + 3`, `2 \cdot 3^n`, `\lambda^2 - 4\lambda + 3`) once renamed; only when each side has that one letter free
_DEFINED = re.compile(r"\s*(?:[A-Za-z](?:_\{?[A-Za-z]\}?)?\s*\(\s*([A-Za-z]|\\[a-z]+)\s*\)|[A-Za-z]_\{?([A-Za-z])\}?|[A-Za-z]\s*:\s*([A-Za-z])"
                      r"\s*\\mapsto)\s*(?:=(?![=<>]))?\s*(.+)", re.DOTALL)


def _renamed_variable(p, g):
    """_equiv of a definition in its own variable against a gold in another (see above), else None."""
    defined_sides = [_DEFINED.fullmatch(x) for x in (p, g)]
    if not any(defined_sides):
        return None
    sides = []
    for x, defined in zip((p, g), defined_sides):
        body = defined.group(4) if defined else x
        if "=" in body:
            return None
        variable = next((v for v in defined.group(1, 2, 3) if v), None) if defined else None
        sides.append((variable and variable.lstrip("\\"), parse_math(body)))
    (p_name, p_body), (g_name, g_body) = sides
    if p_body is None or g_body is None or not (p_name or g_name):
        return None
    p_free, g_free = list(p_body.free_symbols), list(g_body.free_symbols)
    if len(p_free) != 1 or len(g_free) != 1 or str(p_free[0]) == str(g_free[0]) \
            or p_name and str(p_free[0]) != p_name or g_name and str(g_free[0]) != g_name:
        return None
    return _exprs_equal(p_body.subs(p_free[0], g_free[0]), g_body)


def _equiv(p, g):
    """Both cleaned. Structure first (choices, words, intervals, lists, units, relations), then values."""
    if p == g or canon(p) == canon(g) or _decimal_comma_equal(p, g):
        return True
    if re.match(r"\\(?:hat|widehat|bar|tilde)\s*\{?\s*[A-Za-z]\s*\}?\s*=", g) and not re.match(r"\\(?:hat|widehat|bar|tilde)", p):
        g = re.sub(r"^\\(?:hat|widehat|bar|tilde)\s*\{?\s*([A-Za-z])\s*\}?", r"\1", g)  # `y = 1.6x + 0.5` for `\hat{y} = ...`:
        # the accent of the gold's name of what an equation gives (an estimate, a mean) is notation
    distributed = _scalar_distributed(split_top(p, ["="])[-1])
    if distributed and _scalar_distributed(g) is None and distributed != p:
        return _equiv(distributed, g)  # `\\frac15(3, 4)`, `(1, 2, 2)/3`, `\\frac{1}{10}\\begin{pmatrix}...`: the entries
    renamed = _renamed_variable(p, g)
    if renamed is not None:
        return renamed
    named = _named_object(p)
    if named and "=" not in g and not re.match(r"\s*[A-Za-z]\s*\(", g):
        return _equiv(named, g)  # `M(5, -2)`, `\overrightarrow{AB} = (3, -4)`, `S = (3, \infty)`, `\{(7, 3)\}`: the object
    forms = _forms_equal(p, g)
    if forms is not None:
        return forms
    if without_remainder(p) != p and without_remainder(g) == g:  # `e^x = 1 + x + \frac{x^2}{2} + O(x^3)`: the series, cut at
        p = split_top(without_remainder(p), ["="])[-1]           # its remainder (the sides before it name the function)
    p, g = set_intervals(p) or p, set_intervals(g) or g          # `\{x : |x| \ge 3\}`, `R \setminus [-1, 3]`: intervals
    if CASE_WORD.search(p) or CASE_WORD.search(g):
        by_cases = _cases_equal(p, g)  # "5 if n is even, 6 if n is odd", \begin{cases}, against cases or a formula
        if by_cases is not None:
            return by_cases
    (p_value, p_domain), (g_value, g_domain) = _split_domain(p), _split_domain(g)
    if g_domain:  # a domain the gold states is part of the answer: `x^2 + 2, x \ge 0` (an inverse function)
        return p_domain is not None and _intervals_equal(p_domain, g_domain) is True and _equiv(p_value, g_value)
    if p_domain:  # one only the prediction states restricts nothing the gold asked for
        p = p_value
    if "\\emptyset" in (p, g):
        sides = split_top(p, ["="])  # `A \cap B = \emptyset`: a set named by an operation on named sets
        if g == "\\emptyset" and len(sides) > 1 and sides[-1].strip() == g and all(
                re.fullmatch(r"\s*[A-Z](?:_\w)?(?:\s*(?:\\cap|\\cup|\\setminus|\\backslash|\\times)\s*[A-Z](?:_\w)?)*\s*", x)
                for x in sides[:-1]):
            return True
        return False  # the empty set is only itself (`\{\emptyset\}` is not empty)
    approx = re.fullmatch(r"(?:\\approx|approximately|approx\.?|about|roughly|around)\s*([^=<>]+)", p)
    if approx:  # "approximately 0.2": a rounded value equals a gold that is a rounded measurement, never an exact one
        return _MEASUREMENT.fullmatch(g) is not None and _equiv(approx.group(1).strip(), g)
    choice = _CHOICE.fullmatch(g)
    if choice:
        return _choice_equal(p, choice.group(1))
    option = _OPTION_VALUE.fullmatch(p)
    if option:  # `(B) 45` for the value 45: the option's value is the answer (the letter alone is not)
        return _equiv(option.group(1).strip(), g)
    if re.search(r"noon|midday|midnight", p + g, re.I):
        clock = [_clock_minutes(*split_unit(x)) for x in (p, g)]
        if None not in clock:
            return clock[0] == clock[1]  # midnight = 12:00 AM = 00:00
    if "date(" in p + g:  # latex.clean's canonical date: the same day, also as `3/14` (month first)
        dates = [_date(x) for x in (p, g)]
        return None not in dates and dates[0][:2] == dates[1][:2] and dates[1][2] in (None, dates[0][2])
    if re.search(r"(?<=\d)j(?![A-Za-z])|(?<![\\A-Za-z])j(?![A-Za-z])", p) and re.search(r"(?<![\\A-Za-z])i(?![A-Za-z])", g) \
            and not re.search(r"(?<![\\A-Za-z])i(?![A-Za-z])", p):
        p = re.sub(r"(?<![\\A-Za-z])j(?![A-Za-z])|(?<=\d)j(?![A-Za-z])", "i", p)  # an engineer's j: 3 + 7j = 3 + 7i
    if re.search(r"\\hat\{[ijk]\}|(?<![\\A-Za-z])[ijk](?![A-Za-z])", p + g):
        same = _unit_vectors_equal(p, g)
        if same is not None:
            return same
    roman = _roman_equal(p, g)
    if roman is not None:
        return roman
    if _is_words(g):  # a word answer, alone or as the predicate of a sentence: "the function is even" for `even`
        predicate = COPULA.sub("", p, count=1)
        verb = VERB_PREDICATE.fullmatch(p)  # "the series diverges" for `diverges`
        if _words(g) == "neither" and re.search(r"\bneither\s+[a-z]+\s+nor\s+[a-z]+$", predicate.strip(), re.I):
            return True  # "f is neither even nor odd" for `neither` (of "even, odd, or neither")
        return any(_is_words(x) and _words(x) == _words(g) for x in (p, predicate, verb.group(1) if verb else ""))
    p, g = (_NOT_EQUAL.sub(r"(-\\infty, \2) \\cup (\2, \\infty)", x) for x in (p, g))
    margin = re.fullmatch(r"(?:[^=]*\\in\s*)?([^=\\]*\d[^=\\]*?)\s*\\pm\s*([^=,]+)", p) if "\\pm" in p and "=" not in p else None
    ends = re.fullmatch(r"\s*[\[(]\s*([^,()\[\]]+),\s*([^,()\[\]]+)[\])]\s*", g) if margin else None
    if ends:  # `52 \pm 2.94` for the interval (49.06, 54.94): a centre and a margin (a confidence interval) name its ends
        centre, half = margin.group(1), margin.group(2)
        return _equiv(f"{centre} - ({half})", ends.group(1)) and _equiv(f"{centre} + ({half})", ends.group(2))
    if _interval_like(g) or _interval_like(p):
        same = _intervals_equal(p, g)
        if same is not None:
            return same
        if _interval_like(g) and "=" not in g:
            return False
    labelled = split_top(p, ["="])
    if len(labelled) > 1 and (_matrix(labelled[-1]) or vector_entries(labelled[-1]) and vector_entries(g)) and all(
            _is_label(x) or _is_working(x) or _is_derivation(x) or _ONE_MATRIX.search(x)
            or re.fullmatch(r"[-+*()\s\\cdot]*(?:[A-Z](?:_\w)?'*(?:\s*(?:[-+*]|\\cdot)?\s*[A-Z(](?:_\w)?'*|\^\s*\{?T\}?|[(),\d\s])*)", x)
            for x in labelled[:-1]):
        p = labelled[-1]  # A^{-1} = \begin{bmatrix}...\end{bmatrix}, PQ = Q - P = (3, -2, 3): names and working, then the vector
    if _matrix(g) or _matrix(p):
        return _matrices_equal(p, g)
    p_shape, g_shape = _shape(p), _shape(g)
    if p_shape.kind == "single" and g_shape.kind == "tuple":  # `(\frac{0+6}{2}, \frac{4-2}{2}) = (3, 1)`: working, then the tuple
        sides = split_top(p, ["="])
        if len(sides) > 1 and all(_is_label(x) or _is_working(x) or _is_derivation(x) for x in sides[:-1]):
            p, p_shape = sides[-1], _shape(sides[-1])
    if g_shape.kind == "single" and re.search(r"\\(?:pm|mp)", p) and not re.search(r"\\(?:pm|mp)", g):
        values = _expand_pm(p)  # `3 \pm 0`, `\pm\sqrt{0}`: two values that coincide are that one value
        return len(values) > 1 and all(_equiv(v, values[0]) for v in values[1:]) and _equiv(values[0], g)
    if p_shape.kind != "single" or g_shape.kind != "single":
        return _shapes_equal(p_shape, g_shape)
    return _item_equal(p, g)


# Arithmetic written out on numbers: a sum or difference of numbers, an explicit product sign, a power of a number, a
# quotient by a bracket (`2/(2+5)`, `\pi \cdot 6^2`, `3 \times 4.99`); not a final form (`\frac{1}{3}`, `3\sqrt{2}`, `\log_2 5`)
_COMPUTATION = re.compile(r"[\d)}]\s*[-+]\s*[\d(\\]|\\cdot|\\times|\\div|\*|\d\s*\^|/\s*\(|\)\s*/")
# ...of which the operations on plain numbers: a product sign, a power of a number, digits added or subtracted
_ARITHMETIC = re.compile(r"\\cdot|\\times|\\div|\*|\d\s*\^|(?<![\w}])\d+\s*[-+]\s*\d|/\s*\(|\)\s*/")


def _compound_equal(p, g):
    """`1 h 30 min` (a quantity in a larger and a smaller unit: latex.compound_units) against a gold in either unit, or in
    none (90 or 1.5); None when p is no such quantity."""
    compound = re.fullmatch(r"(\d+(?:\.\d+)?)\s*([A-Za-z]+)\.?,?\s*(?:and\s+)?(\d+(?:\.\d+)?)\s*([A-Za-z]+)\.?", p)
    units = compound and compound_units(compound.group(2), compound.group(4))
    if not units:
        return None
    big, small, factor = units
    whole, part = Fraction(compound.group(1)), Fraction(compound.group(3))
    readings = {big: whole + part / factor, small: whole * factor + part}
    gv, gu = split_unit(g)
    if gu is not None and gu not in readings:
        return False
    gold = parse_math(gv)
    return gold is not None and gold.is_Rational and any(sympy.Rational(value.numerator, value.denominator) == gold
                                                         for unit, value in readings.items() if gu in (None, unit))


def _item_equal(p, g):
    """One answer each (no top-level list)."""
    compound = _compound_equal(p, g)
    if compound is not None:
        return compound
    (pv, pu), (gv, gu) = split_unit(p), split_unit(g)
    if pu == "%" and len(split_top(p, ["="])) > 1 and "=" not in g and "\\approx" not in p:
        return _relations_equal(split_top(p, ["="]), [g])  # `3/8 = 37.5%`: the sign belongs to the last side only
    if pu == "%" and len(split_top(p, ["\\approx"])) == 2 and gu != "%" and "=" not in g:
        return _equiv(split_top(p, ["\\approx"])[0], g)  # `\frac{2}{13} \approx 15.4\%`: the exact value before its rounding
    clock = _clock_minutes(pv, pu), _clock_minutes(gv, gu)
    if None not in clock:
        return clock[0] == clock[1]  # 22:15 = 10:15 PM (one side on the 24-hour clock), midnight = 12:00 AM
    if pu == "%" or gu == "%":
        return _percent_equal(pv, pu, gv, gu)
    if "deg" in (pu, gu) and {pu, gu} <= {"deg", "rad", None}:  # 60^\circ = \frac{\pi}{3} (an angle in either unit)
        (degrees, _), (other, _) = ((pv, pu), (gv, gu)) if pu == "deg" else ((gv, gu), (pv, pu))
        if "\\pi" in other and "\\pi" not in degrees:
            return _equiv(f"({degrees})\\cdot\\frac{{\\pi}}{{180}}", other)
    scales = [unit_dimensions(u) for u in (pu, gu)] if pu and gu and pu != gu else [None]
    if None not in scales and scales[0][1] == scales[1][1] and scales[0][0] != scales[1][0]:  # one kind of quantity in two units: 250 cm = 2.5 m, 90 km/h = 25 m/s
        ratio = Fraction(scales[0][0]) / Fraction(scales[1][0])
        return _equiv(f"({pv})\\cdot\\frac{{{ratio.numerator}}}{{{ratio.denominator}}}", gv)
    if _units_conflict(pu, gu):
        return False
    if (pu or gu) and _equiv(pv, gv):
        return True
    ratio = [split_top(x, [":"]) for x in (p, g)]
    if (len(ratio[1]) > 1 or len(ratio[0]) > 1) and "=" not in p + g:  # ratios and times: ordered parts (3:1 is not 1:3)
        if len(ratio[0]) == len(ratio[1]):
            if all(_equiv(a, b) for a, b in zip(*ratio)):
                return True
            values = [[parse_math(x) for x in r] for r in ratio]  # 6:4 = 3:2, numbers in proportion
            if any(v is None or v.free_symbols or v == 0 for r in values for v in r):
                return False
            return all(_numbers_equal(a * values[1][0], b * values[0][0]) for a, b in zip(*values))
        number = p if len(ratio[0]) == 1 else g   # a:b against the number a/b: 3:1 = \frac{3}{1} = 3
        parts = ratio[1] if len(ratio[0]) == 1 else ratio[0]
        return len(parts) == 2 and _equiv(number, f"\\frac{{{parts[0]}}}{{{parts[1]}}}")
    p_sides, g_sides = split_top(p, ["="]), split_top(g, ["="])
    if "\\approx" in p and _MEASUREMENT.fullmatch(g) and re.search(r"\\approx\s*[^=<>]+$", p):
        return _equiv(split_top(p, ["=", "\\approx"])[-1], g)  # P = \frac23 \approx 0.67 for a gold rounded to 0.67: the
        # response's own rounding is what it states (`e^3 \approx 20.0` is not 20.1, though e^3 rounds to 20.1)
    if "\\approx" in p:  # x = 1/3 \approx 0.33: the approximation is a remark when an exact value is given
        exact = [split_top(side, ["\\approx"])[0] for side in p_sides]
        exact = [x for x in exact if x]
        symbol_named = re.fullmatch(r"\\?[A-Za-z]+(?:_\{?\w+\}?)?", exact[-1]) and exact[-1] != "\\pi" or (
            exact[-1] == "\\pi" and "\\pi" not in g)  # `\pi \approx 3 \times 10^{-3}` where \pi names a parallax
        if symbol_named:
            p_sides = split_top(p, ["=", "\\approx"])[-1:]
        elif _ARITHMETIC.search(exact[-1]) or _COMPUTATION.search(exact[-1]) and (parse_math(exact[-1]) is None or parse_math(
                exact[-1]).is_Rational):  # `3 \times 4.99 \approx 15`, `\pi \cdot 6^2 \approx 113.1`: a computation and its rounding
            # (a sum of radicals, `\frac{\sqrt6 + \sqrt2}{4}`, is a final form; a sum of fractions, `\frac12 + \frac13`, is not)
            return _equiv("\\approx " + split_top(p, ["=", "\\approx"])[-1], g)  # its rounding, the answer stated
        elif any(not _is_label(x) for x in exact):
            p_sides = exact
        else:
            p_sides = split_top(p, ["=", "\\approx"])
    if len(p_sides) > 1 or len(g_sides) > 1:
        return _relations_equal(p_sides, g_sides)
    p = p_sides[0]
    numerals = [re.fullmatch(r"\(?([-+]?[0-9A-Za-z]+)\)?(?:_\{?\(?(\d+)\)?\}?)?", canon(x)) for x in (p, g)]
    if numerals[1] and numerals[1].group(2) or numerals[0] and numerals[0].group(2) and numerals[1]:
        # a numeral in another base compares digit by digit: 1011_2 = (1011)_2 = 1011_{(2)}; the prediction may leave
        # the base out, and two bases must agree; a plain gold whose digits are a base-b numeral may have left the
        # base out too (1011_2 = 1011; not 10110_2, and 12_2 is no numeral)
        (pd, pb), (gd, gb) = numerals[0].groups() if numerals[0] else (None, None), numerals[1].groups()
        return pd is not None and pd.upper() == gd.upper() and (pb is None or int(pb) == int(gb or pb)) \
            and _valid_numeral(pd, int(pb or gb or 10))
    return _values_equal(p, g)



def equivalent(pred, gold):
    """_equiv on raw answer texts (cleaned here); False when either does not clean or the check raises."""
    try:
        p, g = clean(pred), clean(gold)
        return p is not None and g is not None and bool(_equiv(p, g))
    except Exception:  # noqa: BLE001 -- sympy raises many kinds: unsure means not equal
        return False


@lru_cache(maxsize=4096)
def gold_is_valid(gold):
    """Can this gold answer be graded at all? Not when it is empty, longer than MAX_ANSWER_CHARS, has unbalanced
    brackets or no letter or digit, save a relation symbol alone (`<`: a blank to fill). (Golds that are not formulas,
    like `52_8` or `3:1`, still compare.)"""
    g = clean(gold)
    return g is not None and (bool(re.search(r"[A-Za-z0-9]", g)) or g.strip() in ("<", ">", "=", "≤", "≥")) and balanced(g)
