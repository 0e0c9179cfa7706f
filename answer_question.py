"""Readings of an answer that need the problem's text (reward.math_reward passes it when the caller does: score_problems,
bench.py's variant sets). Each returns a verdict or a value, or None/False when the question says nothing about it.

  restates_question(pred, question, gold): the answer gives back the expression the question asks to compute.
  rounding_asked(question), rounded_equal(pred, gold, rounding): a decimal for an exact gold, where a rounding is asked.
  question_options(question), option_letter(answer, options): the option a value is (`29` is (C)); option_value(answer,
    options): the value an option letter stands for (`\boxed{B}` for the gold 1/4 when (B) is 1/4).
  question_verdict(text, question): the verdict of a yes-or-no question; decision(text): 'reject' or 'retain', the
    decision a text states about a hypothesis (a gold that is a decision is compared by it).
  asked_value(text, question): the value the conclusion gives the quantity the question asks about: the clause that
    shares its words ("How old is Ann now?" -> "Ann is 24 years old now, while Ben is 8."), the side of an equation
    that is the question's own expression ("what is $2x$?" -> "so $2x = 36$"), a bound that is the extremum asked
    ("What is the minimum number ...?" -> "at least 4", "no fewer than 13"; "largest ..." -> "at most 13").
  asked_letter(text, question): the value the conclusion gives the letter a question asks for ("At what value of x
    ...?" -> "The maximum value 5 occurs at x = 2": 2, and not 5).
  new_value(text, answer, question): the conclusion's one value the question does not give, where the answer read
    without the question is a number it gives ("Fifteen percent of what number is 9?" -> "9 is 15% of 60").
  form_violated(answer, question): the answer is not in the form the question asks ("in lowest terms": 375/1000).
  question_choice(text, question): the one of the alternatives a question offers ("Which is larger, $2^{30}$ or
    $3^{20}$?", "certain, likely, unlikely, or impossible?", "Fill in the blank with $<$, $>$, or $=$", "Plan A ... Plan
    B") that the conclusion picks: by naming it, by a relation between them, or by negating the other of two.
  response_options(text): the options a response lists itself before it answers with a letter ("A. 5  B. 6  C. 7
    ... Answer: C"), as question_options reads a question's.
  other_unit(text, gold, question): the conclusion states the gold's number in another unit than the one the question
    asks for ("Convert 77°F to degrees Celsius." -> "so it is 25 °F": not paid).
"""
import math
import re

import sympy

from answer_compare import canon, equivalent, rounds_to, significant_digits, split_top, vector_entries
from answer_forms import proportional, same_line
from answer_value import (OPEN_WORD, STOP_WORDS, UNSURE, asserted, candidates, clause_for, final_statement, sentence_value,
                          settled_statement)
from latex import clean, parse_math, split_unit, unit_key
from numerals import NUMBER_WORDS, number_words

_COMPUTE = re.compile(r"\b(?:compute|evaluate|simplify|calculate|find\s+the\s+(?:exact\s+)?value|what\s+is\s+the\s+(?:exact\s+)?value|"
                      r"express\s+.{0,40}\s+in\s+(?:simplest|lowest|closed)|write\s+.{0,40}\s+in\s+(?:simplest|lowest|closed))\b",
                      re.IGNORECASE)
_QUESTION_MATH = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|\$(.+?)\$", re.DOTALL)


def restates_question(pred, question, gold):
    """The answer is the expression the question asks to compute, given back unevaluated: the question asks to
    compute, evaluate or simplify, and the prediction (an expression with an operation or a function, not a single
    number or name) is one of the question's formulas, written differently from the gold ("Compute
    $\\sin 30^\\circ \\cos 60^\\circ$." answered `\\sin 30^\\circ \\cos 60^\\circ` for the gold 1/4; "Simplify
    $(x+1)^2 - x^2$." answered `(x+1)^2 - x^2`). Its value equals the gold, but it is not the answer asked for."""
    if not question or not _COMPUTE.search(question):
        return False
    p, g = clean(pred), clean(gold)
    if p is None or g is None or canon(p) == canon(g) or not re.search(r"[-+*/^!]|\\[a-zA-Z]+", p):
        return False
    formulas = [clean(next(x for x in m.groups() if x is not None)) for m in _QUESTION_MATH.finditer(question[:5000])]
    return any(f is not None and (canon(f) == canon(p) or canon(f.split("=")[0]) == canon(p)) for f in formulas)


def without_restated_side(pred, question):
    """A chain to a rounding whose first side is the question's own expression (`\\frac{2}{\\sqrt2} \\approx 1.41` for "Simplify
    $\\frac{2}{\\sqrt{2}}$."), without that side: what the chain arrives at (`\\approx 1.41`: a rounding, not the exact
    value asked). None when the answer starts elsewhere or the question asks to compute nothing."""
    if not question or not _COMPUTE.search(question):
        return None
    p = clean(pred or "")
    sides = split_top(p, ["=", "\\approx"]) if p and "\\approx" in p else []  # (an exact chain reads its last side)
    if len(sides) < 2 or not re.search(r"[-+*/^!]|\\[a-zA-Z]+", sides[0]):
        return None
    formulas = [clean(next(x for x in m.groups() if x is not None)) for m in _QUESTION_MATH.finditer(question[:5000])]
    if not any(f is not None and canon(f) == canon(sides[0]) for f in formulas):
        return None
    rest = p[p.index(sides[0]) + len(sides[0]):].lstrip()
    return rest[1:].strip() if rest.startswith("=") else rest


