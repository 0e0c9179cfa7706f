"""Forms of one answer across mathematics that a value-by-value comparison misses (used by answer_compare.py and,
with the question, by reward.py). Each reader takes cleaned text (latex.clean) and returns None when the text is not
of its form, so answer_compare falls through to its other comparisons.

  congruence(s): (residue as written, modulus) of `x \\equiv 10 \\pmod{7}`, `3 (mod 7)`, `x = 7k + 3` (k an integer):
    classes are equal when their moduli agree and their residues are congruent; a residue equals an integer gold only
    as written (`10 \\pmod 7` is not the remainder 3).
  factorization(s): {prime: exponent} of a product of prime powers written out (`2^3 \\cdot 3^2 \\cdot 5`, `2 \\times 2 \\times
    3`); a gold so written asks for that form: `360` or `2^3 \\cdot 9 \\cdot 5` is not its answer.
  families_equal(p, g): solution families with an integer parameter (`x = \\frac{\\pi}{6} + 2k\\pi or x = \\frac{5\\pi}{6}
    + 2k\\pi`, `x = n\\pi + (-1)^n \\frac{\\pi}{6}`): the same set of reals, compared on a window of 40 periods' values.
  up_to_constant(p, g): antiderivatives with an arbitrary constant added (`-\\frac14 \\cos 2x + C`, `\\frac12 \\sin^2 x + C`)
    are equal when they differ by a constant.
  without_remainder(s): a truncated series without its remainder (`1 + x + \\frac{x^2}{2} + O(x^3)`, `... - \\cdots`).
  same_line(p_items, g_items): two parametrizations of a line or a one-parameter solution set (`(s, s - 1, 3 - s)`,
    `(1 + t, t, 2 - t)`); proportional(p_items, g_items): vectors equal up to a nonzero factor. Both only where the
    question asks for such an object (reward.py): a point that depends on t is not any point of its line.
  set_intervals(s): set-builder and complement forms as a union of intervals (`\\{x : |x| \\ge 3\\}`, `\\{x \\in R \\mid
    -2 \\le x \\le 2\\}`, `R \\setminus [-1, 3]`, `R \\setminus \\{2, -2\\}`), for answer_compare's interval comparison.
  bearings_equal(p, g): a quadrant bearing or compass point and an angle clockwise from north (`S 60° E` = `120°`,
    `NW` = `315°`, `030°` = `N 30° E`); matrix_in_prose(sentence): a matrix given by its ordered rows or columns.
  dimensions(s): the factors of a shape `8 \\times 5`, `8 m by 5 m` (compared as a multiset, never as the product).
Everything is bounded: at most 6 symbols, a fixed number of sample points, integers below 10^12 factored by trial.
"""
import random
import re
from collections import Counter
from fractions import Fraction

import sympy

from latex import parse_math

_CONSTANT = re.compile(r"^(?:[CcK](?:_\{?\w+\}?)?)$")


# ---- congruence classes -----------------------------------------------------------------------------------------
_PMOD = r"(?:\\pmod\s*\{?\s*(\d+)\s*\}?|\(\s*\\?(?:bmod|mod)\s*(\d+)\s*\)|\\?(?:bmod|mod)\s*(\d+))"


def congruence(s):
    """(residue, modulus) of a congruence class (see the module docstring), else None."""
    written = re.fullmatch(rf"\s*(?:[A-Za-z](?:_\{{?\w+\}}?)?\s*(?:\\equiv|=|\\cong)\s*)?(-?\d+)\s*(?:\\equiv\s*(-?\d+)\s*)?{_PMOD}\s*", s)
    if written:
        modulus = int(next(m for m in written.groups()[2:] if m))
        residue = int(written.group(2) or written.group(1))
        return (residue, modulus) if modulus > 0 else None
    linear = re.fullmatch(r"\s*[A-Za-z]\s*=\s*(.+)", s)
    value = parse_math(linear.group(1)) if linear else None
    if value is None or len(value.free_symbols) != 1:
        return None
    (k,) = value.free_symbols
    if k.name not in ("k", "n", "m", "t", "j"):
        return None
    try:
        poly = sympy.Poly(value, k)
    except (sympy.PolynomialError, sympy.GeneratorsNeeded, ValueError, TypeError):
        return None
    if poly.degree() != 1 or not all(c.is_Integer for c in poly.all_coeffs()):
        return None
    modulus, residue = (abs(int(c)) for c in poly.all_coeffs())
    return (int(poly.all_coeffs()[1]), modulus) if modulus > 1 else None


