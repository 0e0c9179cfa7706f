r"""The text of one value -> canonical LaTeX -> sympy (used by the grader's stages 2 and 3; see reward.py).

`plain_unicode(text)`: the digits, separators and punctuation of any script as ASCII, read through the Unicode database
(Arabic-Indic, Persian, Devanagari, Bengali, full-width digits; ٫ ٬ ٪; 。 ， ： ؟ ।; currency signs as `¤`).
`clean(text)`: the canonical text of an answer: delimiters, LaTeX spacing and sizing, text commands, degree signs,
digit groups (`1,234`, the Indian `12,34,567`, `13 983 816`), currency signs and ordinals gone; percent signs as `%`;
Unicode mathematics (`½`, `π`, Greek letters by name, `×`, `≈`, `ᵀ`, superscripts `10⁶`, subscripts `x₁`, plain `sin`,
`log`) as LaTeX, a Unicode root over the whole number after it (`√27` is \sqrt{27}); repeat marks as fractions
(`0.(3)`, `0.\overline{3}`, `0.\dot{3}`, `0.333...`; a decimal trailing off without a period shown is `0.2857\ldots`);
numbers in words and with scale words ("two hundred", "4 million", "3 lakh", "two dozen", "a quarter million") as
numerals; whole answers written as a weekday, a date, a ratio in words or labelled parts in one canonical form.
`split_unit(text)`: a value and its trailing unit words ('5 cm' -> ('5', 'cm')).
`parse_math(text)`: a small recursive-descent parser that builds the sympy tree itself. Untrusted model text is
never evaluated: no `eval`, `sympify` or `parse_expr` (which run Python). It takes the cleaned text of one value and
returns a sympy expression, or None when the text is not a formula this parser reads.

Accepts (grammar in `_Parser`): integers and decimals (decimals become exact rationals), letters and Greek letters
as symbols (`e` is Euler's number and `i` the imaginary unit unless subscripted), `\pi`, `\infty` (alone or
negated only), + - * / ^ !, implicit products (`2x`, `2\pi r`, `x(y+1)`), `\frac`, `\sqrt[n]{}`, `\binom`, `\log_b`,
trigonometric/hyperbolic functions with `\sin^2 x` and `\sin^{-1} x` = arcsin, `|x|`, floor and ceiling, `\max`/`\min`, `\sgn`,
accents (`\bar x` is a name), primes (`f'`) and unknown commands (`\star`) as opaque names. Runs of 3+ letters
that read as English words (`is not`) are refused, so a sentence never becomes a product of variables.

Guards (each refuses with ParseError, so the text does not parse; every step stays cheap):
  integer literals longer than MAX_INT_DIGITS; b^e and n! whose result would exceed MAX_RESULT_BITS (power towers,
  1000000!); functions of constants beyond MAX_FUNCTION_ARG (`\sin(10^{100})`); nesting deeper than MAX_DEPTH;
  symbolic powers above MAX_SYMBOLIC_POWER (`x^{10^6}`); undefined values (0^0, 1/0, oo - oo, 1/oo, nan).
  Two numbers side by side (`1 2`, what `1 \quad 2` cleans to) are two values, never a product.
"""
import math
import re
import unicodedata
from fractions import Fraction
from functools import lru_cache

import sympy

from syntaxes import as_latex
from numerals import (DENOMINATORS, DIGIT_MARKS, FRACTION_WORDS, GROUPED_DIGITS, NUMBER_WORDS, base_numerals, degrees_minutes_seconds,
                      number_words, plain_unicode, repeating_decimals, scaled_numbers)

MAX_INT_DIGITS = 400         # integer literals longer than this are refused
MAX_RESULT_BITS = 20_000     # refuse to compute b**e (and n!) past ~6000 decimal digits
MAX_FUNCTION_ARG = 1e6       # sin(x), exp(x), ... of a constant |x| beyond this are refused (sin(10^100))
MAX_DEPTH = 60               # nesting depth of the expression parser
MAX_SYMBOLIC_POWER = 1000    # x^{1001}, 2^{1001 x}: refused (evaluating them at sample points is unbounded work)
MAX_SPECIAL_ARG = 170       # \Gamma and \zeta of a constant |x| beyond this are refused
MAX_TERMS = 200              # \sum / \prod with integer bounds further apart than this are refused
MAX_ANSWER_CHARS = 1000      # longer "answers" are not answers


class ParseError(Exception):
    pass


_NUMERAL = re.compile(r"\d+\.?\d*|\.\d+")
_TOKEN = re.compile(r"\s*(\d+\.\d*|\.\d+|\d+|\\[a-zA-Z]+|\\[{}|]|[A-Za-z]|[-+*/^_!()\[\]{}|,'=])")
_FUNCS = {"arccot": sympy.acot, "arcsec": sympy.asec, "arccsc": sympy.acsc, "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "cot": sympy.cot, "sec": sympy.sec,
          "csc": sympy.csc, "arcsin": sympy.asin, "arccos": sympy.acos, "arctan": sympy.atan, "sinh": sympy.sinh,
          "cosh": sympy.cosh, "tanh": sympy.tanh, "arsinh": sympy.asinh, "arcsinh": sympy.asinh, "arcosh": sympy.acosh,
          "arccosh": sympy.acosh, "artanh": sympy.atanh, "arctanh": sympy.atanh, "ln": sympy.log, "exp": sympy.exp, "sgn": sympy.sign}
_INVERSE = {"sin": sympy.asin, "cos": sympy.acos, "tan": sympy.atan, "cot": sympy.acot, "sec": sympy.asec,
            "csc": sympy.acsc, "sinh": sympy.asinh, "cosh": sympy.acosh, "tanh": sympy.atanh}
_GREEK = ("alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta", "iota",
          "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon", "phi", "varphi", "chi", "psi",
          "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Phi", "Psi", "Omega", "ell", "hbar")
_ACCENTS = ("bar", "hat", "vec", "dot", "ddot", "tilde", "overline", "widehat", "widetilde", "overrightarrow")
_KNOWN_COMMANDS = set(_FUNCS) | set(_GREEK) | set(_ACCENTS) | {
    "frac", "sqrt", "binom", "pi", "infty", "log", "cdot", "times", "div", "lfloor", "rfloor", "lceil", "rceil",
    "angle", "triangle", "{", "}", "|", "sum", "prod", "max", "min"}


_STRUCTURAL = {"begin", "end", "approx", "sim", "simeq", "cong", "equiv", "to", "rightarrow", "Rightarrow",
               "implies", "iff", "cup", "cap", "in", "notin", "subset", "subseteq", "mid", "pm", "mp", "le", "ge",
               "ne", "dots", "ldots", "cdots", "quad", "qquad", "text", "choose", "over", "mod", "pmod", "bmod",
               # operators that do not commute: read as a product of names, `B \setminus A` would equal `A \setminus B`
               "setminus", "backslash", "circ", "wedge", "vee", "land", "lor", "oplus", "ominus", "otimes", "mapsto",
               "leftrightarrow", "Leftrightarrow", "supset", "supseteq", "subsetneq", "perp", "parallel", "neg", "lnot"}


def _tokenize(s):
    tokens, pos = [], 0
    s = s.rstrip()
    while pos < len(s):
        match = _TOKEN.match(s, pos)
        if not match:
            raise ParseError(f"unexpected character {s[pos]!r}")
        token = match.group(1)
        if token.startswith("\\") and token[1:] not in _KNOWN_COMMANDS:
            # a Greek letter run into the next symbol (`\omegat` for `\omega t`), else an unknown command
            head = next((g for g in sorted(_GREEK, key=len, reverse=True) if token[1:].startswith(g)), None)
            if head is None:
                if token[1:] in _STRUCTURAL:
                    raise ParseError(f"unsupported command {token!r}")
                tokens.append(token)  # an unknown command (\odot, \star) is an opaque name: see atom()
            else:
                tokens.append("\\" + head)
                tokens.extend(token[1 + len(head):])
        else:
            tokens.append(token)
        pos = match.end()
    return tokens