# ---- a rounding the question asks for --------------------------------------------------------------------------
_PLACE_WORDS = {"tenth": 1, "hundredth": 2, "thousandth": 3, "ten-thousandth": 4, "ten thousandth": 4,
                "whole number": 0, "integer": 0, "unit": 0, "one": 0, "dollar": 0, "cent": 2, "percent": 0,
                "degree": 0, "ten": -1, "hundred": -2, "thousand": -3}
_COUNT_WORDS = {w: k for k, w in enumerate("zero one two three four five six seven eight nine ten".split())}
_ROUNDING = re.compile(r"\b(?:nearest|closest)\s+(ten[- ]thousandth|tenth|hundredth|thousandth|whole\s+number|integer|unit|one|dollar|"
                       r"cent|percent|degree|ten|hundred|thousand)s?\b|\bnearest\s+(0\.0*1)\b|\b(integer|whole\s+number)\s+(?:nearest|closest)\s+to\b"
                       r"|\b(\d+|" + "|".join(_COUNT_WORDS) + r")\s+(?:(decimal\s+(?:places?|digits?)|d\.\s?p\.?|dp)|"
                       r"(significant\s+(?:figures?|digits?)|sig\.?\s*figs?|s\.\s?f\.?|sf))(?![A-Za-z])", re.IGNORECASE)


def rounding_asked(question):
    """The rounding a problem's text asks for: ("places", n) for "to the nearest hundredth" (2), "to 4 decimal
    places", "to the nearest whole number" (0), "nearest hundred" (-2); ("figures", n) for "to 3 significant figures";
    None when it asks for none."""
    match = _ROUNDING.search(question or "")
    if match is None:
        return None
    if match.group(1) or match.group(3):  # ("the integer nearest to 1000/7")
        return "places", _PLACE_WORDS[" ".join((match.group(1) or match.group(3)).lower().replace("-", " ").split())]
    if match.group(2):
        return "places", len(match.group(2)) - 2
    count = int(match.group(4)) if match.group(4).isdigit() else _COUNT_WORDS[match.group(4).lower()]
    return ("places" if match.group(5) else "figures"), count


def rounded_equal(pred, gold, rounding):
    """The decimal policy's one exception for an exact gold: when the question asks for a rounding (rounding_asked),
    a decimal prediction (`0.6931`, `\\approx 0.69`, `x = 0.69`, `0.69 m`) that is the gold correctly rounded, with at
    least the precision asked, is its answer. Never raises; False when unsure."""
    try:
        p, g = clean(pred), clean(gold)
        if p is None or g is None or rounding is None:
            return False
        p = split_top(p, ["\\approx"])[-1] if "\\approx" in p[1:] else p  # `1000/7 \approx 142.86 \approx 143`: its last rounding
        p = re.sub(r"^(?:[A-Za-z](?:_\{?\w+\}?)?\s*(?:=|\\approx)\s*|\\approx\s*|(?:approximately|about|roughly)\s+)", "", p)
        p = re.sub(r"\s*\\[lc]?dots$", "", p)
        (pv, pu), (gv, gu) = split_unit(p), split_unit(g)
        if pu != gu and pu is not None and gu is not None or "%" in (pu, gu) and pu != gu:
            return False
        decimal, exact = re.fullmatch(r"[-+]?\d+(?:\.\d+)?", pv.strip()), parse_math(gv)
        if decimal is None or exact is None or exact.free_symbols or re.fullmatch(r"[-+]?\d*\.\d+", gv.strip()):
            return False  # (a decimal gold is compared by its own precision: _values_equal)
        kind, asked = rounding
        if kind == "places" and asked <= 0 and exact.is_Integer and exact % 10 ** -asked == 0:
            return sympy.Rational(pv.strip()) == exact  # `48000` for "to the nearest thousand" is the rounding itself
        shown = len(pv.split(".")[1]) if "." in pv else 0
        if kind == "places" and shown < asked or kind == "figures" and significant_digits(pv) < asked:
            return False
        return rounds_to(pv, exact, places=None if kind == "figures" or asked >= 0 else asked, asked=True)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError, AttributeError):
        return False


def option_letter(answer, options):
    """The option letter an answer commits to, given the question's options ({letter: text}, answer_value.
    question_options): its own label (`c) 360°` is C), or the one option whose text its value equals (`29` is `(C) 29`
    when (C) is 29); None otherwise. Never raises."""
    try:
        label = re.match(r"\s*\(?([A-Ea-e])\)\s*(.*)", answer or "", re.DOTALL)
        if label and label.group(1).upper() in options:
            rest = clean(label.group(2))
            return label.group(1).upper() if not rest or equivalent(rest, options[label.group(1).upper()]) else None
        value = clean(answer or "")
        matches = [letter for letter, text in options.items() if value and clean(text) and equivalent(answer, text)]
        return f"({matches[0]}) {answer}" if len(matches) == 1 else None
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError, AttributeError):
        return None


_OPTION_LABEL = re.compile(r"(?:(?<=\s)|^)\(([A-Ea-e])\)\s*|(?:^|(?<=\n))[ \t]*([A-E])[.:)][ \t]+")