# ---- prime factorizations ---------------------------------------------------------------------------------------
def factorization(s):
    """{prime: exponent} of a product of two or more prime powers written out (see above), else None."""
    factors = re.split(r"\s*(?:\\cdot|\\times|\*|×)\s*", s.strip())
    if len(factors) < 2:
        return None
    found = Counter()
    for factor in factors:
        power = re.fullmatch(r"\(?(\d+)\)?(?:\s*\^\s*\{?\s*(\d+)\s*\}?)?", factor)
        if power is None or len(power.group(1)) > 12 or not sympy.isprime(int(power.group(1))):
            return None if power is None else {}
        found[int(power.group(1))] += int(power.group(2) or 1)
    return dict(found)


# ---- dimensions: `8 \\times 5` of plain numbers (no power of ten, not all primes) is a shape, not the product 40
_DIMENSION_SEP = re.compile(r"\s*(?:\\times|×|\bby\b)\s*")
_DIMENSION = re.compile(r"\s*(\d+(?:\.\d+)?)\s*(?:\\text\s*\{\s*[A-Za-z]{1,12}\s*\}|[A-Za-z]{1,12})?\s*")


def dimensions(s):
    """The sorted factors of a shape written `a \\times b (\\times c)` or `a m by b m`, or None when s is not one."""
    parts = _DIMENSION_SEP.split(s)
    if not 2 <= len(parts) <= 4 or "^" in s:
        return None
    factors = [_DIMENSION.fullmatch(part) for part in parts]
    return sorted(Fraction(f.group(1)) for f in factors) if all(factors) else None


# ---- families of solutions with an integer parameter --------------------------------------------------------------
_PARAMETERS = ("k", "n", "m", "j")


def _family(s):
    """[(expression, parameter)] of `x = ... or x = ...` with an integer parameter and pi, else None."""
    parts = [p.strip() for p in re.split(r"\s*(?:,|;|\bor\b|\band\b)\s*", s) if p.strip()]
    if not parts or len(parts) > 6:
        return None
    family = []
    for part in parts:
        part = re.sub(r"^[A-Za-z]\s*=\s*", "", part)
        value = parse_math(part)
        if value is None or not value.has(sympy.pi):
            return None
        parameters = [x for x in value.free_symbols if x.name in _PARAMETERS]
        if len(value.free_symbols) > 1 or len(parameters) > 1:
            return None
        family.append((value, parameters[0] if parameters else None))
    return family if any(p is not None for _, p in family) else None


def _members(family, low, high):
    """The members of a family in [low, high], rounded to 9 decimals: a linear family a + b k by its two numbers, another
    (`n\\pi + (-1)^n \\frac{\\pi}{6}`) term by term for |k| <= 60."""
    values = set()
    for value, parameter in family:
        if parameter is None:
            numbers = [float(sympy.N(value, 20))]
        elif not value.diff(parameter).has(parameter):  # linear: a + b k
            start, step = float(sympy.N(value.subs(parameter, 0), 20)), float(sympy.N(value.diff(parameter), 20))
            if step == 0:
                return None
            first, last = sorted(((low - start) / step, (high - start) / step))
            numbers = [start + step * k for k in range(max(-400, int(first) - 1), min(400, int(last) + 2))]
        else:
            numbers = [float(sympy.N(value.subs(parameter, k), 20)) for k in range(-60, 61)]
        values.update(round(x, 9) for x in numbers if low <= x <= high)
    return sorted(values)


def families_equal(p, g):
    """Two solution families (see the module docstring) are the same set: True/False; None when either is not one."""
    pf, gf = _family(p), _family(g)
    if pf is None or gf is None:
        return None
    try:
        window = (-20 * float(sympy.pi), 20 * float(sympy.pi))
        members = _members(pf, *window), _members(gf, *window)
        return None not in members and members[0] == members[1]
    except (TypeError, ValueError, OverflowError):
        return False