def _magnitude_bits(expr):
    """log2 |expr| of a constant (None when it cannot be estimated cheaply)."""
    try:
        value = complex(expr.evalf(15))
    except (TypeError, ValueError, OverflowError, ZeroDivisionError, AttributeError):
        return None
    if not all(math.isfinite(x) for x in (value.real, value.imag)):
        return None
    return math.log2(abs(value)) if value else -math.inf


def is_infinite(x):
    return x.has(sympy.oo, -sympy.oo, sympy.zoo)


def _safe_pow(base, exp):
    """base**exp, refusing what is undefined (0^0, inf^0) or too large to compute (9^{9^{9^9}}, e^{e^{e^5}})."""
    if is_infinite(base) or is_infinite(exp):
        raise ParseError("power of infinity")
    if base == 0 and (exp == 0 or (exp.is_number and exp.is_negative)):
        raise ParseError("0^0 or 1/0")
    if base.is_number and exp.is_number:
        if exp.is_Rational and base.is_Rational and base != 0:
            size = max(abs(base.p), abs(base.q))
            if size > 1 and abs(exp) * math.log2(size) > MAX_RESULT_BITS:
                raise ParseError("number too large")
        else:
            bits = _magnitude_bits(base)
            exp_bits = _magnitude_bits(exp)
            if bits is None or exp_bits is None or (exp_bits > 0 and 2.0 ** min(exp_bits, 1e4) * max(abs(bits), 1) > MAX_RESULT_BITS):
                raise ParseError("number too large")
    elif exp.is_number and exp.is_Rational and abs(exp) > MAX_RESULT_BITS:
        raise ParseError("exponent too large")
    return sympy.Pow(base, exp)


def _polynomial_in(expr, x):
    """expr is a polynomial of small degree in x (its sum over a range has a cheap closed form)."""
    try:
        return sympy.Poly(expr, x).degree() <= 6
    except (sympy.PolynomialError, sympy.GeneratorsNeeded, ValueError, TypeError):
        return False


def _small_linear(expr):
    """d, d - k, 2n + 1: a linear polynomial in symbols with small integer coefficients (a factorial of it is safe to
    evaluate at the sample points)."""
    if not expr.free_symbols or expr.is_number:
        return False
    try:
        poly = sympy.Poly(expr, *sorted(expr.free_symbols, key=str))
    except (sympy.PolynomialError, sympy.GeneratorsNeeded, ValueError, TypeError):
        return False
    return poly.total_degree() <= 1 and all(c.is_Integer and abs(c) <= 100 for c in poly.coeffs())


def _checked(value):
    """Refuse undefined results (1/oo, oo - oo, nan), and powers of symbols too large to evaluate at sample points."""
    if value.has(sympy.nan, sympy.zoo):
        raise ParseError("undefined")
    if value.free_symbols:
        for power in value.atoms(sympy.Pow):
            if power.exp.free_symbols:     # 10^{10^9 x}: every number in the exponent (and the base) stays small
                numbers = [abs(n) for n in power.exp.atoms(sympy.Number)]
                base_bits = _magnitude_bits(power.base) if power.base.is_number else 0
                if max(numbers, default=0) > MAX_SYMBOLIC_POWER or base_bits is None or base_bits > 64:
                    raise ParseError("symbolic exponent too large")
            elif power.exp.is_number and abs(power.exp) > MAX_SYMBOLIC_POWER:
                raise ParseError("power of a symbol too large")
    return value