def question_options(question):
    """{letter: option text} of the options a question lists ("(A) 21 (B) 27 (C) 29", "(a) 180° (b) 270°", one per
    line "A. 5", AMC's `$\\textbf{(A) }20\\qquad\\textbf{(B) }24$`), in order from A; {} when it lists none."""
    if question and "\\text" in question:  # AMC's layout: the labels in bold, the options apart by \qquad, in math
        question = re.sub(r"\\text(?:bf|rm|it)?\s*\{\s*(\([A-Ea-e]\))\s*\}|\\q?quad(?![a-zA-Z])|\\\s|\$", lambda m: f" {m.group(1)} "
                          if m.group(1) else " ", question)
    labels = list(_OPTION_LABEL.finditer(question or ""))
    letters = [(m.group(1) or m.group(2)).upper() for m in labels]
    start = next((k for k, letter in enumerate(letters) if letter == "A" and letters[k:k + 2] == ["A", "B"]), None)
    if start is None:
        return {}
    options = {}
    for k in range(start, len(labels)):
        if k - start >= 5 or letters[k] != "ABCDE"[k - start]:
            break
        end = labels[k + 1].start() if k + 1 < len(labels) else len(question)
        options[letters[k]] = re.sub(r"[\s,;]*(?:or)?\s*$", "", question[labels[k].end():end].split("\n")[0]).strip()
    if len(options) < 2 or any(not re.search(r"\w", text) or OPEN_WORD.fullmatch(text) for text in options.values()):
        return {}  # ("Solve (a) and (b).": labels of parts, not options)
    return options


_POLAR = re.compile(r"(?:^|[.!?:]\s+|\n)\s*(?:is|are|was|were|does|do|did|can|could|will|would|has|have|should|must)\s+([^?.]{3,200})\?",
                    re.IGNORECASE)
_VERDICT_WORD = re.compile(r"(?:^|(?<=[\s,;:*(—–-]))(yes|no|true|false)(?=[\s,.;:!*)—–-]|$)|\b(impossible|not\s+possible|cannot|can't|"
                           r"does\s+not\s+exist|doesn't\s+exist|no\s+such)\b", re.IGNORECASE)
_NEGATION = re.compile(r"\b(?:not|never|no|isn't|aren't|doesn't|don't|didn't|cannot|can't|won't|fails?\s+to)\s+(?:\w+\s+){0,2}$", re.I)


def question_verdict(text, question):
    """'Yes' or 'No': the verdict the last statement of a response gives to a yes-or-no question ("Is 221 a prime
    number?"): a verdict word ("so yes, it is prime", "**No.**", "True -- it is odd", "impossible", "no such triangle
    exists"), else the question's own predicate, negated or not ("so it is not prime", "It converges."); None when the
    question asks no yes-or-no question, the statement doubts, or it gives no verdict."""
    polar = _POLAR.search(question or "")
    sentences = [s for s in re.split(r"\n\s*\n|\n(?=\S)|(?<=[.!?])\s+(?=\S)", (text or "").strip()[-2000:]) if s.strip()]
    if polar is None or not sentences or UNSURE.search(sentences[-1]):
        return None
    last = sentences[-1]
    said = {"Yes" if (m.group(1) or "").lower() in ("yes", "true") else "No" for m in _VERDICT_WORD.finditer(last)}
    asked = {w.lower() for w in re.findall(r"[A-Za-z]{4,}", polar.group(1))[-3:]} - STOP_WORDS - {"there", "such"}  # (its predicate)
    found = [m for m in re.finditer(r"[A-Za-z]{4,}", last) if any(m.group(0).lower().startswith(w[:max(4, len(w) - 2)])
                                                                 for w in asked)]
    stated = {"No" if _NEGATION.search(last[:m.start()][-40:]) else "Yes" for m in found}
    kinds = said or stated
    return kinds.pop() if len(kinds) == 1 and not (said and stated and said != stated) else None  # ("Yes, it is not prime")


# ---- the decision of a hypothesis test -------------------------------------------------------------------------------
# One rule for every wording: the last sentence that decides about a hypothesis (reject, retain, accept) decides, and
# a negation before its verb ("do not", "fail to", "insufficient evidence to", "cannot") or after it ("is not
# rejected") turns a rejection into a retention; a decision about the alternative (H_1, H_a) is the opposite one
# about H_0; two decisions in that sentence are none
_DECISION = re.compile(r"\b(reject(?:s|ed|ing)?|retain(?:s|ed|ing)?|accept(?:s|ed|ing)?)\b", re.I)
_DECISION_NEGATION = re.compile(r"(?:\b(?:not|never|no|cannot|insufficient|unable|fail(?:s|ed)?|lack)\b|n't)(?![^.;]*\b(?:but|however)\b)", re.I)


def decision(text):
    """'reject' or 'retain': the decision the last deciding sentence of a text states about a hypothesis, else None."""
    sentences = [s for s in re.split(r"(?<=[.!?;])\s+|\n+", (text or "").strip()[-2000:]) if _DECISION.search(s)]
    if not sentences or UNSURE.search(sentences[-1]):
        return None
    last, found = sentences[-1], set()
    for verb in _DECISION.finditer(last):
        clause = re.split(r"[,;:]|\b(?:so|then|thus|hence|therefore|we|I)\b", last[max(0, verb.start() - 40):verb.start()])[-1]
        negated = _DECISION_NEGATION.search(clause) or re.match(r"\s*(?:not|n't)\b", last[verb.end():])
        alternative = re.match(r"\s*(?:the\s+)?(?:\$?\s*H_?\{?[1₁aA]|alternative)", last[verb.end():]) or re.search(
            r"(?:H_?\{?[1₁aA]\}?\$?|alternative(?:\s+hypothesis)?)\s*(?:is|was|be)\s+(?:not\s+)?$", last[:verb.start()])
        kept = verb.group(1).lower().startswith(("retain", "accept")) or negated
        found.add("retain" if bool(kept) != bool(alternative) else "reject")  # (accepting H_1 rejects H_0)
    return found.pop() if len(found) == 1 else None


# ---- the value the question asks about ------------------------------------------------------------------------------
_ASKING = re.compile(r"[^.!?\n]*\?|(?:^|(?<=[.!]\s))(?:find|compute|determine|calculate|evaluate|give|write|express)\b[^.!?\n]*",
                     re.IGNORECASE | re.MULTILINE)