# ---- antiderivatives, series ----------------------------------------------------------------------------------------
def up_to_constant(p, g):
    """Parsed answers that each add an arbitrary constant (C, c, K, C_1): equal when p - g is constant at sample points.
    None when either has no such constant."""
    constants = [{x for x in e.free_symbols if _CONSTANT.match(x.name) and e.diff(x) == 1} for e in (p, g)]
    if not all(constants):
        return None  # (a constant that multiplies a term, `C_1 \cos 2t`, is a coefficient of a general solution)
    p, g = (e.subs({c: 0 for c in cs}) for e, cs in zip((p, g), constants))
    symbols = sorted(p.free_symbols | g.free_symbols, key=str)
    if len(symbols) > 3 or p.free_symbols != g.free_symbols:
        return False
    rng, differences = random.Random(2), []
    for _ in range(12):
        point = {x: sympy.Rational(rng.randint(1, 40), rng.randint(2, 9)) for x in symbols}
        try:
            difference = complex(sympy.N((p - g).subs(point), 30))
        except (TypeError, ValueError, ZeroDivisionError):
            continue
        if difference == difference and abs(difference.imag) < 1e-12:  # (a real value where both are defined)
            differences.append(difference.real)
        if len(differences) == 5:
            break
    return len(differences) >= 3 and max(differences) - min(differences) < 1e-9 * max(1.0, abs(differences[0]))


_REMAINDER = re.compile(r"\s*[-+]\s*(?:(?:\\mathcal\s*\{?\s*O\s*\}?|O|o)\s*\([^()]*(?:\([^()]*\)[^()]*)*\)|\\[lc]?dots|\.\.\.)\s*$")


def without_remainder(s):
    """A series without its remainder term or trailing dots (see the module docstring); s itself when it has none."""
    return _REMAINDER.sub("", s) if _REMAINDER.search(s) else s


# ---- parametrized lines, vectors up to scale ------------------------------------------------------------------------
def _affine(items):
    """(base, direction) vectors of tuple entries affine in one common parameter, else None."""
    values = [parse_math(x) for x in items]
    if None in values:
        return None
    symbols = set().union(*(v.free_symbols for v in values))
    if len(symbols) != 1:
        return None
    (t,) = symbols
    try:
        if any(sympy.Poly(v, t).degree() > 1 for v in values if v.has(t)):
            return None
    except (sympy.PolynomialError, ValueError, TypeError):
        return None
    base = sympy.Matrix([v.subs(t, 0) for v in values])
    direction = sympy.Matrix([v.diff(t) for v in values])
    return (base, direction) if any(direction) else None


def _parallel(a, b):
    return sympy.Matrix.hstack(a, b).rank() <= 1


def same_line(p_items, g_items):
    """Two parametrizations of one line (see the module docstring): True/False; None when either is not one."""
    if len(p_items) != len(g_items):
        return None
    pa, ga = _affine(p_items), _affine(g_items)
    if pa is None or ga is None:
        return None
    return _parallel(pa[1], ga[1]) and _parallel(pa[0] - ga[0], ga[1])


def proportional(p_items, g_items):
    """Vectors of numbers equal up to a nonzero factor: True/False; None when either is not a vector of numbers."""
    if len(p_items) != len(g_items) or len(g_items) < 2:
        return None
    values = [parse_math(x) for x in list(p_items) + list(g_items)]
    if None in values or any(v.free_symbols for v in values):
        return None
    p, g = sympy.Matrix(values[:len(p_items)]), sympy.Matrix(values[len(p_items):])
    return bool(any(p) and any(g) and _parallel(p, g))


# ---- set-builder and complements as intervals ------------------------------------------------------------------------
_REALS = r"(?:\\mathbb\s*\{?\s*R\s*\}?|\\R(?![a-zA-Z])|R)"


def set_intervals(s):
    """A set written by a condition or as a complement of the reals, as text of a union of intervals (or of the
    inequality it states), else None."""
    builder = re.fullmatch(rf"\s*\\?\{{\s*([a-z])\s*(?:\\in\s*{_REALS}\s*)?(?:\\mid|\||:)\s*(.+?)\s*\\?\}}\s*", s)
    if builder:
        return builder.group(2)
    complement = re.fullmatch(rf"\s*(?:[a-z]\s*\\in\s*)?{_REALS}\s*(?:\\setminus|\\backslash|-)\s*(.+?)\s*", s)
    if complement is None:
        return None
    removed = complement.group(1)
    interval = re.fullmatch(r"([\[(])\s*([^,]+?)\s*,\s*([^,]+?)\s*([\])])", removed)
    if interval:
        left = "]" if interval.group(1) == "(" else ")"
        right = "[" if interval.group(4) == ")" else "("
        return f"(-\\infty, {interval.group(2)}{left} \\cup {right}{interval.group(3)}, \\infty)"
    points = re.fullmatch(r"\\?\{\s*(.+?)\s*\\?\}", removed)
    values = [(x, parse_math(x)) for x in re.split(r"\s*,\s*", points.group(1))] if points else []
    if not values or len(values) > 8 or any(v is None or v.free_symbols or not v.is_real for _, v in values):
        return None
    ordered = [x for x, _ in sorted(values, key=lambda xv: float(xv[1]))]
    bounds = ["-\\infty"] + ordered + ["\\infty"]
    return " \\cup ".join(f"({a}, {b})" for a, b in zip(bounds, bounds[1:]))