class _Parser:
    """Recursive descent over the token list. Grammar (loosest binding first):
        expr   := ['+'|'-'] term (('+'|'-') term)*
        term   := unary (('*' | '/' | \\cdot | \\times | \\div | implicit) unary)*
        unary  := '-' unary | power
        power  := postfix ['^' unary]            (right-associative)
        postfix:= atom ['!' | "'"]*  [_ subscript]
        atom   := number | letter | \\greek | \\pi | \\infty | \\frac{}{} | \\sqrt[n]{} | \\binom{}{} | \\accent{x}
                  | \\func[^p] arg | (expr) | {expr} | [expr] | |expr| | \\lfloor expr \\rfloor | \\lceil expr \\rceil
    Infinity is allowed only alone or negated: any arithmetic with it is refused (1/oo, oo-oo, oo^0).
    """

    def __init__(self, text):
        self.tokens = _tokenize(text)
        self.pos = 0
        self.depth = 0
        self.symbols_seen = False
        self.infinity_seen = False
        self.bound = []  # summation indices in scope: letters, never e or i
        self.bars = 0    # absolute values open: outside them a `|` after a factor opens one (`x|x|`), inside it closes

    def parse(self):
        if not self.tokens:
            raise ParseError("empty")
        value = self.expr()
        if self.pos != len(self.tokens):
            raise ParseError(f"unexpected {self.tokens[self.pos]!r}")
        if self.infinity_seen and value not in (sympy.oo, -sympy.oo):
            raise ParseError("arithmetic with infinity")
        return _checked(value)  # also catches x^{1000} * x^{1000}

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

    _ATOM_START = re.compile(r"\d|\.\d|[A-Za-z]$|\\(?!cdot$|times$|div$|rfloor$|rceil$)[a-zA-Z]+|[({\[]|\\\{")

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
            elif token is not None and (self._ATOM_START.match(token) or token == "|" and self.bars == 0):
                if _NUMERAL.fullmatch(token) and _NUMERAL.fullmatch(self.tokens[self.pos - 1]):
                    raise ParseError("two numbers side by side")  # `1 \quad 2` lists two values; it is not 1*2
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
            return _checked(_safe_pow(base, exponent))
        return base

    def postfix(self):
        value = self.nested(self.atom)
        while self.peek() in ("!", "'"):
            if self.take() == "'":
                if not value.is_Symbol:
                    raise ParseError("prime of a non-symbol")
                value = sympy.Symbol(value.name + "'")
                continue
            if not ((value.is_Integer and 0 <= value <= 500) or _small_linear(value)):
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
            return sympy.Rational(int(integer or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac))
        if len(token) > MAX_INT_DIGITS:
            raise ParseError("number too long")
        return sympy.Integer(token)

    def delimited(self, closer):
        value = self.nested(self.expr)
        self.take(closer)
        return value

    def atom(self):
        token = self.take()
        if re.fullmatch(r"\d+\.?\d*|\.\d+", token):
            return self.number(token)
        if re.fullmatch(r"[A-Za-z]", token):
            return self.symbol(token)
        if token in ("(", "[", "{"):
            return self.delimited({"(": ")", "[": "]", "{": "}"}[token])
        if token == "|":
            self.bars += 1
            try:
                return sympy.Abs(self.delimited("|"))
            finally:
                self.bars -= 1
        name = token[1:] if token.startswith("\\") else None
        if name == "lfloor":
            return sympy.floor(self.delimited("\\rfloor"))
        if name == "lceil":
            return sympy.ceiling(self.delimited("\\rceil"))
        if name == "frac":
            num = self.group()
            den = self.group()
            if den == 0:
                raise ParseError("division by zero")
            return _checked(num / den)
        if name == "sqrt":
            index = sympy.Integer(2)
            if self.peek() == "[":
                self.take("[")
                index = self.delimited("]")
            if index == 0:
                raise ParseError("zeroth root")
            return _safe_pow(self.group(), 1 / index)
        if name == "binom":
            n, k = self.group(), self.group()
            if k.is_Integer and 0 <= k <= 20 and n.free_symbols and not n.is_number:
                return sympy.expand_func(sympy.binomial(n, k))          # \binom{n}{2} = n(n-1)/2
            if not (n.is_Integer and k.is_Integer and 0 <= n <= 10_000):
                raise ParseError("binomial arguments")
            return sympy.binomial(n, k)
        if name in ("sum", "prod"):
            return self.big_operator(name)
        if name in ("max", "min"):  # \max(a, b, ...)
            self.take("(")
            args = [self.nested(self.expr)]
            while self.peek() == ",":
                self.take(",")
                args.append(self.nested(self.expr))
            self.take(")")
            return (sympy.Max if name == "max" else sympy.Min)(*args)
        if name == "pi":
            return sympy.pi
        if name == "infty":
            self.infinity_seen = True
            return sympy.oo
        if name in ("Gamma", "zeta") and self.peek() == "(":  # \Gamma(5) = 24, \Gamma(1/2) = \sqrt\pi, \zeta(2) = \pi^2/6
            arg = self.func_arg()
            if not (arg.is_number and arg.is_real) or abs(arg) > MAX_SPECIAL_ARG or (arg <= 0 and arg.is_integer) or arg == 1:
                raise ParseError("special function outside its bounded domain")
            return _checked(sympy.gamma(arg) if name == "Gamma" else sympy.zeta(arg))
        if name in _GREEK:
            return self.symbol(name)
        if name in _ACCENTS:  # \bar{x}, \dot{x}_0, \vec{v}, \overline{AB}: a name of its own
            inner = self.group()
            return self.symbol(f"{name}({inner})")
        if name == "angle":
            return self.symbol("angle" + str(self.nested(self.power)))
        if name == "log":
            base = None
            if self.peek() == "_":
                self.take()
                base = self.group()
            arg = self.func_arg()
            if arg == 0 or (base is not None and base in (0, 1)):
                raise ParseError("log of 0 or to base 0/1")
            return _checked(sympy.log(arg, base) if base is not None else sympy.log(arg))
        if name is not None and name not in _KNOWN_COMMANDS:
            return self.symbol(name)
        if name in _FUNCS:
            exponent = None
            if self.peek() == "^":  # \sin^2 x
                self.take()
                exponent = self.group()
            function = _FUNCS[name]
            if exponent == -1 and name in _INVERSE:  # \sin^{-1} x is arcsin x, not 1/sin x
                function, exponent = _INVERSE[name], None
            arg = self.func_arg()
            if arg.is_number:
                bits = _magnitude_bits(arg)
                if bits is None or bits > math.log2(MAX_FUNCTION_ARG):
                    raise ParseError("function of a huge argument")
            value = _checked(function(arg))
            return _safe_pow(value, exponent) if exponent is not None else value
        raise ParseError(f"unsupported token {token!r}")

    def big_operator(self, name):
        """\\sum_{k=a}^{b} body, \\prod_{k=a}^{b} body: the body is the product that follows (`\\sum_k a_k b_k + 1`
        sums a_k b_k), and in it the index is a variable (`i` is not the imaginary unit). Integer bounds at most
        MAX_TERMS apart are computed (`a_k` becomes a_1, a_2, ...); a polynomial body in the index is summed in closed
        form; anything else (`F_{n-k-1}`, symbolic bounds) stays an unevaluated Sum/Product, compared by its
        structure."""
        self.take("_")
        self.take("{")
        index = self.take()
        if not re.fullmatch(r"[A-Za-z]", index):
            raise ParseError("summation index")
        self.take("=")
        lower = self.nested(self.expr)
        self.take("}")
        self.take("^")
        upper = self.group()
        seen = self.symbols_seen
        self.bound.append(index)
        try:
            body = self.nested(self.term)
        finally:
            self.bound.pop()
        k = sympy.Symbol(index)
        indexed = [s for s in body.free_symbols if "_" in s.name and index in re.split(r"[^A-Za-z]+", s.name.split("_", 1)[1])]
        if lower.is_Integer and upper.is_Integer and 0 <= upper - lower <= MAX_TERMS:
            if any(s.name.split("_", 1)[1] != index for s in indexed):
                value = (sympy.Sum if name == "sum" else sympy.Product)(body, (k, lower, upper))
            else:
                terms = [body.subs({k: j, **{s: sympy.Symbol(s.name.split("_")[0] + f"_{j}") for s in indexed}},
                                   simultaneous=True) for j in range(int(lower), int(upper) + 1)]
                value = sympy.Add(*terms) if name == "sum" else sympy.Mul(*terms)
        elif lower.is_Integer and upper.is_Integer:
            raise ParseError("too many terms")
        elif name == "sum" and not indexed and _polynomial_in(body, k):
            value = sympy.expand(sympy.summation(body, (k, lower, upper)))
        else:
            value = (sympy.Sum if name == "sum" else sympy.Product)(body, (k, lower, upper))
        if not value.free_symbols:
            self.symbols_seen = seen  # the index is bound: `\\sum_{k=1}^{10} k` is the number 55
        return _checked(value)

    def func_arg(self):
        """\\sin(x+1), \\sin x, and by convention \\sin 2x = sin(2x): without brackets the argument is the implicit
        product of the atoms that follow, up to an operator or the next function (\\sin x \\cos x)."""
        if self.peek() in ("(", "{", "["):
            return self.nested(self.atom)
        value = self.nested(self.power)
        while True:
            token = self.peek()
            if token is None or not self._ATOM_START.match(token) or token in ("(", "[") \
                    or (token.startswith("\\") and (token[1:] in _FUNCS or token[1:] in ("log", "frac", "sqrt"))):
                return value
            value = value * self.nested(self.power)

    def symbol(self, name):
        if name == "e" and self.peek() != "_" and name not in self.bound:
            return sympy.E
        if name == "i" and self.peek() != "_" and name not in self.bound:
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


_COMMON_WORDS = set("""the and not are was but for has had its may can one two six ten yes all any who why how see
set say use way get got let lot off old our out own per put too top try yet you she her him his man men new now day
end far few odd sum max min mod gcd lcm arc deg rad sec cis""".split())


def is_english(run):
    """A run of letters that is a word rather than a product of variables: 4+ lowercase letters, or a common
    3-letter word (`LCs`, `abc`, `xyz` stay products)."""
    word = run[0].lower() + run[1:]  # "Answer" is a word too
    return word.islower() and (len(run) >= 4 or word in _COMMON_WORDS)


@lru_cache(maxsize=8192)
def parse_math(text):
    """Cleaned text -> sympy expression, or None when it is not a formula we
    read. Words (3+ letters in a row outside a command) are not formulas: `is not` must not become i*s*n*o*t."""
    if any(is_english(w) for w in re.findall(r"(?<![\\a-zA-Z])[a-zA-Z]{3,}", text)):
        return None
    try:
        parser = _Parser(text)
        value = parser.parse()
    except (ParseError, RecursionError, ValueError, TypeError, ZeroDivisionError, OverflowError, AttributeError):
        return None
    if parser.symbols_seen and not value.free_symbols:
        return None  # letters that vanished: `I(0)` read as I*0 = 0 is a function value, not the number 0
    return value


# ------------------------------------------------------------------------------------------------------------
# Cleaning: answer text -> canonical LaTeX-ish text (pure string work, before parse_math)
# ------------------------------------------------------------------------------------------------------------
def braced(text, start, limit=MAX_ANSWER_CHARS + 2):
    """(content, end) of the brace group opening at text[start] == '{', or None if it does not close within
    `limit` characters (so that a response of a million `\\boxed{` costs linear time, not quadratic)."""
    depth = 0
    stop = min(len(text), start + limit)
    pos = start
    while pos < stop:
        ch = text[pos]
        if ch == "\\":
            pos += 2  # \{ \} and any other escaped character
            continue
        if ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1:pos], pos + 1
        pos += 1
    return None