_LEAST = re.compile(r"\b(?:minimum|minimal|least|fewest|smallest|lowest)\b", re.I)
_MOST = re.compile(r"\b(?:maximum|maximal|most|greatest|largest|highest)\b", re.I)
_LOWER_BOUND = r"(?:at\s+least|no\s+(?:fewer|less)\s+than|a\s+minimum\s+of|not\s+(?:fewer|less)\s+than)"
_UPPER_BOUND = r"(?:at\s+most|no\s+more\s+than|a\s+maximum\s+of|not\s+more\s+than)"
_NUMBER = r"\$?(-?\d+(?:\.\d+)?)\$?"


def _asking(question):
    """The sentence of the question that asks (its last question, or its last instruction)."""
    asks = _ASKING.findall(question or "")
    return asks[-1] if asks else ""


def asked_value(text, answer, question, strict=False):
    """The value the response's conclusion gives the quantity the question asks about (see the module docstring), or
    None. `answer` is what the response was read to state without the question (reward.extract_answer); strict: only
    that answer's own equation is read (no free text)."""
    asking = _asking(question)
    if not asking or not text:
        return None
    statement = final_statement(text) if not strict else None
    if statement is not None and (UNSURE.search(statement) or re.search(r"\bif\b[^.;]*[,;]\s*(?:or|otherwise|else)\b|\bif\s+not\b",
                                                                       statement, re.I)):
        return None  # ("It's 6 if rotations are the same, or 24 if not.": an answer by cases)
    if answer and "=" in answer:  # "what is $2x$?" ... "so $2x = 36$": the side that is the question's own expression
        sides = split_top(clean(answer) or "", ["="])
        formulas = [clean(next(g for g in m if g)) for m in _QUESTION_MATH.findall(question)]
        if len(sides) >= 2 and any(f and canon(f) == canon(sides[0]) for f in formulas):
            return sides[-1]
    if strict or statement is None:
        return None
    tail = (text or "").strip()[-600:]
    bound = None
    if _LEAST.search(asking):
        bound = re.findall(_LOWER_BOUND + r"\s+" + _NUMBER, tail, re.I)
    elif _MOST.search(asking):
        bound = re.findall(_UPPER_BOUND + r"\s+" + _NUMBER, tail, re.I)
    if bound and re.search(_LOWER_BOUND + "|" + _UPPER_BOUND, statement, re.I):
        return bound[-1]  # "What is the minimum number ...?" ... "so you need at least 4 socks"
    divided = re.findall(r"(\d+)\s*(?:R|r|rem\.?|remainder)\s*(\d+)\b", statement)
    if len(divided) == 1 and re.search(r"\b(?:remainder|quotient)\b", asking, re.I):  # "1234 ÷ 7 = 176 R 2": the part asked for
        return divided[0][1] if re.search(r"\bremainder\b", asking, re.I) else divided[0][0]
    named = re.search(r"\(((?:\s*\\text\s*\{\s*[A-Za-z ]+\}\s*,?)+)\)\s*=\s*\(([^()]*)\)", statement)
    if named:  # `(\text{mean}, \text{median}, \text{mode}) = (6, 7, 7)`: the component the question names
        names = [n.strip().lower() for n in re.findall(r"\\text\s*\{([^{}]*)\}", named.group(1))]
        values = [v.strip() for v in named.group(2).split(",")]
        asked = [v for n, v in zip(names, values) if re.search(rf"\b{re.escape(n)}\b", asking, re.I)]
        if len(names) == len(values) and len(asked) == 1:
            return asked[0]
    listed = _listed_item(tail, asking)
    return listed if listed is not None else clause_for(statement, asking)


# a closing list of labelled items ("- Area: 6 × 4 = 24 cm²", "- **Largest angle: 80°**"): the item the question names
_LABELLED_ITEM = re.compile(r"^[ \t]*(?:[-*•+]|\d+[.)])[ \t]+(?:\*\*)?([A-Za-z][A-Za-z '-]{1,40}?)(?:\*\*)?[ \t]*:[ \t]*(\S[^\n]*)$",
                            re.MULTILINE)


def _listed_item(tail, asking):
    """The value of the item of the response's closing list of labelled items whose label shares the most words with
    the question (one item only), else None."""
    block = re.search(r"(?:^[ \t]*(?:[-*•+]|\d+[.)])[ \t]+[^\n]*\n?){2,}\s*$", tail, re.MULTILINE)
    items = _LABELLED_ITEM.findall(block.group(0)) if block else []
    if len(items) < 2:
        return None
    words = {w.lower().rstrip("s") for w in re.findall(r"[A-Za-z]{3,}", asking)} - STOP_WORDS
    scores = [len(words & {w.lower().rstrip("s") for w in re.findall(r"[A-Za-z]{3,}", label)}) for label, _ in items]
    best = [value for (_, value), k in zip(items, scores) if k == max(scores) and k > 0]
    return sentence_value(best[0].strip().strip("*").strip()) if len(best) == 1 else None


def asked_letter(text, question):
    """The one value the conclusion gives the letter the question asks for ("At what value of $x$ ...?", "the
    $x$-coordinate", "for which $n$"): "The maximum value 5 occurs at x = 2" -> 2. Else None."""
    asking, statement = _asking(question), final_statement(text or "")
    letter = re.search(r"\b(?:value|values)\s+of\s+\$?([a-z])\$?|\$?\b([a-z])\$?[- ]coordinate|\bfor\s+which\s+\$?([a-z])\$?\b", asking)
    if letter is None or statement is None or UNSURE.search(statement):
        return None
    name = next(g for g in letter.groups() if g)
    given = re.findall(rf"(?<![A-Za-z\\])\$?{name}\s*=\s*{_NUMBER}(?![\d.])", statement)
    return given[0] if len(set(given)) == 1 else None