# ---- bearings: a quadrant bearing (`N 30° E`, `S 45° W`) or a compass point (NW, SSE) is an angle clockwise from north
_ANGLE = r"\(?\s*(\d+(?:\.\d+)?)\s*(?:\\cdot\s*\\frac\{\\pi\}\{180\}\s*\)|deg\b|\^\s*\{?\\circ\}?)?"
_QUADRANT = re.compile(r"(?:bearing\s*(?:=|:|of)?\s*)?([NS])\s*" + _ANGLE + r"\s*([EW])", re.I)
_POINTS = ["N", "NNE", "NE", "ENE", "E", "ESE", "SE", "SSE", "S", "SSW", "SW", "WSW", "W", "WNW", "NW", "NNW"]
_THREE_FIGURES = re.compile(r"(?:bearing\s*(?:=|:|of)?\s*)?" + _ANGLE, re.I)


def bearing(s):
    """Degrees clockwise from north of a cleaned quadrant bearing or compass point (`S (60\\cdot\\frac{\\pi}{180}) E` ->
    120, `NW` -> 315), else None."""
    due = re.match(r"due\s+", s.strip(), re.I)
    s = s.strip().rstrip(".")[due.end() if due else 0:]
    quadrant = _QUADRANT.fullmatch(s)
    if quadrant:
        start, angle, toward = quadrant.group(1).upper(), Fraction(quadrant.group(2)), quadrant.group(3).upper()
        if angle > 90:
            return None
        return {("N", "E"): angle, ("S", "E"): 180 - angle, ("S", "W"): 180 + angle, ("N", "W"): (360 - angle) % 360}[start, toward]
    # (a single letter is a compass point only after "due": `E` alone is an option letter)
    return Fraction(_POINTS.index(s) * 45, 2) if s in _POINTS and (len(s) > 1 or due) else None


def bearings_equal(p, g):
    """None unless one side is a bearing in compass notation; else both name one direction (the other side may be a
    three-figure bearing in degrees: `030°`, `225`)."""
    pb, gb = bearing(p), bearing(g)
    if pb is None and gb is None:
        return None
    values = [b if b is not None else (Fraction(m.group(1)) if (m := _THREE_FIGURES.fullmatch(x.strip())) else None)
              for x, b in ((p, pb), (g, gb))]
    return None not in values and values[0] % 360 == values[1] % 360


# ---- objects described in prose: a matrix by its rows or columns; a quadrant bearing a sentence ends on
_LINE_ORDINALS = {"first": 1, "1st": 1, "top": 1, "second": 2, "2nd": 2, "third": 3, "3rd": 3, "fourth": 4, "4th": 4}
_TUPLE = r"\$?\(([^()$]*)\)\$?"
_WORDS_OR_NAME = r"(?:[^()$\d.;]|\$[A-Za-z^{}\s]{1,12}\$)"  # (a matrix's name in math: "the first row of $AB$ is")
_NAMED_LINE = re.compile(r"\b(" + "|".join(_LINE_ORDINALS) + r"|middle|bottom|last)\s+(row|column)\b" + _WORDS_OR_NAME + "{0,40}?"
                         + _TUPLE, re.I)
_LINES_LISTED = re.compile(r"\b(rows|columns)\b[^()$\d.;]{0,8}(?:are|:)" + _WORDS_OR_NAME + r"{0,40}?((?:" + _TUPLE
                           + r"\s*(?:,\s*(?:and\s+)?|and\s+)?){2,})", re.I)