ROUNDING_NOTE = re.compile(r"\s*[,(]?\s*\b(?:(?:which\s+|when\s+)?(?:correct(?:ly)?|rounded|accurate)\s+to|to|(?<=\()\s*)\s*(?:the\s+nearest\s+\w+|"
                            r"(?:\d+|one|two|three|four|five|six)\s+(?:s\.?\s*f\.?|d\.?\s*p\.?|sig(?:nificant)?\.?\s*(?:fig(?:ure)?s?|digits?)|"
                            r"decimal\s+(?:places?|digits?)|dp|sf)(?![A-Za-z]))\s*\)?", re.IGNORECASE)


_UNICODE = {"–": "-", "—": "-", "π": "\\pi ", "∞": "\\infty ", "√": "\\sqrt", "×": "\\times ", "·": "\\cdot ",
            "÷": "\\div ", "≤": "\\le ", "≥": "\\ge ", "≠": "\\ne ", "∪": "\\cup ", "∩": "\\cap ", "°": "^\\circ ", "¤": " ",
            "′": "'", "\u00a0": " ", "\u2009": " ", "\u202f": " ", "∈": "\\in ", "±": "\\pm ", "∅": "\\emptyset ",
            "€": " ", "£": " ", "¥": " ", "\\pounds": " ", "\\euro": " ", "\\texteuro": " ", "≈": "\\approx ", "≃": "\\approx ",
            "⋅": "\\cdot ", "∗": "*", "→": "\\to ", "⇒": "\\Rightarrow ", "ℝ": "\\mathbb{R}", "ℤ": "\\mathbb{Z}", "ℕ": "\\mathbb{N}", "ℚ": "\\mathbb{Q}", "∠": "\\angle ", "ᵀ": "^T",
            "∣": "|", "″": "''", "∖": "\\setminus ", "↦": "\\mapsto "}
_TEXT_CMDS = r"\\(?:text|textbf|textit|textrm|textsf|texttt|textnormal|mbox|hbox|mathrm|mathbf|mathit|mathsf|mathtt|" \
             r"mathnormal|operatorname\*?|boldsymbol|bm|pmb|mathbfit|textup|textsl|emph|boxed|fbox|mathbb|mathcal)"


def unwrap_commands(s):
    """Replace \\text{X} (and friends) by ` X `, innermost first, with brace matching."""
    for _ in range(50):
        match = re.search(_TEXT_CMDS + r"\s*\{", s)
        if not match:
            break
        group = braced(s, match.end() - 1)
        if group is None:
            return s
        s = s[:match.start()] + " " + group[0] + " " + s[group[1]:]
    return re.sub(_TEXT_CMDS + r"(?![a-zA-Z])\s*", " ", s)  # \text X without braces






_SUPERSCRIPTS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺", "0123456789-+")


_SUBSCRIPTS = str.maketrans("₀₁₂₃₄₅₆₇₈₉", "0123456789")


def _unicode_roots(s):
    """Unicode roots take the whole number or letter after them (`√27` is \\sqrt{27}, never \\sqrt{2} 7; `∛27` is
    \\sqrt[3]{27}); a period in parentheses repeats (`0.(3)` is 1/3, `1.2(3)`); a decimal whose digits repeat before an
    ellipsis is that repeating decimal (`0.333...` is 1/3, `1.2666\\ldots` is 19/15; `1.5...` stays as written);
    subscript digits are indices (`x₁` is x_{1})."""
    if re.search(r"[√∛∜]", s):
        s = re.sub(r"([√∛∜])\s*(\d+(?:\.\d+)?|[A-Za-z](?![A-Za-z]))",
                   lambda m: {"√": "\\sqrt", "∛": "\\sqrt[3]", "∜": "\\sqrt[4]"}[m.group(1)] + "{" + m.group(2) + "}", s)
        s = s.replace("∛", "\\sqrt[3]").replace("∜", "\\sqrt[4]")
    s = repeating_decimals(s)
    return re.sub(r"[₀₁₂₃₄₅₆₇₈₉]+", lambda m: "_{" + m.group(0).translate(_SUBSCRIPTS) + "}", s)




def superscripts(s):
    """Unicode superscript exponents as LaTeX powers: `10⁶` -> `10^{6}`, `x⁻¹` -> `x^{-1}`, `m²` -> `m^{2}`."""
    return re.sub(r"[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+", lambda m: "^{" + m.group(0).translate(_SUPERSCRIPTS) + "}", s)




# Answers written in words or marks with one canonical form each (the whole answer only): a weekday or its abbreviation
# (`Thu.`, `Thurs` -> Thursday), a date with its month in words (`March 14`, `14 March 2024`, `Mar. 14th`, `2024-03-14`
# -> `date(3,14,2024)`, which answer_compare also reads from `3/14`), a ratio in words (`5 to 8` -> `5:8`), parts
# labelled (a), (b) or (i), (ii) (`(a) 5 (b) 11` -> `a = 5, b = 11`: in order), angle brackets and transposed tuples
# (`\langle 1, 2 \rangle`, `(1, 2)^T` -> `(1, 2)`: a tuple has no orientation).
_DAYS = "monday tuesday wednesday thursday friday saturday sunday".split()
_MONTHS = "january february march april may june july august september october november december".split()
_MONTH = r"(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"


# A date written with its month in words, in prose: "March 14", "Mar. 14th, 2025", "14 March 2025" (capitalized)
DATE_WORDS = re.compile(r"\b(?:(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)[a-z]*\.?\s+\d{1,2}(?:st|nd|rd|th)?"
                        r"(?:,?\s+\d{4})?|\d{1,2}(?:st|nd|rd|th)?\s+(?:of\s+)?(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Sept|Oct|Nov|Dec)"
                        r"[a-z]*\.?(?:,?\s+\d{4})?)\b")


def _month(word):
    """The month a word names (its first three letters, the rest of the name if longer: `Sept`, `Mar.`), else None."""
    word = word.lower().rstrip(".")
    found = [k for k, name in enumerate(_MONTHS, 1) if name.startswith(word) or word.startswith(name[:3]) and name.startswith(
        word[:len(name)])]
    return found[0] if len(found) == 1 and len(word) >= 3 and (word in _MONTHS[found[0] - 1] or word == "sept") else None


def _written_forms(s):
    """The canonical form of a whole answer written as a weekday, a date, a ratio in words, labelled parts (above)."""
    s = s.strip()
    words = s.rstrip(".").lower()
    day = [d for d in _DAYS if d.startswith(words)] if re.fullmatch(r"[A-Z][A-Za-z]{2,8}\.?|[a-z]{3,8}\.", s) else []
    if len(day) == 1:
        return day[0].capitalize()
    date = re.fullmatch(rf"{_MONTH}\s*(\d{{1,2}})(?:\s*,?\s*(\d{{4}}))?|(\d{{1,2}})\s*(?:of\s+)?{_MONTH}(?:\s*,?\s*(\d{{4}}))?"
                        r"|(\d{4})-(\d{2})-(\d{2})", words)
    if date:
        g = date.groups()
        month, day_, year = ((_month(words.split()[0]), g[1], g[2]) if g[0] else (_month(re.sub(r"[\d\s,]|of", " ", words).split()[0]),
                             g[3], g[5]) if g[4] else (int(g[7]), g[8], g[6]))
        if month and 1 <= int(day_) <= 31:
            return f"date({month},{int(day_)}" + (f",{int(year)})" if year else ")")
    ratio = re.fullmatch(r"(-?\d+(?:\.\d+)?)\s+to\s+(-?\d+(?:\.\d+)?)", s.strip())
    if ratio:
        return f"{ratio.group(1)}:{ratio.group(2)}"
    if "(" in s or ")" in s:
        s = _labelled_parts(s)
    if "\\langle" in s or "⟨" in s:
        s = re.sub(r"\\langle|⟨", "(", re.sub(r"\\rangle|⟩", ")", s))
    return re.sub(r"(\([^()]*,[^()]*\)|\[[^\[\]]*,[^\[\]]*\])\s*\^\s*\{?\s*(?:T|\\top|\\intercal)\s*\}?", r"\1", s)