def given_numbers(question):
    """The numbers a question gives, in digits or words."""
    return {float(x) for x in re.findall(r"\d+(?:\.\d+)?", NUMBER_WORDS.sub(number_words, question or ""))}


def new_value(text, answer, question):
    """The conclusion's one value the question does not give, when the answer read without the question is a number
    the question gives ("Fifteen percent of what number is 9?" ... "9 is 15% of 60, because ..."), or there is none
    and the response settles on a statement ("The number 360 has 24 positive divisors."); else None."""
    given = given_numbers(question)
    number = re.fullmatch(r"\s*(-?\d+(?:\.\d+)?)\s*\\?%?\s*", answer or "")
    statement = final_statement(text or "") if answer else settled_statement(text)
    if answer and (number is None or float(number.group(1)) not in given) or statement is None:
        return None
    statement = re.split(r"[,;]?\s+(?:because|since|as)\b", statement)[0]
    values = [value for _, value in candidates(statement)]
    new = [value for value in values if re.fullmatch(r"-?\d+(?:\.\d+)?", value) and float(value) not in given]
    if not answer and any(not re.fullmatch(r"-?\d+(?:\.\d+)?", value) for value in values):
        return None  # (with no answer read, every value must be a plain number: `x = 0, 4` is a list)
    return new[0] if len(set(new)) == 1 else None


# ---- what the question says about the answer's form -------------------------------------------------------------------
_LOWEST_TERMS = re.compile(r"\b(?:lowest\s+terms|simplest\s+(?:form|terms)|reduced\s+(?:form|fraction)|"
                           r"fully\s+simplified|simplify)\b", re.I)  # (a "common fraction" is any a/b: 6/36 is one)
_CLOSED_FORM = re.compile(r"\bclosed[- ]form\b", re.I)
_UNCLOSED = re.compile(r"\\(?:sum|prod|[lc]?dots)(?![a-z])|\.\.\.|…")
_PARTIAL_FRACTIONS = re.compile(r"\bpartial[- ]fractions?\b", re.I)
_SET_ASKED = re.compile(r"\b(?:solve|solutions?|roots?|zeros?|all|set|values)\b", re.I)
# "solve ... for h", "express y in terms of x", "make t the subject", "isolate r": the variable asked for
_SOLVE_FOR = re.compile(r"\b(?:solve\b[^.?]*?\bfor|express|isolate|make)\s+\$?\s*([A-Za-z](?:_\{?\w+\}?)?)\s*\$?"
                        r"(?=\s*(?:[.,?;:]|$|in\s+terms|the\s+subject|(?:in|as|from|using|given)\b))", re.I)


def form_violated(answer, question, gold=None):
    """The answer is not in the form the question asks: a sum, a product or an ellipsis where a closed form is asked
    (`\\sum_{k=1}^n k` for n(n+1)/2); one fraction where partial fractions are (the final side must be a sum of terms);
    a fraction not in lowest terms (`\\frac{375}{1000}`, `6/8`) where lowest terms or a simplified form are; a set
    `\\{0\\}` for a gold that is one value, where the question asks for one quantity (no solutions, roots or set); an
    equation solved for another variable than the one the question asks to solve for (a gold `y = ...`)."""
    if not question or not answer:
        return False
    final = split_top(clean(answer) or "", ["=", "\\approx"])[-1]
    if _CLOSED_FORM.search(question) and _UNCLOSED.search(final):
        return True
    if _PARTIAL_FRACTIONS.search(question) and len([t for t in split_top(final, ["+", "-"]) if t]) < 2:
        return True
    if gold is not None and re.fullmatch(r"\\\{[^{},;]*\\\}", final) and not re.search(r"\\\{|\{", gold) \
            and not _SET_ASKED.search(question):
        return True
    solved = _SOLVE_FOR.search(question)
    if solved and gold is not None and re.match(re.escape(solved.group(1)) + r"\s*=", clean(gold) or ""):
        sides = [side.strip() for side in split_top(clean(answer) or "", ["="])]
        if len(sides) > 1 and solved.group(1) not in (sides[0], sides[-1]):
            return True  # `x = 5 - \frac53 y` where y is asked: the same line, solved for another variable
    if not _LOWEST_TERMS.search(question):
        return False
    fractions = re.findall(r"\\[dt]?frac\s*\{\s*(-?\d+)\s*\}\s*\{\s*(\d+)\s*\}|(?<![\w.])(-?\d+)\s*/\s*(\d+)(?![\w.])", answer or "")
    for top, bottom in [(a or c, b or d) for a, b, c, d in fractions]:
        if int(bottom) > 1 and math.gcd(int(top), int(bottom)) > 1:
            return True
    return False


# ---- objects defined up to a factor or a parameter ----------------------------------------------------------------------
_UP_TO_SCALE = re.compile(r"\b(?:an?|any)\s+(?:\w+\s+){0,2}(?:eigenvector|normal\s+vector|direction\s+vector|vector\s+(?:normal|parallel|"
                          r"perpendicular|orthogonal)|normal\s+to)|\bequation\s+of\s+the\s+plane\b", re.I)
_SOLUTION_SET = re.compile(r"\ball\s+(?:real\s+)?solutions\b|\bsolution\s+set\b|\bparametri[sz]|\bparametric\b|\bequations?\s+of\s+the\s+line\b",
                           re.I)