def matrix_in_prose(sentence):
    """A matrix a sentence gives by its rows or its columns, each a tuple: named in order ("the first row is (2, 1) and
    the second row is (4, 3)", "first column (2, 4) and second column (1, 3)"; top, middle, bottom, last) or listed
    ("its rows are (1, 4), (2, 5), (3, 6)"), as `\\begin{pmatrix}`; else None."""
    named = list(_NAMED_LINE.finditer(sentence)) if re.search(r"\b(?:row|column)s?\b", sentence, re.I) else []
    if len(named) >= 2:
        kinds = {m.group(2).lower() for m in named}
        order = [_LINE_ORDINALS.get(m.group(1).lower(), {"middle": 2}.get(m.group(1).lower(), len(named))) for m in named]
        if len(kinds) > 1 or order != list(range(1, len(named) + 1)):
            return None
        kind, lines = kinds.pop(), [m.group(3) for m in named]
    else:
        listed = _LINES_LISTED.search(sentence) if named == [] and re.search(r"\b(?:rows|columns)\b", sentence, re.I) else None
        if not listed:
            return None
        kind, lines = listed.group(1).lower().rstrip("s"), re.findall(_TUPLE, listed.group(2))
    entries = [[x.strip() for x in line.split(",")] for line in lines]
    if len({len(e) for e in entries}) != 1 or len(entries[0]) < 2 or not all(x for e in entries for x in e):
        return None
    if kind == "column":
        entries = [list(row) for row in zip(*entries)]
    return "\\begin{pmatrix}" + " \\\\ ".join(" & ".join(row) for row in entries) + "\\end{pmatrix}"


QUADRANT_IN_PROSE = re.compile(r"(?<![\w$])\$?([NS]\s*\d+(?:\.\d+)?\s*(?:°|\^\s*\{?\\circ\}?|degrees?)\s*[EW])\$?(?!\w)[*_]*\s*[.!]?\s*$")


# ---- general solutions: families of functions with arbitrary constants, in any parametrization
_GOLD_CONSTANT = re.compile(r"[Cc](?:_\{?\d+\}?|\d)?$")


def constant_families_equal(p, g):
    """None unless the gold is a function of x or t linear in arbitrary constants named C (`C_1 \\cos x + C_2 \\sin x`,
    an ODE's general solution); else whether the prediction, with as many constants of its own, is the same family:
    each of its members (at random constants) is a member of the gold's (a least-squares fit of the C's at sample points
    leaves no residual) and it has as many independent directions (`A \\sin(x + \\varphi)`, `A \\cosh x + B \\sinh x` for
    `C_1 e^x + C_2 e^{-x}`; not `A \\cos x`, nor `A \\cos x + B \\cos x`)."""
    import numpy as np
    sides = [x.split("=")[-1] for x in (p, g)]
    pe, ge = parse_math(sides[0]), parse_math(sides[1])
    if pe is None or ge is None:
        return None
    variables = [v for v in ge.free_symbols if str(v) in ("x", "t")]
    constants = sorted((c for c in ge.free_symbols if _GOLD_CONSTANT.match(str(c))), key=str)
    if len(variables) != 1 or not constants or len(constants) + 1 != len(ge.free_symbols) or len(constants) > 4:
        return None
    var = variables[0]
    own = sorted(pe.free_symbols - {var}, key=str)
    if var not in pe.free_symbols or len(own) != len(constants):
        return False
    if set(map(str, own)) == set(map(str, constants)):
        return None  # the gold's own names: compared as written (C_1 is the gold's C_1)
    if any(sympy.diff(ge, a, b) != 0 for a in constants for b in constants):
        return None  # (not linear in its constants)
    points = [0.35 + 0.29 * k for k in range(9)]
    try:
        basis = [sympy.lambdify(var, sympy.diff(ge, c), "math") for c in constants]
        offset = sympy.lambdify(var, ge.subs({c: 0 for c in constants}), "math")
        pred = sympy.lambdify([var] + own, pe, "math")
        matrix = np.array([[float(f(x)) for f in basis] for x in points])
        rng = random.Random(7)
        samples = [[rng.uniform(0.6, 1.9) for _ in own] for _ in range(3)]
        for values in samples:
            target = np.array([float(pred(x, *values)) - float(offset(x)) for x in points])
            fit, *_ = np.linalg.lstsq(matrix, target, rcond=None)
            if np.max(np.abs(matrix @ fit - target)) > 1e-7 * (1 + np.max(np.abs(target))):
                return False
        h = 1e-6  # independent directions: the rank of the prediction's derivative in its constants
        jacobian = np.array([[(float(pred(x, *[v + h * (i == k) for i, v in enumerate(samples[0])])) - float(pred(x, *samples[0]))) / h
                              for k in range(len(own))] for x in points])
        return int(np.linalg.matrix_rank(jacobian, tol=1e-4)) == len(constants)
    except (TypeError, ValueError, OverflowError, ZeroDivisionError):
        return None