_PART_LABEL = re.compile(r"(?:^|(?<=[\s,;]))(?:part\s*)?\(?\s*([a-h]|i{1,3}|iv|vi{0,3})\s*\)\s*[:.=]?\s*", re.IGNORECASE)
_ROMAN = ["i", "ii", "iii", "iv", "v", "vi", "vii", "viii"]


def _labelled_parts(s):
    """`(a) 5 (b) 11`, `(i) 5, (ii) 11`, `a) 5; b) 11` -> `a = 5, b = 11` when the labels run in order from the first."""
    labels = list(_PART_LABEL.finditer(s))
    if len(labels) < 2 or labels[0].start() != 0:
        return s
    names = [m.group(1).lower() for m in labels]
    order = _ROMAN if names[0] == "i" and (len(names) < 2 or names[1] == "ii") else "abcdefgh"
    if names != list(order[:len(names)]):
        return s
    values = [s[m.end():n.start() if n else len(s)].strip().rstrip(",;").strip() for m, n in zip(labels, labels[1:] + [None])]
    if not all(values):
        return s
    return ", ".join(f"{chr(ord('a') + k)} = {v}" for k, v in enumerate(values))




def unit_vector_hats(s):
    """The unit vectors written with a circumflex (î, ĵ, k̂: a letter and U+0302 once decomposed) as `\\hat{i}`, where
    the letter stands alone (not in a word: "île")."""
    if not re.search("[îĵ\u0302]", s):
        return s
    return re.sub("(?<![^\\W\\d_])([ijk])\u0302(?![^\\W\\d_])", r"\\hat{\1}", unicodedata.normalize("NFD", s))


def _greek_command(match):
    """A Greek letter as its LaTeX command, from its Unicode name (GREEK SMALL LETTER THETA -> \\theta)."""
    name = unicodedata.name(match.group(0), "").split()
    if len(name) < 4 or name[:2] != ["GREEK", "SMALL" if name[1] == "SMALL" else "CAPITAL"] or name[2] != "LETTER":
        return match.group(0)
    word = name[3].lower().replace("lamda", "lambda")  # (Unicode spells it LAMDA)
    word = word if name[1] == "SMALL" else word.capitalize()
    return f"\\{word} " if word.lower() in _GREEK or word.lower() in ("omicron", "pi") else match.group(0)


# An answer written as code or as a computer algebra system prints it: `**` is a power, a module's prefix names the same
# function (`math.log(5)` is \ln 5, `np.sqrt`), `lambda x: (x + 1)**2` and `x ↦ ...` are the formula, a nested list
# (`[[1, 2], [3, 4]]`, `Matrix([[...]])`, numpy's `array([[-2. , 1. ], ...])`) is a matrix, its rows in order;
# `_{7}C_{2}`, `{}^{12}P_{2}` and `7C2` are counts (\binom{7}{2}, 12!/10!).
_NESTED_LIST = re.compile(r"(?:(?:sympy\.|sp\.|np\.|numpy\.)?(?:Matrix|array)\s*\(\s*)?\[\s*(\[[^\[\]]*\](?:\s*,\s*\[[^\[\]]*\])*)\s*,?\s*\]\s*\)?")


def _matrix_rows(match):
    rows = [[re.sub(r"(?<=\d)\.(?!\d)", "", cell.strip()) for cell in row.split(",")] for row in re.findall(r"\[([^\[\]]*)\]", match.group(1))]
    if not rows or any(len(row) != len(rows[0]) or not all(row) for row in rows):
        return match.group(0)
    return "\\begin{pmatrix} " + " \\\\ ".join(" & ".join(row) for row in rows) + " \\end{pmatrix}"


def code_forms(s):
    """An answer written as code (see above) as LaTeX."""
    s = re.sub(r"\b(?:math|cmath|np|numpy|sympy|sp)\.(log10|log2|log|ln|sqrt|exp|sin|cos|tan|pi|e)\b",
               lambda m: {"log10": "\\log_{10}", "log2": "\\log_{2}", "log": "\\ln", "pi": "\\pi", "e": "e"}.get(m.group(1), m.group(1)), s)
    s = re.sub(r"^\s*(?:[A-Za-z_]\w*\s*=\s*)?lambda\s+[A-Za-z_]\w*\s*:\s*", "", s)
    s = re.sub(r"(?<=[\w)\]])\s*\*\*\s*(?=[\w(.-])", "^", s)  # (a power between operands; `**5**` is bold)
    s = re.sub(r"^\s*(?:[A-Za-z](?:\^\s*\{?-1\}?)?(?:\([a-z]\))?\s*:\s*)?[a-z]\s*\\mapsto\s*", "", s)  # f^{-1}: x \mapsto (x + 1)/3
    s = _NESTED_LIST.sub(_matrix_rows, s) if "[[" in re.sub(r"\s", "", s) else s
    s = re.sub(r"(?:\{\}\s*)?[_^]\s*\{?\s*(\d{1,3})\s*\}?\s*([CP])\s*_\s*\{?\s*(\d{1,3})\s*\}?|(?<![\w\\])(\d{1,3})([CP])(\d{1,3})(?![\w])",
               lambda m: _count(m.group(1) or m.group(4), m.group(2) or m.group(5), m.group(3) or m.group(6)), s)
    return s


def _count(n, kind, k):
    return f"\\binom{{{n}}}{{{k}}}" if kind == "C" else f"\\frac{{{n}!}}{{({n}-{k})!}}"


# The domain of a parameter declared after an answer that uses it ("..., k \\in \\mathbb{Z}", "k an integer", "for any
# integer n", "t \\in R"): no part of the value
PARAMETER_DOMAIN = re.compile(r"\s*(?:[,;]\s*(?:where\s+|for\s+(?:all\s+|any\s+|some\s+|every\s+)?)?|\s+(?:where|for(?:\s+(?:all|any|some|every))?)\s+)"
                              r"(?:(?:an?\s+)?(?:integers?|reals?|real\s+numbers?)\s+)?(?<![A-Za-z\\])[a-z]\s*(?:\\in\s*(?:\\mathbb\s*)?\{?\s*[ZNRQ]\s*\}?"
                              r"|(?:is\s+)?(?:an?\s+|any\s+)?(?:integers?|whole\s+numbers?|real\s+numbers?|natural\s+numbers?))\s*$", re.IGNORECASE)


# A system's solution written as the rows of an environment, one assignment a row (`\begin{cases} x = 4 \\ y = 3
# \end{cases}`, the bracket of alternatives `\left[\begin{array}{l} x = 2 \\ x = 3 \end{array}\right.`): the
# assignments in a row, as written in prose (`x = 4, y = 3`; `x = 2, x = 3`)
_ASSIGNMENT_ROWS = re.compile(r"(?:\\left\s*(?:\[|\\\{|\.)\s*)?\\begin\{(cases|array|aligned|gathered|rcases)\}(?:\{[lcr|]*\})?(.*?)"
                              r"\\end\{\1\}(?:\s*\\right\s*(?:\]|\\\}|\.))?", re.DOTALL)