def entries(answer):
    """The entries of a vector or tuple answer, however it is written (a tuple, a column, angle brackets, labelled
    `\\mathbf{d} = ...`, assignments `x = 3 + 4t, y = 6 + 8t`, a set `\\{(s, s - 1) : s \\in R\\}`), else None."""
    text = clean(answer or "")
    if text is None:
        return None
    text = re.sub(r"^\\?\{\s*(\(.*\))\s*(?::|\\mid|\|)\s*[a-z]\s*\\in.*\\?\}$", r"\1", text)
    assignments = [split_top(part, ["="]) for part in split_top(text, [","])]
    if len(assignments) > 1 and all(len(a) == 2 and re.fullmatch(r"[a-z]", a[0].strip()) for a in assignments):
        return [a[1] for a in assignments]
    return vector_entries(split_top(text, ["="])[-1])


def family_equal(answer, gold, question):
    """With a question that asks for an object defined up to a factor (an eigenvector, a normal or direction vector)
    or up to its parameter (all solutions, a parametrization of a line): the answer is the same object."""
    if not question or not answer:
        return False
    p, g = entries(answer), entries(gold)
    if p is None or g is None:
        return False
    if _UP_TO_SCALE.search(question) and proportional(p, g):
        return True
    return bool(_SOLUTION_SET.search(question) and same_line(p, g))


_INTERCEPT = re.compile(r"\b\$?([xy])\$?\s*-\s*intercepts?\b", re.I)


def _axis_coordinates(text, axis):
    """The coordinates along `axis` of an intercept answer: points on that axis (`(4, 0)` for x) or bare values
    (`4`, `x = -1 and x = 5`, `b = 7`); None when a point is off the axis or the text is neither."""
    c = clean(text or "")
    if c is None:
        return None
    points = re.findall(r"\(\s*([^(),]+?)\s*,\s*([^(),]+?)\s*\)", c)
    if points:
        if re.sub(r"\(\s*[^(),]+?\s*,\s*[^(),]+?\s*\)|\\cup|,|and|\s", "", split_top(c, ["="])[-1]):
            return None  # (text besides the points)
        on_axis = [(a if axis == "x" else b) for a, b in points if (b if axis == "x" else a).strip() == "0"]
        return on_axis if len(on_axis) == len(points) else None
    values = [split_top(part, ["="])[-1].strip() for part in re.split(r",|\\text\s*\{\s*and\s*\}|\band\b", c)]
    return values if all(v and parse_math(v) is not None and not parse_math(v).free_symbols for v in values) else None


def intercept_equal(answer, gold, question):
    """With a question that asks for an x- or y-intercept: a point on that axis and its coordinate are one answer
    (`(4, 0)` for the x-intercept 4; `b = 7` for the y-intercept (0, 7)), as a multiset of coordinates."""
    axis = _INTERCEPT.search(question or "")
    if not axis or not answer:
        return False
    p, g = _axis_coordinates(answer, axis.group(1).lower()), _axis_coordinates(gold, axis.group(1).lower())
    if p is None or g is None or len(p) != len(g):
        return False
    left = list(g)
    for value in p:
        match = next((x for x in left if equivalent(value, x)), None)
        if match is None:
            return False
        left.remove(match)
    return True


_BASIS = re.compile(r"\bbasis\b|\bbases\b|\bspanning\s+set\b", re.I)


def _vectors(answer):
    """The vectors of a set or list of vectors (`\\{(1, 0, -1), (0, 1, -1)\\}`, columns, `(1, 2)^T`), parsed, else None."""
    text = clean(answer or "")
    if text is None:
        return None
    text = split_top(text, ["="])[-1].strip()
    text = re.sub(r"^(?:\\operatorname\{span\}|span)\s*", "", text)
    text = re.sub(r"\^\s*\{?\s*(?:T|\\top|t)\s*\}?", "", text)  # (1, 2)^T: a column
    inner = re.fullmatch(r"\\\{(.*)\\\}|\[(.*)\]", text, re.S)
    items = split_top(inner.group(1) or inner.group(2), [","]) if inner else split_top(text, [","])
    vectors = [vector_entries(item.strip()) for item in items]
    if not vectors or any(v is None for v in vectors) or len({len(v) for v in vectors}) != 1 or len(vectors) > 6:
        return None
    parsed = [[parse_math(clean(x) or "") for x in v] for v in vectors]
    return None if any(x is None or x.free_symbols for v in parsed for x in v) else parsed


def same_span(answer, gold, question):
    """With a question that asks for a basis: two sets of independent vectors that span the same space (a basis
    is defined up to its span: `{(2, 4)}` is a basis of the span of `{(1, 2)}`; a dependent set is no basis)."""
    if not question or not _BASIS.search(question):
        return False
    p, g = _vectors(answer), _vectors(gold)
    if p is None or g is None or len(p) != len(g) or len(p[0]) != len(g[0]):
        return False
    rank = lambda rows: sympy.Matrix(rows).rank(simplify=True)
    return rank(p) == rank(g) == rank(p + g) == len(g)


def option_value(answer, options):
    """The text of the option an answer names by its letter alone (`B`, `(B)`, `\\textbf{(B)}`), else None."""
    letter = re.fullmatch(r"\s*(?:\\text(?:bf|rm)?\s*\{\s*)?\(?\s*([A-E])\s*\)?\s*\}?\s*\.?\s*", answer or "")
    return options.get(letter.group(1)) if letter else None


_INLINE_OPTION = re.compile(r"(?:(?<=\s)|^)([A-E])[.)][ \t]+(?=\S)")