def _assignment_rows(match):
    rows = [row.strip().rstrip(",.;").strip() for row in re.split(r"\\\\", match.group(2)) if row.strip()]
    if len(rows) >= 2 and all(re.fullmatch(r"[A-Za-z](?:_\{?\w+\}?)?\s*&?\s*=\s*[^=&]+", row) for row in rows):
        return ", ".join(row.replace("&", "") for row in rows)
    return match.group(0)


@lru_cache(maxsize=8192)
def clean(s):
    """Canonical text of an answer: delimiters, LaTeX spacing and sizing, text commands, degree signs, thousands
    separators and ordinals gone; percent signs as `%`. None if empty or too long."""
    if s is None:
        return None
    s = plain_unicode(s).strip()
    if not s or len(s) > MAX_ANSWER_CHARS:
        return None
    if "&" not in s:  # (in an array a double backslash before a macro is a row break)
        s = re.sub(r"\\\\(?=[a-zA-Z]{2})", r"\\", s)                 # \\frac (escaped twice) -> \frac
    s = _ASSIGNMENT_ROWS.sub(_assignment_rows, s) if "\\begin" in s else s  # \begin{cases} x = 4 \\ y = 3 \end{cases}
    s = as_latex(s)                                                             # \SI{60}{\kilo\metre}, Sqrt[2], 2*I, ]2;7]
    s = base_numerals(degrees_minutes_seconds(s))                               # 22°30′ -> 22.5°; 0xFF -> FF_{16}
    s = _unicode_roots(s)                                                       # √27, ∛27, 0.(3), x₁
    for old, new in _UNICODE.items():
        s = s.replace(old, new)
    s = superscripts(s)
    s = code_forms(s) if re.search(r"\*\*|\[\s*\[|lambda|\b(?:math|np|numpy|sympy|sp|cmath)\.|\d\s*\}?\s*[CP]|\\mapsto", s) else s
    if "\\" in s:  # `ℝ \ [-1, 3]`: a backslash between the reals and a set is a set minus, not a LaTeX space
        s = re.sub(r"(\\mathbb\{R\})\s*\\(?=\s*[\[(\\{])(?![\[(])", r"\1 \\setminus ", s)
    if re.search(r"[\u0370-\u03ff]", s):  # Greek letters by their Unicode names: θ -> \theta, Δ -> \Delta
        s = re.sub(r"[\u0370-\u03ff]", _greek_command, s)
    s = re.sub(r"(?<![\\A-Za-z])(arcsin|arccos|arctan|arccot|arcsec|arccsc|arsinh|arcsinh|arcosh|arccosh|artanh|arctanh|sinh|cosh|tanh|sin|cos|tan|cot|sec|csc|log|ln|exp)(?![A-Za-z])",
               r"\\\1 ", s)                                                        # cos 30°, log₂ 5: the functions
    s = re.sub(r"\\not\s*=", "\\\\ne ", s)
    s = s.replace("+/-", "\\pm ")                                                # x = 1/2 +/- sqrt(5)/2
    s = re.sub(r"\{\s*([^{}]+?)\s*\\choose\s*([^{}]+?)\s*\}", r"\\binom{\1}{\2}", s)      # {10 \choose 3}
    s = re.sub(r"(?<![\\a-zA-Z])sqrt\s*(?=\()", r"\\sqrt", s)                        # sqrt(2)
    s = re.sub(r"(?<![\\a-zA-Z])sqrt\s*(\d+(?:\.\d+)?|[a-zA-Z](?![a-zA-Z]))", r"\\sqrt{\1}", s)  # 2sqrt3, sqrt 50
    s = re.sub(r"(?<![\\a-zA-Z])pi(?![a-zA-Z])", r"\\pi ", s)                          # 2pi
    s = s.replace("\\AA", "Å")
    s = re.sub(r"\\colon(?![a-zA-Z])", ":", s)
    # a time derivative written as a fraction is the dotted name: \frac{d\omega}{dt} = \dot{\omega}
    s = re.sub(r"\\frac\s*\{\s*d\s*\^\s*\{?2\}?\s*([A-Za-z]|\\[a-z]+)(_\{?\w+\}?)?\s*\}\s*\{\s*d\s*t\s*\^\s*\{?2\}?\s*\}",
               r"\\ddot{\1}\2", s)
    s = re.sub(r"\\frac\s*\{\s*d\s*([A-Za-z]|\\[a-z]+)(_\{?\w+\}?)?\s*\}\s*\{\s*d\s*t\s*\}", r"\\dot{\1}\2", s)
    s = re.sub(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|big|Big|bigg|Bigg)(?![a-zA-Z])\s*\.?", "", s)
    s = re.sub(r"\\(?:displaystyle|textstyle|scriptstyle|limits|nolimits)(?![a-zA-Z])", "", s)
    # colour and size are no part of a value: \color{red}{4}, \textcolor{blue}{4}, \large 4, \underline{4}
    s = re.sub(r"\\(?:text)?color\s*(?:\[[^\]]*\])?\s*\{[\w!.,\s-]{0,30}\}|\\(?:tiny|scriptsize|footnotesize|small|normalsize|large|Large|"
               r"LARGE|huge|Huge)(?![a-zA-Z])|\\underline(?=\s*\{)", " ", s)
    s = re.sub(r"\\[hv]space\*?\s*\{[^}]*\}|\\[hv]?phantom\s*\{[^{}]*\}", " ", s)  # space, and space the size of a text
    s = re.sub(r"\\(?:mkern|kern|mskip|hskip|mspace)\s*\{?\s*-?[\d.]+\s*(?:mu|em|ex|pt|cm|mm|in)\s*\}?", " ", s)
    # thousands separators written in LaTeX: 1{,}000  16,\!386  1\,000  1\ 000
    s = re.sub(r"(\d)\s*(?:\{\s*,\s*\}|,\\!)\s*(?=\d{3}(?!\d))", r"\1,", s)
    s = re.sub(r"(\d)\\[,;: ]\s*(?=\d{3}(?!\d))", r"\1", s)
    # values set apart by a \quad are a list (`x=1 \quad x=4`, `\tfrac12 \quad 2`), not a product
    s = re.sub(r"(?<=[\w})])\s*\\q?quad\s*(?=[-\w\\({])(?!\\text|\\mbox|(?:or|and|for|where|if|with|when)\b)",
               lambda m: m.group(0) if re.search(r"\\(?:text|mbox)\s*\{[^{}]*\}$", s[:m.start()]) else ", ", s)
    s = re.sub(r"(?<!\\)\\(?:[,;:! ]|q?quad|enspace|thinspace)", " ", s).replace("~", " ")
    s = s.strip().strip("\"'“”‘’`").strip()
    s = s.replace("\\$", " ").replace("$", " ").replace("\\(", " ").replace("\\)", " ")
    s = s.replace("\\[", " ").replace("\\]", " ").replace("**", " ")
    s = s.replace("\\%", "%").replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\cfrac", "\\frac")
    s = s.replace("\\dbinom", "\\binom").replace("\\tbinom", "\\binom").replace("\\lbrace", "\\{").replace("\\rbrace", "\\}")
    # degrees: a unit at the end of an answer (45^\circ), radians inside a formula (\sin 30^\circ = 1/2)
    degree = r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|(?<=\d)\s*\\circ|\\degree"  # (`f \circ g` between names is a composition)
    if not re.search(r"\\(?:sin|cos|tan|cot|sec|csc)(?![a-z])", s):
        s = re.sub(rf"(?:{degree})\s*(?:[CF]\b)?\s*$", " deg", s)
    s = re.sub(rf"(\d+(?:\.\d+)?|[A-Za-z])\s*(?:{degree})", r"(\1\\cdot\\frac{\\pi}{180})", s)
    s = re.sub(degree, " ", s)
    s = re.sub(r"^(?:[a-z]\s*\\in\s*)?(?:\\mathbb\s*\{?\s*R\s*\}?|\\R)$", r"(-\\infty, \\infty)", s)   # \mathbb{R}
    s = re.sub(r"^\\\{\s*([a-z])\s*(?:\\mid|\||:)\s*\1\s*\\in\s*(?:\\mathbb\s*\{?\s*R\s*\}?|\\R)\s*\\\}$",
               r"(-\\infty, \\infty)", s)                                        # \{x \mid x \in \mathbb{R}\}
    s = re.sub(r"\\operatorname\s*\{\s*(sgn|sign|max|min)\s*\}|\\(sign)(?![a-z])", lambda m: "\\sgn" if "sign" in m.group(0)
               else "\\" + m.group(1), s)                                             # \operatorname{sgn} -> \sgn
    s = unit_vector_hats(s)                                                      # 2î + ĵ, k̂
    if re.search(r"\\(?:mathbf|boldsymbol|bm|vec|hat)|\\[ij]math", s):   # 2\mathbf{j} + \mathbf{k}: unit vectors
        s = re.sub(r"\\(?:mathbf|boldsymbol|bm|vec|hat)\s*\{?\s*\\?([ijk])(?:math)?\s*\}?|\\([ij])math", r"\\hat{\1\2}", s)
    s = unwrap_commands(s)
    s = re.sub(r"(?<![\\A-Za-z])(?:sgn|sign)(?=\s*\(|\s+[a-z](?![A-Za-z]))", r"\\sgn ", s)  # sgn(x), \text{sgn}(x), sgn x
    s = re.sub(r"(\d)\s*\^\s*\{?\s*(?:st|nd|rd|th)\s*\}?", r"\1", s)           # 12^{th} -> 12
    s = re.sub(r"(\d)(?:st|nd|rd|th)\b", r"\1", s)                             # 12th -> 12
    s = _written_forms(s)
    s = re.sub(r"(?<![\w.])(\d+(?:\.\d+)?)\s*[eE]\s*([-+]?\d+)(?![\w.])", r"\1\\times 10^{\2}", s)  # 4.4e7
    s = re.sub(r"\\(?:leqslant|leq|le)(?![a-z])|≤", "\\\\le ", s)
    s = re.sub(r"\\(?:geqslant|geq|ge)(?![a-z])", "\\\\ge ", s)
    s = re.sub(r"\\(?:neq|ne)(?![a-z])|!=", "\\\\ne ", s)
    s = re.sub(r"<=", "\\\\le ", s)
    s = re.sub(r">=", "\\\\ge ", s)
    s = re.sub(r"\\lt(?![a-z])", "<", s)
    s = re.sub(r"\\gt(?![a-z])", ">", s)
    s = re.sub(r"\s+", " ", s).strip()
    s = re.sub(r"(?:\s*(?:\\\\|[.,;]))+$", "", s).strip()                     # trailing punctuation / row breaks
    s = re.sub(ROUNDING_NOTE.pattern + r"$", "", s, flags=re.I).strip() or s           # 12.3 (to 3 s.f.)
    s = DIGIT_MARKS.sub(lambda m: re.sub(r"['’_]", "", m.group(0)), s)            # 1'234'567, 1_000_000
    # thousands separators: 1,000 and 1,234,567.5, the Indian 3,45,210 -- not `1, 000` or `1,2` (lists), nor in a list
    thousands = re.compile(r"(?<![\d,.(\[{])" + GROUPED_DIGITS + r"(?:\.\d+)?(?![\d,)\]}])")
    if thousands.search(s) and "," not in thousands.sub("", s):
        s = thousands.sub(lambda m: m.group(0).replace(",", ""), s)
    s = re.sub(r"(?<![\d.,] )(?<![\d.,])\d{1,3}(?: \d{3})+(?![\d]| \d|[.,]\d{4})", lambda m: m.group(0).replace(" ", ""), s)  # 13 983 816
    s = scaled_numbers(s)                                                       # 4 million -> 4000000
    s = NUMBER_WORDS.sub(number_words, s)
    s = FRACTION_WORDS.sub(lambda m: f"\\frac{{{m.group(1) or 1}}}{{{DENOMINATORS[m.group(2).lower()]}}}", s)
    s = re.sub(r"\s*(?:,\s*)?(?:for all|for every|for any|\\forall)\b.*$", "", s)            # f(x) = x for all x
    # a domain exclusion after the answer: `\frac{1}{x-2}, x \ne 2`, `A = ..., for \omega^2 \ne 4`
    s = re.sub(r"(?:\s*,\s*(?:(?:for|where|with|provided(?: that)?)\s+)?|\s+(?:for|where|with|provided(?: that)?)\s+)"
               r"(?:\\?[A-Za-z]+)(?:\^\{?\d+\}?)?\s*\\ne\s*[-+\w.\\{}]+\s*$", "", s)
    s = re.sub(r"\\(?:emptyset|varnothing)|\\\{\s*\\\}", r"\\emptyset", s)                   # {} is the empty set
    s = re.sub(r"^(?:[A-Za-z\s]{0,40}?\b(?:is|are)\s+)?(?:the\s+)?(?:empty(?:\s+set)?|no\s+(?:real\s+)?solutions?)$",
               r"\\emptyset", s, flags=re.I)                                          # "the solution set is empty"
    s = re.sub(r"^(?:(-|negative\s+|minus\s+)|\+|positive\s+|plus\s+)?\s*infinity$", lambda m: "-\\infty" if m.group(1) else "\\infty", s,
               flags=re.I)                                                          # "Infinity" as a whole answer
    # every real number is the interval (-oo, oo)
    s = re.sub(r"^(?:[A-Za-z\s]{0,40}?\b(?:is|are)\s+)?(?:[a-z]\s*\\in\s*)?(?:the\s+set\s+of\s+)?(?:all|every|the)?\s*(?:real\s+(?:numbers?|values?)|reals)(?:\s+[a-z])?$",
               r"(-\\infty, \\infty)", s, flags=re.I)
    s = PARAMETER_DOMAIN.sub("", s) if "," in s or " for " in s or "where" in s else s  # x = 7k + 3, k \in Z; (3 - z, 2 - z, z), z \in R
    return s or None


# ------------------------------------------------------------------------------------------------------------
# Units: a value's trailing unit words
# ------------------------------------------------------------------------------------------------------------
_UNIT_SYNONYMS = {
    "m": "meter meters metre metres", "cm": "centimeter centimeters centimetre centimetres",
    "mm": "millimeter millimeters", "km": "kilometer kilometers kilometre kilometres", "in": "inch inches",
    "ft": "foot feet", "yd": "yard yards", "mi": "mile miles", "g": "gram grams gm", "kg": "kilogram kilograms kgs",
    "mg": "milligram milligrams", "lb": "pound pounds lbs", "oz": "ounce ounces", "ton": "tons tonne tonnes",
    "s": "second seconds sec secs", "min": "minute minutes mins", "h": "hour hours hr hrs", "day": "days",
    "week": "weeks wk", "month": "months", "yr": "year years yrs", "dollar": "dollars usd", "cent": "cents",
    "deg": "degree degrees", "rad": "radian radians", "am": "a.m.", "pm": "p.m.", "L": "l liter liters litre litres",
    "mL": "ml milliliter milliliters", "gal": "gallon gallons", "mph": "", "kph": "", "J": "joule joules",
    "W": "watt watts", "N": "newton newtons", "K": "kelvin", "Hz": "hz hertz", "eV": "ev", "erg": "ergs",
    "Å": "angstrom angstroms", "AU": "au", "pc": "parsec parsecs", "ly": "", "V": "volt volts", "A": "amp amps ampere",
    "Pa": "pascal pascals", "cal": "calorie calories", "kcal": "kilocalories", "mol": "mole moles", "T": "tesla",
    "sq": "square", "cu": "cubic", "cup": "cups", "tbsp": "tablespoon tablespoons", "tsp": "teaspoon teaspoons",
    "qt": "quart quarts", "pint": "pints", "ml": "", "arcsec": "arcsecond arcseconds", "arcmin": "arcminute arcminutes",
}
_UNITS = {}
for _canonical, _names in _UNIT_SYNONYMS.items():
    for _name in [_canonical] + _names.split():
        _UNITS[_name if len(_name) == 1 or _name in ("mL", "Hz", "eV", "AU", "Pa") else _name.lower()] = _canonical