def response_options(text):
    """{letter: text} of the options a response lists (one per line, "(A) ...", or on one line "A. 5  B. 6  C. 7"),
    from A in order; {} when it lists none."""
    options = question_options(text or "")
    if options:
        return options
    for line in reversed((text or "").split("\n")[-20:]):
        labels = list(_INLINE_OPTION.finditer(line))
        letters = "".join(m.group(1) for m in labels)
        if len(labels) >= 3 and "ABCDE".startswith(letters):
            return {m.group(1): line[m.end():labels[k + 1].start() if k + 1 < len(labels) else len(line)].strip()
                    for k, m in enumerate(labels)}
    return {}


# A unit the question asks for: "in miles", "to degrees Celsius", "How many minutes ...?" (a unit word that ends the
# phrase: "How many miles per hour" asks for a compound unit and is left alone); a temperature by its scale
_SCALES = {"c": "°C", "celsius": "°C", "centigrade": "°C", "f": "°F", "fahrenheit": "°F", "k": "K", "kelvin": "K"}
_UNIT_TEXT = r"(°\s*[CFK]\b|degrees?\s+(?:Celsius|Fahrenheit|centigrade|Kelvin|C|F)\b|[A-Za-z]+\.?)"
_ASKED_UNIT = re.compile(r"\b(?:in|into|to|how\s+many)\s+(?:the\s+)?" + _UNIT_TEXT + r"(?=\s*(?:[?.,;:)]|$|\s+(?:is|are|does|do|did|"
                         r"will|would|can|could|was|were|has|have|had|it|of|the|in|to|for|at|on|must|should|will)\b))", re.I)
_STATED_UNIT = re.compile(r"(?<![\w.])(-?\d[\d,]*(?:\.\d+)?)\s*" + _UNIT_TEXT, re.I)


def _unit_of(text):
    scale = re.fullmatch(r"(?:°|degrees?)\s*([A-Za-z]+)", text.strip(), re.I)
    if scale:
        return _SCALES.get(scale.group(1).lower())
    return unit_key(text.strip()) if text.strip().lower() not in ("in", "at", "a", "s") else None


def other_unit(text, gold, question):
    """The last statement of the gold's number with a unit (in the conclusion: the text's last 300 characters) names
    another unit than the one the question asks for, both known units or temperature scales (see above)."""
    asked = [_unit_of(m.group(1)) for m in _ASKED_UNIT.finditer(question or "")]
    asked = [u for u in asked if u]
    g = parse_math(clean(gold) or "")
    if not asked or g is None or g.free_symbols or not text:
        return False
    for match in reversed(list(_STATED_UNIT.finditer(text[-300:]))):
        unit = _unit_of(match.group(2))
        value = parse_math(match.group(1).replace(",", ""))
        if unit and value is not None and value == g:
            return unit != asked[-1]
    return False


# ---- a choice among the alternatives a question offers ------------------------------------------------------------
# Alternatives: a list "X, Y, or Z" / "X or Y" of math segments, of single words or of relation symbols; or names with
# a label ("Plan A", "Plan B"; "Option 1", "Option 2"). The conclusion (the last sentence) picks one when it names it
# alone (a math alternative or a name with a word of the question's own, or as the whole sentence: "-> **Store X**"),
# when it negates the other of two ("so it is not prime" picks "composite"), or by a relation between them: the side
# a "which is larger/smaller" asks for, or the relation a blank between two quantities asks for ("$2^{10} > 10^3$")
_ALT_KINDS = (r"\$[^$]{1,60}\$", r"\$?[<>=≤≥]\$?", r"[A-Za-z][A-Za-z-]*")  # math, a relation symbol, a word
_ALT_LISTS = [re.compile("(" + alt + r")((?:\s*,\s*" + alt + r")*)\s*,?\s+or\s+(" + alt + r")(?=\s*[?.:;,]|\s*$)") for alt in _ALT_KINDS]
_NAMED = re.compile(r"\b([A-Z][a-z]+)\s+([A-Z]|\d)\b")
_RELATIONS = {">": ">", "<": "<", "=": "=", "≥": "≥", "≤": "≤", "\\gt": ">", "\\lt": "<", "\\ge": "≥", "\\geq": "≥",
              "\\le": "≤", "\\leq": "≤"}
_RELATION_WORDS = [(r"(?:is\s+)?(?:greater|larger|bigger|more)\s+than", ">"), (r"(?:is\s+)?(?:less|smaller|fewer)\s+than", "<"),
                   (r"(?:is\s+)?equal\s+to|equals", "=")]
_FLIP = {">": "<", "<": ">", "≥": "≤", "≤": "≥", "=": "="}
_LARGER = re.compile(r"\b(?:larger|greater|bigger|more|higher|largest|greatest|biggest)\b", re.I)
_SMALLER = re.compile(r"\b(?:smaller|less|lower|fewer|smallest|least|lowest)\b", re.I)


def _alternatives_offered(question):
    """The alternatives a question offers (see above), as written, or []."""
    found = []
    for alt, pattern in zip(_ALT_KINDS, _ALT_LISTS):
        for m in pattern.finditer(question[-1500:]):
            items = [m.group(1)] + re.findall(alt, m.group(2)) + [m.group(3)]
            if len(set(items)) == len(items) and not (alt == _ALT_KINDS[2] and {x.lower() for x in items} & STOP_WORDS):
                found = [x.strip("$").strip() for x in items]
    heads = {}
    for m in _NAMED.finditer(question):
        heads.setdefault(m.group(1), []).append(m.group(0))
    named = [sorted(set(v)) for v in heads.values() if len(set(v)) >= 2]
    return found or (named[0] if len(named) == 1 else [])


def _math_relation(sentence, items):
    """(left item, relation, right item) of the last relation between two of `items` the sentence states, or None."""
    sentence = sentence.replace("−", "-")
    operands = r"(\$[^$]{1,60}\$|-?\d+(?:\.\d+)?(?:/\d+)?)"
    words = "|".join(w for w, _ in _RELATION_WORDS)
    last = None
    for m in re.finditer(operands + r"\s*(" + words + r"|[<>=≤≥])\s*" + operands, sentence):
        relation = next((r for w, r in _RELATION_WORDS if re.fullmatch(w, m.group(2))), m.group(2))
        sides = [next((x for x in items if equivalent(m.group(k).strip("$"), x)), None) for k in (1, 3)]
        if None not in sides and sides[0] != sides[1]:
            last = (sides[0], relation, sides[1])
    inside = [re.split(r"(\\[gl]e?q?t?|[<>=≤≥])", seg) for seg in re.findall(r"\$([^$]{1,120})\$", sentence)]
    for parts in inside:  # `$3^{20} > 2^{30}$`: a relation inside one math segment
        if len(parts) == 3 and parts[1].strip() in _RELATIONS:
            sides = [next((x for x in items if equivalent(parts[k].strip(), x)), None) for k in (0, 2)]
            if None not in sides and sides[0] != sides[1]:
                last = (sides[0], _RELATIONS[parts[1].strip()], sides[1])
    return last


def question_choice(text, question):
    """The alternative the conclusion picks (see above), as the question writes it, else None."""
    items = _alternatives_offered(question or "")
    sentences = [x for x in re.split(r"\n\s*\n|\n(?=\S)|(?<=[.!?])\s+(?=\S)", (text or "").strip()[-1500:]) if x.strip()]
    if len(items) < 2 or not sentences:
        return None
    last = sentences[-1]
    choice_words = "|".join(re.escape(x) for x in items if re.fullmatch(r"[A-Za-z][A-Za-z-]*", x))
    if not asserted(re.sub(r"\b(?:" + choice_words + r")\b", " ", last, flags=re.I) if choice_words else last) and not (
            re.search(r"\b(?:not|no|never|isn't|aren't)\b", last) and asserted(re.sub(r"\b(?:not|no|never|isn't|aren't)\b", " ", last))):
        return None  # "We need to check whether ...", "Suppose ...", "Is this odd?", "Many students would say ..."
    asking = _asking(question)
    if set(items) <= set(_RELATIONS):  # a blank to fill with a relation: "$A$ ___ $B$"
        said = re.search(r"\b(?:is|answer|blank|symbol)\s*[:=]?\s*[*`$]*([<>=≤≥])[*`$]*\s*[.!]?\s*$", last)
        if said:
            return said.group(1)
        blank = re.search(r"\$([^$]{1,60})\$\s*_{2,}\s*\$([^$]{1,60})\$", question)
        relation = _math_relation(last, [blank.group(1).strip(), blank.group(2).strip()]) if blank else None
        if relation is None:
            return None
        return relation[1] if relation[0] == blank.group(1).strip() else _FLIP.get(relation[1])
    by_relation = None
    if all(not x[:1].isalpha() or " " in x for x in items) or len(items) == 2 and (_LARGER.search(asking) or _SMALLER.search(asking)):
        relation = _math_relation(last, items) if len(items) == 2 else None
        if relation and relation[1] in "<>" and (_LARGER.search(asking) or _SMALLER.search(asking)):
            larger = relation[0] if relation[1] == ">" else relation[2]
            by_relation = larger if _LARGER.search(asking) else next(x for x in items if x != larger)
            if not re.search(r"\b(?:is|are)\s+(?:the\s+)?(?:larger|greater|bigger|smaller|less|lesser)\b|\b(?:larger|greater|bigger|"
                             r"smaller|lesser)\s+(?:one\s+)?(?:is|are)\b", last, re.I):
                return by_relation
    named = []
    for x in items:
        if " " in x or x[:1].isalpha():
            at = [m for m in re.finditer(r"(?<![\w-])" + re.escape(x) + r"(?![\w-])", last, re.I)]
        else:
            at = [m for m in re.finditer(r"\$([^$]{1,60})\$", last) if equivalent(m.group(1), x)]
        if at:
            named.append((x, at[-1]))
    if len(named) != 1:
        return None
    choice, where = named[0]
    if by_relation is not None and by_relation != choice or re.match(r"\s+to\b", last[where.end():]):
        return None  # a relation and a name that disagree; "unlikely to lose" is no verdict
    negated = re.search(r"\b(?:not|never|no|isn't|aren't|cannot|can't)\s+(?:\w+\s+){0,2}$", last[:where.start()], re.I)
    if negated:
        subject = re.search(r"(-?\d+(?:\.\d+)?)\s+(?:is|are)\s*$", last[:negated.start()])
        foreign = subject and float(subject.group(1)) not in given_numbers(question)  # ("Note 1 is not prime": another number)
        return next(x for x in items if x != choice) if len(items) == 2 and not foreign else None
    words = {w.lower() for w in re.findall(r"[A-Za-z]{4,}", asking) if re.fullmatch(r"[a-z]+(?:er|est)|less|more|least|most|fewer|"
                                                                                 r"better|best|worse|worst", w.lower())}
    rest = re.sub(r"\b(?:" + "|".join(re.escape(x) for x in items) + r")\b", " ", last, flags=re.I)
    own_word = any(w.lower() in words - {w.lower() for x in items for w in x.split()} for w in re.findall(r"[A-Za-z]{4,}", rest))
    alone = not re.sub(r"\b(?:final|answer|so|thus|hence|therefore|the|is|it)\b", "", rest, flags=re.I).strip(" .:!*_→=>-\n")
    word = re.fullmatch(r"[A-Za-z][A-Za-z-]*", choice)  # (an adjective offered: "likely", "composite"; it names itself)
    return choice if word or own_word or alone else None