# Words that are never a unit after a number: they make the answer a hedge or a sentence (`3 or more`)
NOT_UNITS = set("""or and is are was were be not no more less than at least most about around approximately approx
roughly nearly almost maybe perhaps possibly either neither nor if only the an answer none all any some but also
true false to of each exactly over under between from with without undefined impossible infinity infinite many much
solution solutions real integer integers number numbers value values other others plus minus equals correct
incorrect wrong right yes exist exists does do can cannot then else otherwise when where which what this that
these those it its there their has have had will would could should must may might so thus hence therefore
because since per unknown odd even positive negative prime""".split())
# Count nouns that may follow a number as its unit ("5 apples"); any other word makes the text not an answer
_COUNT_NOUNS = set("""apple orange banana cookie cupcake candy candies piece slice pie cake egg book page pencil pen
marble ball toy card stamp sticker coin bottle box boxes bag basket car truck bike bicycle wheel house room chair
table tree flower plant animal dog cat bird chicken cow pig sheep horse fish leg item object thing way time step
point game goal question problem word letter digit student child children kid boy girl man men woman women adult
person people friend player team worker employee member customer visitor guest teacher class grade lap round trip
ticket seat shirt pair group row column square triangle side edge vertex vertices face diagonal dot cube unit block
tile brick bead button candle serving meal sandwich pizza burger muffin donut doughnut bar pack package can jar
loaf loaves bucket glass plate bowl spoon fork knife shoe sock hat coat dress toy puzzle song movie show episode
photo picture stamp shell rock stone seed leaf leaves bee ant spider insect chip cracker bead straw""".split())


def unit_word(word):
    """A known unit or an allowed count noun (singular or plural)."""
    if unit_key(word):
        return True
    plain = word.lower().rstrip(".")
    return plain in _COUNT_NOUNS or plain.rstrip("s") in _COUNT_NOUNS or plain[:-2] in _COUNT_NOUNS \
        or (plain.endswith("ies") and plain[:-3] + "y" in _COUNT_NOUNS)


_UNIT_TOKEN = re.compile(r"(?:^|(?<=[\s\d}/)]))([A-Za-zÅ][A-Za-z.]*)(\s*\^\s*\{?\s*-?\d+\s*\}?)?\s*$")


def unit_key(word):
    """Canonical key of a known unit, or None."""
    key = _UNITS.get(word) or _UNITS.get(word.lower()) or _UNITS.get(word.lower().replace(".", ""))
    if key is None and len(word) > 1:
        key = _UNITS.get(word.lower().rstrip("."))
    return key


_COMPOUND_UNITS = {("h", "min"): 60, ("min", "s"): 60, ("day", "h"): 24, ("week", "day"): 7, ("yr", "month"): 12,
                   ("ft", "in"): 12, ("yd", "ft"): 3, ("lb", "oz"): 16, ("m", "cm"): 100, ("km", "m"): 1000}


def compound_units(big, small):
    """(big unit, small unit, how many small in one big) when two unit words name a larger and a smaller unit of one
    kind (`hours`, `minutes` -> ('h', 'min', 60)), else None."""
    pair = unit_key(big), unit_key(small)
    return (*pair, _COMPOUND_UNITS[pair]) if pair in _COMPOUND_UNITS else None


# Units as powers of the SI base dimensions (length, mass, time, temperature, amount, current) and a factor to SI
_DIMENSIONS = {"m": (1, "L"), "cm": (Fraction(1, 100), "L"), "mm": (Fraction(1, 1000), "L"), "km": (1000, "L"),
               "g": (Fraction(1, 1000), "M"), "kg": (1, "M"), "mg": (Fraction(1, 10**6), "M"), "s": (1, "T"), "min": (60, "T"),
               "h": (3600, "T"), "N": (1, "M L T^-2"), "J": (1, "M L^2 T^-2"), "W": (1, "M L^2 T^-3"), "Pa": (1, "M L^-1 T^-2"),
               "Hz": (1, "T^-1"), "L": (Fraction(1, 1000), "L^3"), "mL": (Fraction(1, 10**6), "L^3"), "K": (1, "K"),
               "mol": (1, "n"), "A": (1, "I"), "V": (1, "M L^2 T^-3 I^-1")}


def unit_dimensions(units):
    """(factor to SI, {dimension: power}) of a unit string split_unit returns (`kg m s^-2` -> (1, {M: 1, L: 1, T: -2}),
    the newton's), or None when a unit in it is not an SI-derived one."""
    factor, powers = Fraction(1), {}
    for token in (units or "").split():
        name, _, power = token.partition("^")
        if name not in _DIMENSIONS or not re.fullmatch(r"-?\d+|", power):
            return None
        k = int(power or 1)
        factor *= Fraction(_DIMENSIONS[name][0]) ** k
        for base in _DIMENSIONS[name][1].split():
            dim, _, p = base.partition("^")
            powers[dim] = powers.get(dim, 0) + k * int(p or 1)
    return factor, {d: p for d, p in powers.items() if p}


def split_unit(s):
    """'5 cm' -> ('5', 'cm'); '99\\pi square inches' -> ('99\\pi', 'sq in'); '12 grade' -> ('12', 'word:grade');
    '50%' -> ('50', '%'); '3 or more' -> ('3 or more', None): a trailing run of unit words after a value."""
    s = s.strip()
    if s.endswith("%") or re.search(r"\s(?:percent|percentage|pct)$", s):
        return re.sub(r"\s*(?:%|percent|percentage|pct)$", "", s), "%"
    units, rest, words = [], s, 0
    while True:
        match = _UNIT_TOKEN.search(rest)
        if not match:
            break
        word, exponent = match.group(1), (match.group(2) or "").replace(" ", "").replace("{", "").replace("}", "")
        key = unit_key(word)
        if key is None:
            plain = word.lower().rstrip(".")
            if not unit_word(word) or plain in NOT_UNITS or words >= 2:
                break
            key, words = "word:" + plain.rstrip("s"), words + 1
        rest = rest[:match.start()].rstrip()
        divided = re.search(r"(?:/|\bper\b)$", rest) and key[:5] != "word:"
        power = -int(exponent.lstrip("^") or 1) if divided else None  # m/s^2: s^-2 (a unit divided by is a negative power)
        units.insert(0, key + (exponent if power is None else "" if power == 1 else f"^{power}"))
        rest = re.sub(r"(?:\s*(?:/|\\cdot|\*|\bper\b))$", "", rest).rstrip()
    if not units or not rest or not re.search(r"[\d}\)a-zA-Z]$", rest) or rest.endswith("\\"):
        return s, None
    if len(units) == 1 and len(units[0]) == 1 and not s[len(rest):].lstrip("/").startswith(" ") and "/" not in s[len(rest):]:
        return s, None  # "5m" is 5*m; a one-letter unit needs a space: "5 m"
    return rest, " ".join(units)
