"""Math answer checking: find the final answer a response commits to, and decide if it equals the gold answer.

The reward is the only signal GRPO learns from, and the grader is the judge of every eval number, so this file
is built to agree with a careful human grader on what real models write, and to fail closed:

    math_reward(response, gold) = 1.0  iff  is_equiv(extract_answer(response), gold)

Extraction (`extract_answer`), in order; the first kind found wins, and within a kind the LAST occurrence:
  0. Reasoning blocks: only the text after the last `</think>` / `<|end_of_thought|>` is read, and inside a
     `<|begin_of_solution|>` block only that block. A reasoning block that was opened and never closed (a response
     cut off mid-thought) has NO final answer, whatever tentative \\boxed{} it contains.
  1. a JSON object's "answer" field (ZeroEval-style `{"reasoning": ..., "answer": ...}`)
  2. <answer>...</answer>                      (the answer inside is extracted again: boxed, phrase, or all of it)
  3. \\boxed{...} / \\fbox{...}                 (boxes joined only by "and"/","/"or" or by part labels ("for part
                                               (a) and", "(b)") are ONE list answer, so
                                               `\\boxed{3} or \\boxed{5}` is a hedge, not a 5; two boxes with a
                                               condition between them are no answer: "if ... \\boxed{10}; if not,
                                               \\boxed{5}"; a LAST box that is empty is no answer when words
                                               come between it and the answer's box ("\\boxed{5}. Wait, ... \\boxed{}"),
                                               and is ignored right after it: `\\boxed{5}\\n\\boxed{}` is 5)
  4. `#### 18`                                 (GSM8K; `#### She sold 72 clips.` is read as an answer sentence)
  5. an answer phrase: "the final answer is", "the answer (arabic numerals) is", "Answer:", "A:" (line start),
     "**Final Answer:**", `Answer $ 9 $` ... up to the end of the sentence
  6. (default mode only; `strict=True` skips it) a whole response that is one undelimited formula without words
     (`f^{-1}(x) = \\ln x - 2`, `x \\in \\mathbb{R}`, a matrix, `x^2 + 2 \\text{ for } x \\ge 0`); else the conclusion: the last sentence that contains a number or a
     formula (after a last ", so"/"hence" and before a "because"/"which"), when it names one answer; or a
     sentence that says what something is in plain words ("The function is even.", "the solution set is empty").
  An instruction of the prompt echoed by the model ("Please ... put your final answer within \\boxed{}", a template
  with `\\boxed{<answer>}`) is removed first: its box and its "final answer" are not the response's.
  An answer sentence states ONE value (phrases 5 and 6):
  - several numbers: the one the sentence asserts is the answer: the last one after a final `=` / "is"; else one
    in bold; else the only one not inside a modifier phrase ("Kylar needs to pay $64 for 16 glasses" -> 64;
    "The total for 3 shirts is $45" -> 45; "5 apples and 3 oranges" -> none); a purpose clause after a quantity
    is a modifier too ("It takes Sarah 7 weeks to save $210" -> 7; but "She needs to buy 12 eggs" -> 12), and so is
    a phrase put before the sentence up to its comma ("Over 12 weeks, Lily saves $840" -> 840). Among several
    asserted, the one sum of money ("sells 16 - 3 - 4 = 9 eggs a day, making $18" -> 18), else the one before a
    participle clause ("John runs 120 miles a week, running 3 days a week" -> 120), unless that clause gives the
    result ("12 ways for each shelf, giving 144 ways in total" -> 144); "needs to pay $20 to reach the $100 goal" ->
    20 (an infinitive after needs/has/wants is the assertion, not a purpose). A `$` before a number is a
    dollar sign, not math, when no `$` closes it on its line or words come before the next `$` ("$210 at $30").
    Plain-text `x >= 2`, `2 1/2`, `sqrt(5)`, `6pi` are single values; a unit word after the number stays with it
    ("60 degrees"), also written against it (`12kg`, `1,000.99m²`; a number is never cut inside its decimals).
    LaTeX written in prose without delimiters is one formula, as if delimited ("Hence f^{-1}(x) = \\frac{x+5}{3}.",
    "2√5 units", "the ratio is 3:1"; a ratio "1 to 2" is 1:2); a colon before the last value asserts it ("Setting
    t = 0 gives the constant: c = I(0)" -> c = I(0)); a leading "Since/Because ..., " clause is a reason, not the
    answer ("Since f(-x) = f(x), the function is even."); numbers spelled out in a conclusion with none in digits
    count ("twelve ways" -> 12, "one quarter" -> 1/4); a sentence with no value that names the reals or the empty set
    is that set ("x can be any real number.", "there is no solution."; not "any positive real number").
  - hedge words ("or", "not", "at least", "between", "over", "approximately") make a sentence no answer, except
    words of comparison in its subject ("the largest prime less than 50 is 47", "the distance between the points
    is 5"); "approximately 0.35 kg" is `\\approx 0.35 kg`, a rounded value (see Equivalence).
  - a value the sentence rejects is no answer and no hedge: "12, not 15" is 12, "not 10, it's 12" is 12, "The
    answer is not 5." is nothing; a sentence that ends "which is B" restates its value as B ("250 cm, which is
    2.5 m" is 2.5 m; "which is 2 more than Tom" is no restatement).
  - a value its writer doubts ("3, but I'm not sure", "(I think)", "probably") or makes one case of several ("5 if
    n is even, else 6", "5 (assuming n is even; otherwise 6)", "5 when a > 0 and 7 when a < 0", "If n is even the
    answer is 5; if n is odd it is 6", "If a > 0, the answer is 3. Otherwise it is 4.") or offers another value ("\\boxed{8} (though it could be 9)") is no answer,
    in a phrase, a conclusion or right after a box; a proviso alone is not another case ("\\boxed{27}, provided such
    a sequence exists").
  Training uses strict=True (train.py `--strict_answers 1`, its default: only explicit answers are rewarded);
  eval.py uses the default mode (`--strict_answers 0`).

Equivalence (`is_equiv(pred, gold)`), the conventions, each tested in tests/test_reward.py:
- Exact values compare exactly: integers of any size, fractions, radicals, pi (`2^64-1` is not `2^64`; `1/2^99`
  is not `1/2^98`). Irrational values are compared to 50 significant digits, never with a loose tolerance.
- A decimal in the PREDICTION is an exact number: `0.5` = `1/2`, but `0.333` != `1/3` and `12.57` != `4\\pi`;
  `0.\\overline{3}` = `1/3`; only a decimal with 4+ decimals and 4+ significant digits, correctly rounded, stands for
  a gold with no finite decimal (`2.6667` = `8/3`, `0.3333` = `1/3`, `3.1416` = `\\pi`; not `2.6666`, `12.566`, `0.0001`
  for `\\frac{1}{12000}`). A decimal comma (`3,75`, `0,125`; not `1,250`, a thousand, nor `3, 75`, a list) equals
  the same decimal written with a point, and nothing else (`2,5` is not `\\frac52`); a gold is read so only with 2+
  decimals (`1,22` = `1.22`; a gold `1,2` is the list 1, 2, not `1.2`).
- A gold written as a decimal or in scientific notation (`20.39`, `4.4e7`, `1.70 \\times 10^4`) is a rounded
  measurement (Minerva-style physics). It accepts the same number written any way (`1.70e4` = `1.70 \\times 10^4`
  = `17000`), and nothing else: `20.385` is not `20.39` (careful graders of Minerva answers reject 0.533 for 0.53);
  but an exact value that it rounds, when the gold has the digits a prediction would need (4+ decimals, 4+
  significant digits: `\\sqrt{17}` = `4.123105625617661`, `\\pi` = `3.14159`; not `\\sqrt{3}` = `1.732`).
- Percent: `X\\%` is the number X/100, so `25\\%` = `0.25`. Because "what percent" answers are often written
  without the sign, `X\\%` also equals the bare X when X >= 1 (`50\\%` = `50`); below 1 only the value counts:
  `0.5\\%` != `0.5`.
- Units: a trailing unit (`5\\text{ cm}`, `99\\pi \\text{ square inches}`, `12^{\\text{th}} grade`, `9 a.m.`) is dropped
  when only one side has one; when both sides name known units they must be the same unit (`5 m` != `5 cm`,
  `9 p.m.` != `9 a.m.`). Other trailing text is not a unit: `3 \\text{ or more}`, `3 \\text{ is not the answer}` fail.
- Several answers: a bare list `1, 2`, a set `\\{1,2\\}`, `x \\in \\{1,2\\}`, `1 \\text{ and } 2`, `x = 1 \\text{ or } x = 2`
  and `\\pm 1` are the same unordered multiset; `(1, 2)` is an ordered tuple (and `[0, 1)` an interval whose
  brackets must match); `a = 2, b = 3` and `(x, y) = (2, 3)` are the tuple `(2, 3)`; with both `;` and `,`, the
  semicolons separate solutions and the commas their parts (`p=5,q=2; p=7,q=2` = `(5,2),(7,2)`). A prediction with
  more or fewer answers than the gold is wrong: `3 \\text{ or } 5`, `B \\text{ or } C`, `a = 3, b = 5` are not `3`,
  `B`, `5`; an answer listed twice counts once (`1, 2, 2` = `1, 2`), unless the gold repeats one (`1, 1, 2` is a
  multiset: not `1, 2, 2`).
- Relations: a label is stripped (`x = 3`, `f(x) = 2x+1`, `f^{-1}(x) = ...`, `y^s = ...`, `x_{\\text{eq}} = ...`,
  `\\int x^2 dx = ...`, `A \\cap B = \\emptyset`, `AB = 5`, `m+n = 29` for
  29, `\\pi \\approx 0.003` when the gold has no pi: a symbol named before `\\approx` is a label); the last side of a
  relation is its value (`c = I(0)`). The sides before it are a label, the quantity asked for, or working: a
  computation without unknowns, whose slips are not graded (`x = 5+5+1 = 7 = 11` is 11, and not 7, as a human
  grader reads a final answer); a side with an unknown must itself equal the gold (`y = 2x + 1 = 7` is not 7,
  `2x + 3 = 7` is an equation). A gold chain (`z = 1 + 1 = 2`) is its label and last side. An identity or a check
  between values is their common value: each side must equal the gold (`3 = 3`, `\\sqrt{16} = 4` are 3, 4; `0 = 0` is
  not 10, `\\sqrt{4} = 2` not 4). Two labels name the same quantity when they differ only by a letter superscript
  or arguments (`y^s(p) = ...` for `y = ...`; `v(0)` for `v_0`; never `x_1` for `x_2`). A trailing domain
  exclusion is dropped (`\\frac{1}{x-2}, x \\ne 2`; `\\text{for } \\omega^2 \\ne 4`); a domain the gold states as an
  inequality is part of its answer (`x^2 + 2, x \\ge 0` = `x^2 + 2 \\text{ for } x \\ge 0`, not `x^2 + 2`), one only the
  prediction states is dropped.
- Equations are compared as equations: proportional (`2y = 4x+2` = `y = 2x+1`), or the same formula when both are
  solved for a symbol that each states linearly (`I\\frac{d\\omega}{dt} + 2B\\omega = T` = `\\frac{d\\omega}{dt} =
  \\frac{T}{I} - \\frac{2B}{I}\\omega`, `P = 100 - 0.8X_d` = `X_d = 125 - 1.25P`; never `x(x-1) = 0` vs `x - 1 = 0`);
  `\\frac{dx}{dt}` is `\\dot{x}`. Arbitrary constants may be renamed when the gold's are named like constants (C, c,
  K, k, C_1) and the prediction's too (a capital, c, k, m, n): `c_1 e^t + c_2 e^{-t}` = `A e^t + B e^{-t}` =
  `C_1 e^t + C_2 e^{-t}`, `\\frac{\\pi}{6} + n\\pi` = `\\frac{\\pi}{6} + k\\pi`; `\\frac{hv}{\\lambda}` is not `\\frac{hc}{\\lambda}`.
- Inequalities are sets: `x > 5` = `(5, \\infty)`, `1 \\le n \\le 5` is not `5`; `\\geq`, `>=`, `\\geqslant` are one
  sign; a linear inequality is solved (`-x > -1` = `x < 1`, dividing by a negative flips it), and so is an absolute
  value of one (`|x - 1| < 2` = `(-1, 3)`, `1 \\le |z| \\le 2` = `[-2, -1] \\cup [1, 2]`; `|x| < 3` is not `x < 3`); `x \\ne 2` is
  `(-\\infty, 2) \\cup (2, \\infty)`; "all real numbers", "All reals.", `\\mathbb{R}`, `x \\in \\mathbb{R}`, `\\{x \\mid x \\in \\mathbb{R}\\}` are
  `(-\\infty, \\infty)`.
- The empty set: `\\emptyset` = `\\varnothing` = `\\{\\}` = "no solution" = "the solution set is empty", and it is only
  itself (`\\{\\emptyset\\}`, `\\{0\\}` are not empty).
- `\\pm` names two values: `\\pm 1` = `\\{-1, 1\\}` (not `1`); two that coincide are that one value (`3 \\pm 0` = 3,
  `\\pm\\sqrt{0}` = 0). Two numbers side by side are two values, never a product: `1 \\quad 2` (what
  `\\boxed{1 \\quad 2}` holds) is the list `1, 2`, neither 2 nor 12; so are any values a `\\quad` sets apart
  (`x=1 \\quad x=4`, `\\tfrac12 \\quad 2`).
- Approximations: `\\approx 0.35`, "approximately 0.35" equal only a gold that is itself rounded (a decimal or
  scientific notation: `0.35`, `1.5e3`), never an exact one (`\\approx 3` is not `3`, `\\approx 0.33` not `\\frac13`).
  An exact value and its rounding (`P = \\frac23 \\approx 0.67`) equal a rounded gold that the rounding equals (`0.67`),
  and the exact gold (`\\frac23`). A note on the rounding is no part of the value (`12.3 (to 3 s.f.)`, "which rounded
  to three significant figures gives 1.55 eV" -> 1.55 eV); `4.4e7` in prose is one number.
- Angles: a value in degrees (`60^\\circ`, "60 degrees") equals the same angle in radians when the other side is
  written with pi (`\\frac{\\pi}{3}`); `60^\\circ` = `60`, but a bare `60` is not `\\frac{\\pi}{3}`.
- Ratios: `3:1` = `3 \\colon 1` = `6:2` (numbers in proportion) = `\\frac31` = `3`; order matters (`1:3` != `3:1`).
- Numerals in a base compare digit by digit: `1011_2` = `(1011)_2` = `1011_{(2)}` = `1011` (the prediction may leave
  the base out); two bases must agree, and a plain gold whose digits are a numeral in the prediction's base may have
  left the base out too (`1011_2` = `1011`; not `10110_2`, and `(12)_2` is no numeral).
- Mixed numbers: `2\\frac12`, `2 \\frac{1}{2}`, `2 1/2` are 5/2, also with a unit (`2\\frac12 \\text{ cups}`).
- Letters: `e` is Euler's number, `i` the imaginary unit; a run of letters alone is a word compared in order
  (`NO` != `ON`); `A`-`E` golds are multiple-choice letters (`\\textsf{(D)}`, `B. 12` are `B`/`D`; `A B C D E` is not).
  A word gold also matches a sentence whose predicate is that word ("the function is even", "g is an odd
  function" for `\\text{even}`/`\\text{odd}`; "neither even nor odd" is `\\text{neither}`, and "not even" and "neither
  even nor odd" are not `even`).
- Answers by cases (`\\begin{cases}`, "5 if n is even, 6 if n is odd", "3 when a > 0 and 4 otherwise", "0 for even n
  and 1 for odd n"; conditions: parity, sign words, one relation) equal another answer by cases or a formula when both
  have the same value at every point of a grid over their symbols where the gold has one (integers for a parity
  symbol), and each of the gold's cases is met: "1 if n is even and -1 if n is odd" = `(-1)^n`, `\\lceil n/2 \\rceil` =
  "n/2 if n even, (n+1)/2 if n odd", "a if a \\ge b, and b otherwise" = `\\max(a, b)`; the cases swapped, a case left
  undefined (`x` if x > 0, `-x` if x < 0 for `|x|`), or one case's value alone (`5` for "5 if n is even, else 6") fail.
  The conditions may lead ("If n is even, the answer is 5; if n is odd, it is 6."); a conclusion of two sentences that
  each open with "If"/"When" is an answer by cases or none ("If n is even, f(n) = 5. If n is odd, f(n) = 6." is not 6).
- Undefined things are never numbers: `0^0`, `\\infty^0`, `1/\\infty`, `\\infty - \\infty` do not parse.
- `vmatrix` is a determinant (a number); `pmatrix`/`bmatrix`/`matrix`/`smallmatrix`/`array` (with or without
  `\\left[ \\right]`, and after a label: `A^{-1} = ...`) are matrices compared entry by entry; a sum, difference or
  product of written-out matrices and numbers is computed, in the order written (`A + B`, `2A - B`, `A B` != `B A`).
- Sums and products: `\\sum_{k=1}^{10} k^2` = 385, `\\sum_{k=1}^{n} k` = `\\frac{n(n+1)}{2}` (a polynomial body has a closed
  form); any other `\\sum` (`\\sum_{k=0}^{n-1} F_k F_{n-k-1}`) compares by its structure: factors may commute, the index
  and bounds may not be renamed.
- A gold that cannot be parsed never yields reward 1 (`score_batch` warns and counts it).

Safety: untrusted text is never evaluated. latex.py's parser builds the sympy tree itself (no `eval`, `sympify` or
`parse_expr`, which run Python), and refuses numbers too large to compute (power towers, huge factorials,
`\\sin(e^{e^{e^5}})`). Every check is bounded in time: `score_batch` grades in worker processes killed at a hard
timeout (SIGKILL also stops C-level big-integer work); in-process calls (`math_reward`, `is_equiv`) run under an
alarm in the main thread and in a worker process elsewhere.
Measured agreement with real model outputs: README "Grader accuracy" (`python bench.py grader`).
"""
import argparse
import itertools
import json
import operator
import os
import random
import re
import signal
import sys
import threading
import time
from fractions import Fraction
from functools import lru_cache

import sympy

from code_reward import DEFAULT_TIMEOUT_S as CODE_TIMEOUT_S
from code_reward import score_code_batch
from latex import is_english, is_infinite, parse_math
from workers import close_pools, get_pool

MAX_ANSWER_CHARS = 1000      # longer "answers" are not answers
MAX_RESPONSE_CHARS = 200_000  # only the last this many characters of a response are searched for its answer
DEFAULT_TIMEOUT_S = 5.0      # hard limit per graded item (worker processes and in-process alarm)
EXACT_DIGITS = 30            # significant digits asked of the difference of two irrational values...
ZERO_TEST_BITS = 1200        # ...and the working precision (bits) beyond which a difference with none is zero
DECIMAL_DIGITS = 4           # a decimal prediction this precise (and with 4+ decimals) may stand for an exact gold


# ------------------------------------------------------------------------------------------------------------
# Extraction: response text -> the final answer string
# ------------------------------------------------------------------------------------------------------------
_CHAT_TURN = re.compile(r"<\|im_start\|>|<\|im_end\|>|<\|endoftext\|>|<\|eot_id\|>|<\|eom_id\|>|<\|start_header_id\|>|</s>"
                        r"|<\|end\|>|<end_of_turn>|<start_of_turn>|<｜end▁of▁sentence｜>|<｜User｜>|<\|user\|>"
                        r"|\n\s*(?:User|Human|Question)\s*:")  # an invented next turn of a base model


def final_text(response, think_prefilled=False):
    """The part of a response that can state its final answer, or None when the response was cut off inside a
    reasoning block. think_prefilled: the prompt itself opened a `<think>` block (R1-Zero style templates)."""
    if not response:
        return None
    text = _CHAT_TURN.split(response[-MAX_RESPONSE_CHARS:], 1)[0]  # a new chat turn after the answer is not the answer
    text = re.sub(r"<(/?)think(?:ing)?>", r"<\1think>", text, flags=re.IGNORECASE)  # <thinking>, <THINK>
    if "</think>" in text:
        text = text.rsplit("</think>", 1)[1]
        if "<think>" in text:
            return None
    elif think_prefilled or "<think>" in text:
        return None
    if "<|end_of_thought|>" in text:
        text = text.rsplit("<|end_of_thought|>", 1)[1]
    elif "<|begin_of_thought|>" in text:
        return None
    if "<|begin_of_solution|>" in text:
        text = text.rsplit("<|begin_of_solution|>", 1)[1]
    return text.split("<|end_of_solution|>", 1)[0][-MAX_RESPONSE_CHARS:]


_EMPTY_BOX = re.compile(r"\\boxed\s*\{\s*(?:<[^<>{}]{0,30}>|\.\.\.|\\ldots|\\dots)?\s*\}")  # or a placeholder
_INSTRUCTION_WORDS = re.compile(r"\b(?:put|place|write|enclose|present|give|mark|box|within|inside|return|format|"
                                r"response)\b", re.IGNORECASE)


def _drop_echoed_instructions(text):
    """A prompt's instruction echoed by the model ("Please reason step by step, and put your final answer within
    \\boxed{}."): its empty box and its "final answer" are not the response's answer, so its sentence is dropped."""
    for match in reversed(list(_EMPTY_BOX.finditer(text))[-20:]):
        window = max(0, match.start() - 300)  # (bounded windows: a million empty boxes cost linear time)
        start = max(text.rfind(stop, window, match.start()) for stop in (". ", "! ", "? ", "\n")) + 1
        if start == 0 and window > 0 or not _INSTRUCTION_WORDS.search(text, start, match.start()):
            continue
        stops = [text.find(stop, match.end(), match.end() + 300) for stop in (". ", "\n")]
        end = min((k for k in stops if k >= 0), default=min(len(text), match.end() + 300))
        text = text[:start] + " " + text[end + 1:]
    return text


def _braced(text, start, limit=MAX_ANSWER_CHARS + 2):
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


_BOX = re.compile(r"\\(?:boxed|fbox|framebox)(?![a-zA-Z])(\s*)")


def _boxes(text):
    """[(start, end, content)] of every closed \\boxed{...} / \\fbox{...} (nested braces), and `\\boxed 5`."""
    found = []
    for match in _BOX.finditer(text):
        pos = match.end()
        if text.startswith("{", pos):
            group = _braced(text, pos)
            if group is not None:
                found.append((match.start(), group[1], group[0].strip()))
        elif match.group(1):  # "\boxed 5": one token, up to whitespace or $
            token = re.match(r"[^\s$]+", text[pos:pos + MAX_ANSWER_CHARS])
            if token:
                found.append((match.start(), pos + token.end(), token.group(0)))
    return found


def _connective(between):
    """'and' / 'or' if the text between two boxes only joins them (`$\\boxed{1}$ and $\\boxed{2}$`), else None.
    "or maybe", "or perhaps" are hedges too."""
    between = re.sub(r"(?:\\[a-zA-Z]+|[A-Za-z])(?:_\{?\w+\}?)?\s*=\s*$", " ", between.rstrip(" $(\\"))  # "and y_2 ="
    words = re.sub(r"\\[()\[\]]|\$|\\q?quad|\\text\s*\{|\\mbox\s*\{|[{}&]|\\\\", " ", between)
    # part labels name what each box answers: `\boxed{(3, 3)} \text{ for part (a) and } \boxed{(1, 1)}` is one list
    words = re.sub(r"\b(?:for\s+)?(?:part|question)\s*\(?\s*(?:[a-h]|[ivx]{1,4}|\d)\s*\)?(?![\w(])|\(\s*(?:[a-h]|[ivx]{1,4})\s*\)",
                   " ", words, flags=re.IGNORECASE).replace(",", " , ").split()
    if len(words) > 4 or not all(w.lower() in (",", ";", "and", "or", "maybe", "perhaps", "possibly") for w in words):
        return None
    return "or" if any(w.lower() in ("or", "maybe", "perhaps", "possibly") for w in words) else "and"


def last_boxed(text):
    """The last non-empty box; boxes joined to it only by and/or/commas are one list answer (deduplicated)."""
    boxes = [(start, end, _inner_box(content)) for start, end, content in _boxes(text) if content]
    if not boxes:
        return None
    answers, seen, joiner = [], set(), ", "
    for k in range(len(boxes) - 1, max(len(boxes) - 50, 0) - 1, -1):   # the last box and the ones joined to it
        start, _, content = boxes[k]
        if re.search(r"(?:^|[\s$=(])-\s*(?:\$\s*)?$", text[max(0, start - 4):start]):
            content = f"-({content})"                            # $-\boxed{5}$ is -5
        if content not in seen:
            answers.append(content)
            seen.add(content)
        between = text[boxes[k - 1][1]:start] if k else ""
        if k == len(boxes) - 1 and k and len(between) < 300 and "\n\n" not in between \
                and re.search(r"\b(?:if|unless|otherwise|else|whereas|when)\b", between, re.I) \
                and content != boxes[k - 1][2]:
            return None  # "if order matters it is \boxed{10}; if not, \boxed{5}": answers under conditions
        kind = _connective(between) if k else None
        if kind is None:
            break
        if kind == "or":
            joiner = " \\text{ or } "
    return joiner.join(reversed(answers))


def _inner_box(content):
    """A box that holds a sentence (`\\boxed{\\text{The answer is } 5}`) holds the sentence's answer."""
    if re.search(r"answer\s+is", content, re.IGNORECASE):
        return _phrase_answer(_unwrap_commands(content)) or content
    return content


_JSON_ANSWER_KEY = re.compile(r'[{,]\s*"(?:final_answer|answer)"\s*:\s*')
_JSON_ESCAPES = {'"': '"', "\\": "\\", "/": "/"}


def _json_string(text, pos):
    """Decode the JSON string literal starting at text[pos] == '"', tolerating LaTeX's invalid escapes (models write
    `"\\frac12"` as often as `"\\\\frac12"`): `\\n`, `\\t` followed by a letter stay LaTeX (`\\neq`, `\\times`)."""
    out, pos = [], pos + 1
    while pos < len(text) and pos < MAX_RESPONSE_CHARS:
        ch = text[pos]
        if ch == '"':
            return "".join(out)
        if ch == "\\" and pos + 1 < len(text):
            nxt = text[pos + 1]
            if nxt in _JSON_ESCAPES:
                out.append(_JSON_ESCAPES[nxt])
            elif nxt == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[pos + 2:pos + 6]):
                out.append(chr(int(text[pos + 2:pos + 6], 16)))
                pos += 4
            elif nxt in "nt" and not text[pos + 2:pos + 3].isalpha():
                out.append("\n" if nxt == "n" else " ")
            else:
                out.append("\\" + nxt)
            pos += 2
            continue
        out.append(ch)
        pos += 1
    return None


def _json_answer(text):
    """The value of the last `"answer": ...` field, as text; None if there is none."""
    keys = list(_JSON_ANSWER_KEY.finditer(text))
    if not keys or _BOX.search(text, keys[-1].end()):
        return None
    pos = keys[-1].end()
    if text.startswith('"', pos):
        value = _json_string(text, pos)
        return _inner_answer(value) if value is not None else None
    if text.startswith("[", pos):
        close = text.find("]", pos)
        if close < 0:
            return None
        return ", ".join(item.strip().strip('"') for item in text[pos + 1:close].split(",")) or None
    literal = re.match(r"[-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+)", text[pos:pos + 100])
    return literal.group(0) if literal else None


def _inner_answer(text):
    """An answer field's own answer: a box inside it, an answer phrase inside it, or all of it."""
    text = text.strip()
    if not text:
        return None
    return last_boxed(text) or _phrase_answer(text) or text


_PHRASE = re.compile(
    r"(?:\bfinal\s+answer\b(?:\s+is\b)?|\bthe\s+(?:final\s+|correct\s+)?answer(?:\s*\([^()\n]{0,40}\))?\s*(?:is\b|would\s+be\b"
    r"|will\s+be\b|=|:)|^[ \t>#*_-]*(?:answer|a)\s*(?:\*\*|__)?\s*:|^[ \t>#*_-]*answer\s*(?=\$|\\\[|\\\())",
    re.IGNORECASE | re.MULTILINE)
_CUT_WORDS = re.compile(r"\s(?:because|since|which|where|so|as|when|given|for|if|but|hence|thus|therefore)\b", re.I)


def _phrase_answer(text):
    """The answer after the last answer phrase ("The final answer is $5$. I hope it is correct." -> `5`). An answer
    sentence that doubts or conditions its value ("3, but I'm not sure", "5 if n is even, else 6") is kept whole,
    so it fails to compare."""
    matches = list(_PHRASE.finditer(text))
    if not matches:
        return None
    rest = text[matches[-1].end():]
    rest = re.sub(r"^[ \t*_:=]*(?:is\b)?[ \t*_:]*", "", rest, flags=re.IGNORECASE)
    line, _, after = rest.partition("\n")
    if not line.strip():  # "**Final Answer**" on a line of its own: the answer is the block below
        block = after.strip()
        return _display_math(block) or (_reduce(_sentence_head(_strip_currency(block))) if "\n" not in block
                                        else _conclusion_answer(block, finished=False))
    display = _display_math(rest.lstrip())
    if display:
        return display
    line = _strip_currency(line[:4 * MAX_ANSWER_CHARS])  # (a longer line is no answer: bounded work)
    sentence = _first_sentence(line)
    if _UNSURE.search(sentence) or _conditional(sentence):
        return sentence
    by_cases = _case_answer(sentence)
    if by_cases:
        return by_cases  # "5 for n = 1 and 6 for n = 2": an answer by cases, not its first value
    if _case_of_several(text, matches[-1].start(), matches[-1].end()):
        start = matches[-1].start()  # an answer by cases (see _cases), else kept whole: one case of two fails
        sentence_start = max(text.rfind(stop, max(0, start - 300), start) for stop in (". ", "\n", "! ", "? ")) + 1
        return _case_answer(text[sentence_start:].split("\n", 1)[0] if text[sentence_start:start].strip() else
                            text[sentence_start:start] + line) or line
    return _reduce(_sentence_head(line)) or None


# An answer its writer doubts ("3, but I'm not sure", "(I think)") is no answer
_UNSURE = re.compile(r"\b(?:not\s+(?:sure|certain|confident|100)|unsure|uncertain|I\s+think|I\s+believe|I\s+guess|"
                     r"I'?m\s+guessing|probably|maybe|perhaps|possibly|(?:might|could|may)\s+be\s+(?:wrong|incorrect|off|mistaken)|"
                     r"(?:might|could|may)\s+(?:also\s+|instead\s+|well\s+|even\s+)?be\s+[$(\\]*-?\d+|"
                     r"if\s+I'?m\s+not\s+mistaken)\b",
                     re.IGNORECASE)
# ...nor one that holds only under a condition, with another case named ("5 if n is even, else 6", "5 when n is even
# and 6 when n is odd", "5 (assuming n is even; otherwise 6)", "depending on x"). A proviso alone is not a second
# answer ("\\boxed{112875} if the number of cases decreased linearly", "\\boxed{27}, provided such a sequence exists").
_CONDITION = re.compile(r"(?:\s*[A-Za-z.]+){0,2}?\s*[,;]?\s*\(?\s*(?:(depending)|if|unless|provided|whenever|when|assuming|"
                        r"supposing)\b", re.IGNORECASE)
_OTHER_CASE = re.compile(r"\b(?:otherwise|else|if|unless|when|whenever)\b", re.IGNORECASE)


def _case_of_several(text, start, end):
    """The answer stated at text[start:end] is one case of several: its sentence opens with a condition, and the
    rest of that sentence or the start of the next names another case ("If n is even the answer is 5; if n is odd
    it is 6", "If a > 0, the answer is \\boxed{3}. Otherwise it is 4.")."""
    sentence_start = max(text.rfind(stop, max(0, start - 300), start) for stop in (". ", "\n", "! ", "? ")) + 1
    if not re.search(r"\b(?:if|when|whenever|unless|assuming)\b", text[sentence_start:start], re.I):
        return False
    return re.match(r"[^\n]{0,200}?(?:[.;,]\s*|\s)(?:otherwise|else|if|when|whenever|in\s+the\s+other\s+case)\b"
                    r"[^.\n]{0,120}?(?:\d|\$|\\boxed)", text[end:end + 300], re.I | re.S) is not None  # ...with its value


def _conditional_after(after):
    """The text right after a value makes it one case of several."""
    condition = _CONDITION.match(after)
    return condition is not None and (condition.group(1) is not None or _OTHER_CASE.search(after, condition.end()) is not None)


def _conditional(sentence):
    """The sentence starts with a value that is one case of several."""
    lead = _LEADING_VALUE.match(sentence)
    return lead is not None and _conditional_after(sentence[lead.end():])


def _first_sentence(line):
    """The text up to the first sentence end (a period, ! or ? before a space or the end), outside math."""
    depth, in_math = 0, False
    for k, ch in enumerate(line):
        if ch == "$":
            in_math = not in_math
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch in ".!?" and depth <= 0 and not in_math and (k + 1 == len(line) or line[k + 1].isspace()) \
                and not re.search(r"\b[ap]\.m$", line[:k], re.I):
            return line[:k]
    return line


CURRENCY = "¤"  # what a dollar sign becomes once it is known not to open math (clean() drops it)


def _strip_currency(text):
    """Currency signs are not math delimiters: `$64 for 16 glasses` is 64 and a count, not the formula `64 for 16...`.
    A `$` before a number is a dollar sign when no `$` closes it on its line, or when plain words (outside
    `\\text{}`) come before the next `$` ("$45 on food and $30"); `$19, 46, \\text{ and } 82$` stays math."""
    out, pos = [], 0
    for match in re.finditer(r"\\?\$(?=\d)", text):
        if match.start() < pos:
            continue
        close = text.find("$", match.end())  # stops at the next `$` at the latest: linear time overall
        end = close if close >= 0 else len(text)
        if text.find("\n", match.end(), end) >= 0:
            close = -1  # not closed on its line
        inside = re.sub(r"\\[a-zA-Z]+\s*\{[^{}]*\}", " ", text[match.end():min(end, match.end() + 2000)])
        if close < 0 or match.group(0) == "\\$" or re.search(r"(?<![\\a-zA-Z])(?:[A-Za-z]{3,}|(?:at|in|on|to|of|by|or|is|as|if)"
                                                             r"(?=\s))", inside):
            out.append(text[pos:match.start()] + CURRENCY)
            pos = match.end()
        else:
            out.append(text[pos:close + 1])
            pos = close + 1
    stripped = "".join(out) + text[pos:]
    if stripped.count("$") % 2:
        stripped = re.sub(r"\$(?=\d)", CURRENCY, stripped)
    return stripped


def _display_math(text):
    """The content of a display-math block that starts the text (it may span lines), else None."""
    for opener, closer in (("\\[", "\\]"), ("$$", "$$")):
        if text.startswith(opener):
            end = text.find(closer, len(opener))
            if end > 0:
                return text[len(opener):end].strip() or None
    return None


# Words that make a sentence something other than a plain statement of its number: hedges, negations, bounds
_HEDGE_WORDS = re.compile(r"(?<!\\)\b(?:or|not|no|never|cannot|can't|isn't|aren't|wasn't|won't|either|neither|maybe|"
                          r"perhaps|possibly|approximately|approx|about|around|roughly|nearly|almost|least|most|between|"
                          r"than|over|under|estimate|guess)\b|n't\b", re.IGNORECASE)  # (`\approx` is a rounded value)
# Words that change the number next to them ("negative 5", "5 squared", "half of 10", "x plus 5")
_MODIFIER_WORDS = re.compile(r"\b(?:negative|minus|plus|times|half|halves|third|thirds|quarter|quarters|double|twice|"
                             r"triple|square|squared|cube|cubed|roots?\s+of|sqrt|reciprocal|inverse|factorial|divided|"
                             r"multiplied|power|percent|opposite|log|exp)\b", re.IGNORECASE)
# Where an explanation starts after a leading answer ("3 (since 8 - 3 = 5)", "18 miles in six hours")
_EXPLANATION = re.compile(r"\s*(?:$|[(,;:.]|(?:because|since|which|where|so|as|when|given|for|in|on|from|by|using|"
                          r"with|after|at|if|that|to)\b)", re.IGNORECASE)
_LEADING_VALUE = re.compile(r"\s*(\$[^$]+\$|\\\(.+?\\\)|[$¤]?-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)")


_FRONTED = re.compile(r"^\s*(?:over|in|after|within|during|for|at|on|from|by|across|throughout)\s+[^,;$]{1,40}?,\s*(?=[A-Za-z])",
                      re.IGNORECASE)


def _without_fronted_modifier(sentence):
    """ "Over 12 weeks, Lily saves $840": a phrase put before the sentence, up to its comma, only sets the scene;
    its number (and its "over") is neither the answer nor a hedge."""
    fronted = _FRONTED.match(sentence)
    return sentence[fronted.end():] if fronted and _candidates(sentence[fronted.end():]) else sentence


def _reduce(span):
    """The answer inside an answer phrase. A phrase that starts with a value is that value and its unit ("3 (since
    8 - 3 = 5)" -> 3, "18 miles in six hours" -> 18 miles); a sentence ("Dana can travel 18 miles") stands for its
    one number. Hedges, negations and number-changing words keep the span whole, so it fails to compare."""
    span = _without_fronted_modifier(span) if span else span
    if not span or _hedged(span):
        return span
    lead = _LEADING_VALUE.match(span)
    if lead:
        rest, units = span[lead.end():], ""
        while True:  # unit words right after the value
            word = re.match(r"\s*([A-Za-zÅ][A-Za-z.]*(?:\^\{?-?\d+\}?)?|/)", rest)
            if not word or not (word.group(1) == "/" or _unit_word(word.group(1).split("^")[0])):
                break
            units, rest = units + word.group(0), rest[word.end():]
        if _EXPLANATION.match(rest):
            return (lead.group(1) + units).strip()
        return span
    value, _ = split_unit(clean(span) or "")
    if not re.search(r"(?<![\\a-zA-Z])[a-zA-Z]{3,}", value):
        return span
    return _one_candidate(span) or span


def _sentence_head(line):
    """A line cut at the end of its first sentence, or where an explanation starts: at a word like "because" once a
    value has been named, at a comma when the line starts with its value ("18, since ..."); math ($...$, braces) is
    never cut. ("After selling 9 eggs, Janet makes 18 dollars" stays whole: its answer is chosen as a sentence's.)"""
    depth, in_math, k = 0, False, 0
    while k < len(line):
        ch = line[k]
        if ch == "\\" and k + 1 < len(line):
            k += 2
            continue
        if ch == "$":
            in_math = not in_math
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif depth <= 0 and not in_math:
            if ch == "." and (k + 1 == len(line) or line[k + 1].isspace()) and not re.search(r"\b[ap]\.m$", line[:k], re.I):
                return line[:k].strip()
            if ch in ",;" and re.match(r"\s+[A-Za-z]{2,}", line[k + 1:]) and _LEADING_VALUE.match(line):
                return line[:k].strip()
            if ch.isspace():
                cut = _CUT_WORDS.match(line, k)
                if cut and k > 0 and _candidates(line[:k]):
                    return line[:k].strip()
        k += 1
    return line.strip().rstrip(".").strip()


_MATH_SEGMENT = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|\$(.+?)\$", re.DOTALL)
_NUMBER_BODY = r"(?<![\w.^_/])-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+(?![\w.]))?"  # 4.4e7 too
# a unit written against its number in prose (`1,000.99m²`, `12kg`) ends the number; any other letter makes it
# part of a formula (`5x`); a number is never cut inside its decimals (`1,000.99m` is not `1,000`)
_GLUED_UNIT = r"(?:mm|cm|km|m|kg|mg|g|s|ms|min|h|hrs?|mL|ml|L|ft|in|lbs?|oz|mi|yd|mph|kph|Hz|eV|Pa|J|N|W|V|K)[²³]?(?![\w^])"
_NUMBER = re.compile(_NUMBER_BODY + r"(?:/\d+)?(?:(?![\w^/]|\.\d)|(?=" + _GLUED_UNIT + "))")


_PLAIN_VALUE = re.compile(r"(?<![\w\\])-?(?:\d+(?:\.\d+)?\s*\*?\s*)?(?:sqrt\s*\(\s*\d+(?:\.\d+)?\s*\)|pi|π)(?:\s*/\s*\d+)?(?![\w(^])"
                          r"|(?<![\w\\])[A-Za-z]\s*(?:>=|<=|!=|=|>|<|≥|≤|≠)\s*-?\d+(?:\.\d+)?(?:/\d+)?(?![\w^/]|\.\d)"
                          r"|" + _NUMBER_BODY + r"\s+\d+/\d+(?![\w^/])|" + _NUMBER.pattern)


def _candidates(sentence):
    """[(position, text)] of the math segments and, outside them, the bare numbers, mixed numbers (`2 1/2`) and
    plain-text relations (`x >= 2`), in order."""
    candidates, last_end = [], 0
    for match in _MATH_SEGMENT.finditer(sentence):
        candidates += [(m.start(), m.group(0)) for m in _PLAIN_VALUE.finditer(sentence, last_end, match.start())]
        candidates.append((match.start(), next(g for g in match.groups() if g is not None)))
        last_end = match.end()
    return candidates + [(m.start(), m.group(0)) for m in _PLAIN_VALUE.finditer(sentence, last_end)]


_ROUNDING_NOTE = re.compile(r"\s*[,(]?\s*\b(?:(?:which\s+|when\s+)?(?:correct(?:ly)?|rounded|accurate)\s+to|to|(?<=\()\s*)\s*(?:the\s+nearest\s+\w+|"
                            r"(?:\d+|one|two|three|four|five|six)\s+(?:s\.?\s*f\.?|d\.?\s*p\.?|sig(?:nificant)?\.?\s*(?:fig(?:ure)?s?|digits?)|"
                            r"decimal\s+(?:places?|digits?)|dp|sf)(?![A-Za-z]))\s*\)?", re.IGNORECASE)


_RAW_TOKEN = re.compile(r"\\[a-zA-Z]+|\\[{}|,;!]|[A-Za-zα-ωΑ-Ω]+|\d+(?:\.\d+)?|\s+|.", re.DOTALL)
_SHORT_WORDS = {"a", "an", "am", "as", "at", "be", "by", "do", "go", "he", "if", "in", "is", "it", "me", "my", "no", "of",
                "on", "or", "so", "to", "up", "us", "we", "i"}
_RAW_OPERATORS = set("+-*/^_=<>()[]|'!√π½⅓⅔¼¾≤≥≠×·−±∓")


def _wrap_raw_math(piece):
    """LaTeX written in prose without delimiters (`Hence f^{-1}(x) = \\frac{x+5}{3}.`, `c = I(0)`, `2√5 units`,
    a ratio `3:1`): each run of formula tokens with a command, a power, braces, a relation or a ratio is put in `$...$`,
    so that it is one candidate, as if the writer had delimited it. Words (of 3+ letters, or short English ones such as
    "is", "to") end a run; a plain number is left alone."""
    out, last = [], 0
    for segment in list(_MATH_SEGMENT.finditer(piece)) + [None]:
        end = segment.start() if segment else len(piece)
        out.append(_wrap_plain(piece[last:end]))
        if segment:
            out.append(segment.group(0))
            last = segment.end()
    return "".join(out)


def _wrap_plain(text):
    if not re.search(r"\\[a-zA-Z]|[\^_{=<>√½⅓⅔¼¾≤≥≠±∓]|\d:\d", text):
        return text
    runs, start, end, depth, tokens = [], None, None, 0, list(_RAW_TOKEN.finditer(text))
    for k, token in enumerate(tokens):
        tok = token.group(0)
        if depth > 0:
            depth += (tok == "{") - (tok == "}")
            end = token.end()
            continue
        nxt = text[token.end():token.end() + 3].lstrip()[:1]
        if tok.isspace():
            continue
        if tok.startswith("\\") or tok[0].isdigit() or tok in _RAW_OPERATORS:
            mathy = True
        elif tok == "{":
            depth, mathy = 1, True
        elif tok.isalpha():
            mathy = (len(tok) <= 2 and tok.lower() not in _SHORT_WORDS) or (tok.lower() in ("a", "i") and nxt
                                                                             and nxt in "=^_<>+-*/(")
        elif tok in ",." and start is not None:
            mathy = bool(nxt) and not text[token.end():token.end() + 1].isspace() and (tok == "," or nxt.isdigit())
        elif tok == ":" and start is not None:
            mathy = nxt.isdigit() and text[token.start() - 1:token.start()].isdigit()
        else:
            mathy = False
        if mathy:
            start = token.start() if start is None else start
            end = token.end()
        elif start is not None:
            runs.append((start, end))
            start = None
    if start is not None:
        runs.append((start, end))
    out, last = [], 0
    for start, end in runs:
        run = text[start:end]
        while run and (run[-1] in ",.;:" or run.count("(") < run.count(")") and run[-1] == ")"):
            run = run[:-1]
        if not re.search(r"\\[a-zA-Z]|[\^_{=<>√½⅓⅔¼¾≤≥≠±∓]|\d:\d", run) or not re.search(r"[A-Za-z0-9]", run) \
                or re.fullmatch(r"[^\W\d_]\s*(?:[<>]=?|=|[≤≥≠])\s*-?\d+(?:\.\d+)?", run) \
                or run.count("(") != run.count(")") or run.count("{") != run.count("}"):
            continue
        out.append(text[last:start] + "$" + run + "$")
        last = start + len(run)
    return "".join(out) + text[last:]


_LEADING_REASON = re.compile(r"\s*(?:since|because|as)\s+(?:[^,$]|\$[^$]*\$)*?,\s+", re.IGNORECASE)
_RESULT_WORDS = re.compile(r",\s*(?:giving|yielding|making|resulting\s+in|for\s+a\s+total\s+of|totall?ing|which\s+gives)\s+"
                           r"(?:(?:us|a\s+total\s+of|an?|the)\s+)*[$¤]?$", re.IGNORECASE)


def _spelled_out(sentence):
    """Numbers written in words, in a sentence that has none in digits: "twelve ways" -> "12 ways", "one quarter" ->
    \\frac{1}{4} ("the one on the left" stays)."""
    sentence = _NUMBER_WORDS.sub(lambda m: m.group(0) if re.search(r"\b(?:the|this|that|each|every|any|no|which)\s+$",
                                                                     sentence[:m.start()], re.I) and m.group(0).lower() == "one"
                                 else _number_words(m), sentence)
    return _FRACTION_WORDS.sub(lambda m: f"$\\frac{{{m.group(1) or 1}}}{{{_DENOMINATORS[m.group(2).lower()]}}}$", sentence)


_ANY_REAL = re.compile(r"\b(?:all|every|any)\s+real\s+(?:numbers?|values?|[a-z])\b|\ball\s+reals\b", re.I)
_NOT_ALL = re.compile(r"\b(?:except|but|other|positive|negative|non-?zero|non-?negative|greater|less|than|not|no|integers?|"
                      r"rational|irrational|between|outside|inside|only|some|even|odd|continuous|increasing|decreasing|"
                      r"constant|zero|true|false|differentiable|bounded|periodic|convex|concave|injective|surjective)\b", re.I)


def _set_words(sentence):
    """A sentence that names the reals or the empty set in words and holds no value: "All reals.", "x can be any real
    number.", "there is no solution." -> the text it cleans from; None otherwise."""
    sentence = sentence.strip().rstrip(".!").strip()
    if not sentence or len(sentence) > 80 or _candidates(sentence) or re.search(r"[=\\^_{}$<>]", sentence):
        return None
    if clean(sentence) in ("(-\\infty, \\infty)", "\\emptyset"):
        return sentence
    if _ANY_REAL.search(sentence) and not _NOT_ALL.search(sentence):
        return "all real numbers"
    return None


def _case_answer(sentence):
    """The answer by cases a sentence states ("The value is 1 if n is even and -1 if n is odd", "..., i.e. 2 for
    positive k and -2 for negative k"), else None."""
    if not _CASE_WORD.search(sentence) or _UNSURE.search(sentence) or len(sentence) > 400:
        return None
    starts = [0] + [m.end() for m in re.finditer(r"\b(?:is|equals|are|be|gives|i\.e\.,?|namely)\s+|:\s+", sentence)]
    for start in starts:
        tail = sentence[start:].strip().rstrip(".").strip()
        if tail and _cases(clean(tail) or ""):
            return tail
    return None


def _conclusion_answer(text, finished=True):
    """Free text: the answer is the one number or formula of the conclusion (the last sentence that has any), or
    the one that sentence asserts (see _asserted). Several candidates otherwise: no answer (a hedge)."""
    tail = _strip_currency(text.strip()[-4000:].replace("\\$", ""))
    sentences = [s for s in re.split(r"\n\s*\n|\n(?=\S)|(?<=[.!?])\s+(?=[A-Z])|(?<=\$\$|\\\])\s+(?=[A-Z])", tail) if s.strip()]
    if finished and len(sentences) > 1 and not re.search(r"(?:[.!?$)\]}]|\\\])[\s*_]*$", sentences[-1]):
        return None  # the last sentence is unfinished: a response cut off mid-thought states no conclusion
    if sentences and _set_words(sentences[-1]):
        return _set_words(sentences[-1])  # "All reals.", "No solution.", "x can be any real number.": a set in words
    if sentences and not _candidates(sentences[-1]) and _word_predicate(sentences[-1]) \
            and not re.search(_NUMBER_WORDS.pattern + "|" + _FRACTION_WORDS.pattern, sentences[-1], re.I):
        return _word_predicate(sentences[-1])  # "The function is even.": a word answer (it equals only a word gold)
    if len(sentences) > 1 and all(re.match(r"\s*(?:if|when)\b", x, re.I) for x in sentences[-2:]):
        return _case_answer(sentences[-2] + " " + sentences[-1])  # "If n is even, f(n) = 5. If n is odd, f(n) = 6."
    for sentence in reversed(sentences[-3:]):
        sentence = re.sub(r"^\s*(?:\d+[.)]|[-*])\s+", "", sentence)  # list markers: "3) $1375 on all ads"
        # the conclusion is the clause after a last "so"/"hence", and it ends where a justification starts
        sentence = re.split(r"[,;]\s+(?:and\s+)?(?:so|hence|therefore|thus)\s+", sentence)[-1]
        by_cases = _case_answer(sentence)
        if by_cases:
            return by_cases  # "It equals 0 for even n and 1 for odd n.": an answer by cases (see _cases)
        sentence = _wrap_raw_math(_ROUNDING_NOTE.sub(" ", sentence))  # "(to 3 s.f.)" says how the value is rounded
        if re.search(r"\bratio\b", sentence, re.I):  # "the ratio of boys to girls is 1 to 2": 1:2
            sentence = re.sub(r"(?<![\w.])(\d+)\s+to\s+(\d+)(?!\w|\.\d)", r"$\1:\2$", sentence)
        if not _candidates(sentence) and re.search(_NUMBER_WORDS.pattern + "|" + _FRACTION_WORDS.pattern, sentence, re.I):
            sentence = _spelled_out(sentence)
        reason = _LEADING_REASON.match(sentence)  # "Since f(-x) = f(x), the function is even.": the main clause
        if reason and (_candidates(sentence[reason.end():]) or _word_predicate(sentence[reason.end():])
                       or _set_words(sentence[reason.end():])):
            sentence = sentence[reason.end():]
        if _set_words(sentence):
            return _set_words(sentence)
        if _candidates(sentence):
            sentence = _without_rejected_values(_without_fronted_modifier(sentence))
            if not _candidates(sentence):
                return None  # "The answer is not 5.": a rejected value, and nothing asserted
        restated = _RESTATED.search(sentence)  # "..., which is 1,000.99 m²": the value the sentence ends on
        if restated and len(_candidates(sentence[restated.end():])) == 1:
            sentence = sentence[restated.end():]
        cut = re.search(r"[,;]?\s+(?:because|since|as|which|where)\b", sentence)
        if cut and _candidates(sentence[:cut.start()]):
            sentence = sentence[:cut.start()]
        if not _candidates(sentence) and _word_predicate(sentence):
            return _word_predicate(sentence)  # "..., so the solution set is empty."
        if _candidates(sentence):
            if _UNSURE.search(sentence) or re.match(r"\s*(?:otherwise|else|in\s+the\s+other\s+case)\b", sentence, re.I):
                return None  # "Otherwise it is 4.": one case of several
            return _stated_value(sentence)
    return None


_SUBJECT_WORDS = {"between", "over", "under", "than", "least", "most"}  # "the largest number less than 100 is 99"
_APPROX_WORD = re.compile(r"(?<!\\)\b(?:approximately|approx\.?|about|around|roughly|nearly)\s+(?=[$¤]?-?\d)", re.IGNORECASE)


def _hedged(sentence):
    """A hedge word touches the sentence's value. In "<subject> is <value>", words of comparison and place in the
    subject ("the distance between the points is 5", "the largest number less than 100 is 99") do not; a negation,
    "or", "either" anywhere does."""
    copula = re.search(r"\b(?:is|are|was|were|equals?)\b|=", sentence)
    subject, predicate = (sentence[:copula.start()], sentence[copula.end():]) if copula else ("", sentence)
    words = [w.lower() for w in _HEDGE_WORDS.findall(subject)]
    return _HEDGE_WORDS.search(predicate) is not None or any(w not in _SUBJECT_WORDS for w in words) or (
        bool(words) and not _candidates(predicate))  # "More than 5 is the answer": the value is in the hedged subject


def _stated_value(sentence):
    """The value a conclusion states (_one_candidate), None when hedged; "approximately 0.2" is `\\approx 0.2` (a
    rounded value: it equals only a gold that is itself rounded, see _equiv)."""
    approx = _APPROX_WORD.search(sentence)
    plain = sentence[:approx.start()] + sentence[approx.end():] if approx else sentence
    if _hedged(plain):
        return None
    value = _one_candidate(plain)
    if value and approx and plain[approx.start():].lstrip("$" + CURRENCY).startswith(value):
        return "\\approx " + value
    return value


_VALUE_TEXT = r"(?:\$[^$]{1,80}\$|[$¤]?-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)"
_REJECTED = re.compile(r"(?:,\s*)?\b(?:not|isn't|is\s+not|it'?s\s+not)\s+" + _VALUE_TEXT + r"(?![\w.^/])\s*,?", re.I)
# "which is B" ending a sentence restates its value as B (a conversion, a decimal): B is what it ends on
_RESTATED = re.compile(r"[,;]?\s+(?:which|that)\s+(?:is|equals|gives)\s+(?=" + _VALUE_TEXT + r"(?:\s*[A-Za-zÅ€£%²³]{1,6}\.?)?"
                       r"\s*[.!]?\s*$)", re.I)


def _without_rejected_values(sentence):
    """A value the sentence rejects ("not 10", "6, not 5") is no answer and no hedge: it is dropped with its "not",
    and so is a leading "No,"/"Not": "not it's not 10 it's 1,000.99" asserts 1,000.99."""
    kept = _REJECTED.sub(" ", sentence)
    if kept == sentence:
        return sentence
    return re.sub(r"^\s*(?:no|not)\b[,!]?\s*", "", kept, flags=re.I)


def _word_predicate(sentence):
    """`The function is even.` -> itself (stripped) when a sentence says what something is in a few plain words."""
    sentence = sentence.strip().rstrip(".!")
    if _COPULA.match(sentence) and re.fullmatch(r"[A-Za-z\s-]{1,30}", _COPULA.sub("", sentence, count=1)):
        return sentence
    return None


# Words that put the number after them in a modifier of the sentence, not in its assertion ("for 16 glasses",
# "by selling 9 eggs", "after 3 days", "out of 5")
_MODIFIER_START = re.compile(r"\b(?:for|by|in|(?<!total )(?<!sum )of|per|after|before|from|with|without|at|on|over|within|among|"
                             r"into|across|through|during|since|until|via|using|than|like|including)\b", re.IGNORECASE)
_PURPOSE = re.compile(r"(?<!\bneeds\s)(?<!\bneed\s)(?<!\bhas\s)(?<!\bhave\s)(?<!\bhad\s)(?<!\bwants\s)(?<!\bwant\s)"
                      r"(?<!\bought\s)(?<!\bable\s)(?<!\bgoing\s)\bto\s+(?!be\b)[a-z]{2,}\b", re.IGNORECASE)  # "7 weeks to save $210": after a quantity


def _asserted(sentence, candidates):
    """The candidate a sentence with several asserts as its quantity: the last one after a final `=` or "is", or
    else the only one not inside a modifier phrase (`Kylar needs to pay 64 for 16 glasses` -> 64; `The total for
    3 shirts is 45` -> 45). None when no single one stands out (`5 apples and 3 oranges`)."""
    position, value = candidates[-1]
    before = sentence[:position].rstrip()
    if re.search(r"(?<![!<>=])=$|:$", before) or re.search(r"\b(?:is|be|are|was|were|equals?|gives?|get|obtain|total)$",
                                                            before, re.I):
        return candidates[-1]
    bold = [c for c in candidates if re.search(r"\*\*[^*]*$", sentence[:c[0]]) and "**" in sentence[c[0]:]]
    if len(bold) == 1:
        return bold[0]  # "Sarah runs a total of **27 miles** in a week, 12 of them on the weekend."
    asserted, previous_end, previous_asserted = [], 0, True
    for position, value in candidates:
        lead_in = [w for w in sentence[previous_end:position].split() if w != CURRENCY]
        if previous_end and len(lead_in) <= 2 and lead_in and lead_in[-1].lower() in ("and", "or", ","):
            is_asserted = previous_asserted  # "for 4 shirts and 2 pants": the same phrase goes on
        else:
            is_asserted = _RESULT_WORDS.search(sentence[:position]) is not None or (
                not _MODIFIER_START.search(" ".join(lead_in[-3:])) and not (previous_end and _PURPOSE.search(" ".join(lead_in))))
        if is_asserted:
            asserted.append((position, value))
        previous_end, previous_asserted = position + len(value), is_asserted
    results = [(p, v) for p, v in asserted if _RESULT_WORDS.search(sentence[:p])]
    if len(asserted) > 1 and len(results) == 1:
        return results[0]  # "12 ways for each shelf, giving 144 ways in total": the value the sentence arrives at
    if len(asserted) > 1:  # "Janet sells 16 - 3 - 4 = 9 eggs a day, making $18": the one sum of money
        money = [(p, v) for p, v in asserted if sentence[p - 1:p] == CURRENCY
                 or re.match(r"\s*(?:dollars?|cents?)\b", sentence[p + len(v):], re.I)]
        if len(money) == 1:
            return money[0]
        # else the one in the main clause: "John runs 120 miles a week, running 3 days a week" -> 120
        main = [(p, v) for p, v in asserted if not re.search(r",\s*[a-z]+ing\b", sentence[:p])]
        return main[0] if len(main) == 1 and not money else None
    return asserted[0] if asserted else None


def _one_candidate(sentence):
    """The sentence's answer: its only candidate, or the one it asserts (_asserted); None when an operator, a
    relation, a number-changing word or a condition touches it (`x = y - 5`, `x > 5`, "negative 5", "5 if n is even")."""
    candidates = _candidates(sentence)
    if not candidates:
        return None
    chosen = candidates[0] if len(candidates) == 1 else _asserted(sentence, candidates)
    if chosen is None:
        return None
    position, value = chosen
    before, after = sentence[:position].rstrip(" *_"), sentence[position + len(value):].lstrip("*_")  # **27** is 27
    segment = _MATH_SEGMENT.match(sentence, position) if sentence[position] in "$\\" else None
    if segment:  # a math segment ($...$, \(...\)): skip its closing delimiter
        after = sentence[segment.end():]
    if _conditional_after(after):
        return None
    if re.search(r"(?:[-+*/^<>≤≥≠]|!=|\\[a-z]+)\s*$", before) and not re.search(r"(?<![!<>=])=$", before):
        return None
    if re.match(r"\s*(?:[-+*/^(<>=]|[A-Za-z](?![A-Za-z]))", after) and not re.match(r"\s*[IiAa]\s", after) \
            and not (sentence[position] != "$" and re.match(r"\s*" + _GLUED_UNIT, after)):
        return None  # 5x, 5 + y, 5(1+x), 5 = ... (but "5 m", "5m²": a unit)
    after = re.sub(r"^\s*times\s*(?=[.,;!?]|$)", "", after)  # "rang 22 times." counts; "5 times x" multiplies
    before = re.split(r"\b(?:is|are|was|were|be|equals?)\b|=", before)[-1]  # "the inverse is $y = ...$": asserted
    nearby = " ".join(before.split()[-4:] + after.split()[:2])
    if _MODIFIER_WORDS.search(nearby):
        return None
    unit = re.match(r"\s*([A-Za-z]+)", after)
    if unit and _unit_key(unit.group(1)) and sentence[position] != "$":
        return f"{value.strip()} {unit.group(1)}"  # "the angle is 60 degrees": the unit is part of the answer
    return value.strip()


_TEXT_GROUP = re.compile(r"\\(?:text|mbox|mathrm|textrm|operatorname|mathbb|mathcal|begin|end)\s*\{([^{}]*)\}")


def _bare_formula(text):
    """The whole text is one formula written without delimiters: one line (a matrix may span lines), no words
    outside commands, at most a few words in `\\text{}` (`x^2 + 2 \\text{ for } x \\ge 0`), nor short English ones."""
    text = _ROUNDING_NOTE.sub(" ", text)
    if re.search(r"(?<![\\A-Za-z])(?:" + "|".join(w for w in _SHORT_WORDS if len(w) > 1) + r")(?![A-Za-z])",
                 _TEXT_GROUP.sub(" ", text), re.I):
        return False
    text = re.sub(r"\\begin\{([a-zA-Z]*matrix|array)\}.*?\\end\{\1\}", lambda m: m.group(0).replace("\n", " "), text,
                  flags=re.DOTALL) if "\\begin" in text else text
    if "\n" in text or len(text) > 300 or not re.search(r"[A-Za-z0-9]", text):
        return False
    if len(text) <= 200 and parse_math(split_unit(clean(text) or "")[0]) is not None:
        return True
    if any(len(group.split()) > 3 for group in _TEXT_GROUP.findall(text)):
        return False
    rest = re.sub(r"\\[a-zA-Z]+", " ", _TEXT_GROUP.sub(" ", text))
    return not any(is_english(w) for w in re.findall(r"(?<![a-zA-Z])[a-zA-Z]{3,}", rest)) \
        and not re.search(r"[!?:]\s*$|[.!?]\s+[A-Za-z]", text) and clean(text) is not None


_FILLER_WORDS = {"final", "answer", "the", "is", "so", "thus", "hence", "therefore", "i", "hope", "it", "correct"}


def extract_answer(response, strict=False, think_prefilled=False):
    """The final answer a response commits to (a string), or None. See the module docstring for the order.
    strict=True: only explicit answers (JSON field, <answer>, box, ####, answer phrase), no free-text fallback."""
    text = final_text(response, think_prefilled)
    if text is None or not text.strip():
        return None
    text = _drop_echoed_instructions(text)
    last_box = text.rfind("\\boxed{")
    if last_box >= 0 and _braced(text, last_box + len("\\boxed")) is None:
        return None  # the last box never closes: the answer was cut off while being written
    boxes = _boxes(text)
    if boxes and not boxes[-1][2] and text.count('"answer"') == 0:
        filled = [b for b in boxes if b[2]]
        between = text[filled[-1][1]:boxes[-1][0]] if filled else ""
        words = re.sub(r"\\[\[\]()]|\\boxed\s*\{\s*\}|[$*#_.,:;!\s]+", " ", between).lower().split()
        if not filled or len(words) > 8 or not set(words) <= _FILLER_WORDS:
            return None  # the last box is empty after other words (`\boxed{5}. Wait, that is wrong: \boxed{}`): no answer
        # else an empty box right after the answer (`\boxed{5}\n\n**Final Answer** \boxed{}`) adds nothing
    found = _json_answer(text)
    if found is None and re.match(r"\s*(?:```(?:json)?\s*)?\{\s*\"", text) and not re.search(r"\}\s*(?:```)?\s*$", text):
        return None  # a JSON object opened and never closed: cut off before its answer field
    if found is None and "<answer>" in text:
        found = _inner_answer(re.findall(r"<answer>(.*?)(?:</answer>|$)", text, flags=re.DOTALL)[-1])
    if found is None:
        found = last_boxed(text)
        if found is not None and boxes:  # "\boxed{7}, but I'm not sure." / "\boxed{5} if n is even": no answer
            rest = _first_sentence(text[boxes[-1][1]:boxes[-1][1] + MAX_ANSWER_CHARS].split("\n", 1)[0].lstrip("$ )\\]"))
            if _UNSURE.search(rest) or _conditional_after(rest) or _case_of_several(text, *boxes[-1][:2]):
                return None
        if found is not None:  # "... \boxed{200} ... Final Answer: The final answer is $10,455$": the last word wins
            phrases = list(_PHRASE.finditer(text))
            last = phrases[-1] if phrases else None
            if last and last.start() > max(b[1] for b in _boxes(text)) and "final" in last.group(0).lower():
                later = _phrase_answer(text)  # ("... the final answer is clearly highlighted" is no answer)
                if later and _LEADING_VALUE.fullmatch(later.strip()):
                    found = later
    if found is None:
        hashes = re.findall(r"####\s*([^\n]+)", text)
        found = hashes[-1].strip() if hashes else None
        if found and re.search(r"[A-Za-z]{3}", found):  # "#### Natalia sold 72 clips in April and May."
            found = _reduce(_sentence_head(_strip_currency(found)))
    if found is None:
        found = _phrase_answer(text)
    if found is None and not strict:
        bare = text.strip()
        if _bare_formula(bare):
            found = re.sub(r"(?<!\\)\.$", "", bare)  # the whole response is a formula: `\frac{10}{9}`, `f^{-1}(x) = \ln x - 2`
        else:
            found = _conclusion_answer(text)
    if found is None or not found.strip() or len(found) > MAX_ANSWER_CHARS:
        return None
    found = found.strip()
    inline = re.fullmatch(r"\$([^$]+)\$|\\\((.+)\\\)", found, flags=re.DOTALL)  # "$42$" -> "42"
    found = (inline.group(1) or inline.group(2)).strip() if inline else found
    return found.replace(CURRENCY, "\\$")  # a dollar sign found in the text is shown as one


# ------------------------------------------------------------------------------------------------------------
# Cleaning: answer text -> canonical LaTeX-ish text (pure string work, no math yet)
# ------------------------------------------------------------------------------------------------------------
_UNICODE = {"½": "\\frac{1}{2}", "⅓": "\\frac{1}{3}", "⅔": "\\frac{2}{3}", "¼": "\\frac{1}{4}",
            "¾": "\\frac{3}{4}", "−": "-", "–": "-", "—": "-", "π": "\\pi ", "∞": "\\infty ", "√": "\\sqrt", "×": "\\times ", "·": "\\cdot ",
            "÷": "\\div ", "≤": "\\le ", "≥": "\\ge ", "≠": "\\ne ", "∪": "\\cup ", "∩": "\\cap ", "°": "^\\circ ", "¤": " ",
            "′": "'", "\u00a0": " ", "\u2009": " ", "\u202f": " ", "∈": "\\in ", "±": "\\pm ", "∅": "\\emptyset "}
_TEXT_CMDS = r"\\(?:text|textbf|textit|textrm|textsf|texttt|textnormal|mbox|hbox|mathrm|mathbf|mathit|mathsf|mathtt|" \
             r"mathnormal|operatorname\*?|boldsymbol|bm|emph|boxed|fbox|mathbb|mathcal)"


def _unwrap_commands(s):
    """Replace \\text{X} (and friends) by ` X `, innermost first, with brace matching."""
    for _ in range(50):
        match = re.search(_TEXT_CMDS + r"\s*\{", s)
        if not match:
            break
        group = _braced(s, match.end() - 1)
        if group is None:
            return s
        s = s[:match.start()] + " " + group[0] + " " + s[group[1]:]
    return re.sub(_TEXT_CMDS + r"(?![a-zA-Z])\s*", " ", s)  # \text X without braces


def _repeating_decimal(match):
    """0.1\\overline{6} -> \\frac{1}{6}: the exact value of a repeating decimal."""
    whole, fixed, period = match.group(1) or "0", match.group(2), match.group(3)
    value = Fraction(int(whole)) + (Fraction(int(fixed), 10 ** len(fixed)) if fixed else 0) \
        + Fraction(int(period), (10 ** len(period) - 1) * 10 ** len(fixed))
    return f"\\frac{{{value.numerator}}}{{{value.denominator}}}"


_SMALL_NUMBERS = {w: k for k, w in enumerate(
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen "
    "seventeen eighteen nineteen".split())}
_TENS = {w: 10 * k for k, w in enumerate("twenty thirty forty fifty sixty seventy eighty ninety".split(), 2)}
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9}
_NUMBER_WORD = "|".join(sorted(list(_SMALL_NUMBERS) + list(_TENS) + list(_SCALES), key=len, reverse=True))
_NUMBER_WORDS = re.compile(rf"\b(?:{_NUMBER_WORD})(?:(?:\s+and\s+|[\s-]+)(?:{_NUMBER_WORD}))*\b", re.IGNORECASE)


def _number_words(match):
    """'two hundred ninety-four' -> '294' (answers written in words); an ungrammatical run ('five five') is left
    as it is, and so fails to compare."""
    total, current, last = 0, 0, None
    for word in re.split(r"[\s-]+", match.group(0).lower()):
        if word == "and":
            continue
        kind = "small" if word in _SMALL_NUMBERS else "tens" if word in _TENS else word
        if (kind == "small" and last in ("small",)) or (kind == "tens" and last in ("small", "tens")) \
                or (kind == "small" and last == "tens" and _SMALL_NUMBERS[word] >= 10) \
                or (kind == "hundred" and last not in ("small", None)):
            return match.group(0)
        if kind == "small":
            current += _SMALL_NUMBERS[word]
        elif kind == "tens":
            current += _TENS[word]
        elif kind == "hundred":
            current = max(current, 1) * 100
        else:
            total, current = total + max(current, 1) * _SCALES[word], 0
        last = kind
    return str(total + current)


_DENOMINATORS = {"half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4, "fourth": 4,
                 "fourths": 4, "fifth": 5, "fifths": 5, "sixth": 6, "sixths": 6, "seventh": 7, "sevenths": 7,
                 "eighth": 8, "eighths": 8, "ninth": 9, "ninths": 9, "tenth": 10, "tenths": 10}
_FRACTION_WORDS = re.compile(r"\b(?:(\d+)|an?)\s+(" + "|".join(_DENOMINATORS) + r")\b", re.IGNORECASE)


@lru_cache(maxsize=8192)
def clean(s):
    """Canonical text of an answer: delimiters, LaTeX spacing and sizing, text commands, degree signs, thousands
    separators and ordinals gone; percent signs as `%`. None if empty or too long."""
    if s is None:
        return None
    s = s.strip()
    if not s or len(s) > MAX_ANSWER_CHARS:
        return None
    s = re.sub(r"\\\\(?=[a-zA-Z]{2})", r"\\", s)                     # \\frac (escaped twice) -> \frac
    for old, new in _UNICODE.items():
        s = s.replace(old, new)
    s = re.sub(r"\\not\s*=", "\\\\ne ", s)
    s = re.sub(r"\{\s*([^{}]+?)\s*\\choose\s*([^{}]+?)\s*\}", r"\\binom{\1}{\2}", s)      # {10 \choose 3}
    s = re.sub(r"(?<![\\a-zA-Z])sqrt\s*(?=\()", r"\\sqrt", s)                        # sqrt(2)
    s = re.sub(r"(?<![\\a-zA-Z])pi(?![a-zA-Z])", r"\\pi ", s)                          # 2pi
    s = s.replace("\\AA", "Å")
    s = re.sub(r"\\colon(?![a-zA-Z])", ":", s)
    # a time derivative written as a fraction is the dotted name: \frac{d\omega}{dt} = \dot{\omega}
    s = re.sub(r"\\frac\s*\{\s*d\s*\^\s*\{?2\}?\s*([A-Za-z]|\\[a-z]+)(_\{?\w+\}?)?\s*\}\s*\{\s*d\s*t\s*\^\s*\{?2\}?\s*\}",
               r"\\ddot{\1}\2", s)
    s = re.sub(r"\\frac\s*\{\s*d\s*([A-Za-z]|\\[a-z]+)(_\{?\w+\}?)?\s*\}\s*\{\s*d\s*t\s*\}", r"\\dot{\1}\2", s)
    s = re.sub(r"(\d*)\.(\d*)\s*\\overline\s*\{(\d+)\}", _repeating_decimal, s)
    s = re.sub(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|big|Big|bigg|Bigg)(?![a-zA-Z])\s*\.?", "", s)
    s = re.sub(r"\\(?:displaystyle|textstyle|scriptstyle|limits|nolimits)(?![a-zA-Z])", "", s)
    s = re.sub(r"\\[hv]space\*?\s*\{[^}]*\}", " ", s)
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
    degree = r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ|\\circ|\\degree"
    if not re.search(r"\\(?:sin|cos|tan|cot|sec|csc)(?![a-z])", s):
        s = re.sub(rf"(?:{degree})\s*(?:[CF]\b)?\s*$", " deg", s)
    s = re.sub(rf"(\d+(?:\.\d+)?|[A-Za-z])\s*(?:{degree})", r"(\1\\cdot\\frac{\\pi}{180})", s)
    s = re.sub(degree, " ", s)
    s = re.sub(r"^(?:[a-z]\s*\\in\s*)?(?:\\mathbb\s*\{?\s*R\s*\}?|\\R)$", r"(-\\infty, \\infty)", s)   # \mathbb{R}
    s = re.sub(r"^\\\{\s*([a-z])\s*(?:\\mid|\||:)\s*\1\s*\\in\s*(?:\\mathbb\s*\{?\s*R\s*\}?|\\R)\s*\\\}$",
               r"(-\\infty, \\infty)", s)                                        # \{x \mid x \in \mathbb{R}\}
    s = re.sub(r"\\operatorname\s*\{\s*(sgn|sign|max|min)\s*\}|\\(sign)(?![a-z])", lambda m: "\\sgn" if "sign" in m.group(0)
               else "\\" + m.group(1), s)                                             # \operatorname{sgn} -> \sgn
    s = _unwrap_commands(s)
    s = re.sub(r"(\d)\s*\^\s*\{?\s*(?:st|nd|rd|th)\s*\}?", r"\1", s)           # 12^{th} -> 12
    s = re.sub(r"(\d)(?:st|nd|rd|th)\b", r"\1", s)                             # 12th -> 12
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
    s = re.sub(_ROUNDING_NOTE.pattern + r"$", "", s, flags=re.I).strip() or s           # 12.3 (to 3 s.f.)
    # thousands separators: 1,000 and 1,234,567.5 -- not `1, 000` or `1,2` (lists), and not inside a list
    thousands = re.compile(r"(?<![\d,.(\[{])(?!0)\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,)\]}])")
    if thousands.search(s) and "," not in thousands.sub("", s):
        s = thousands.sub(lambda m: m.group(0).replace(",", ""), s)
    if re.fullmatch(r"[-+]?\d{1,3}(?: \d{3})+(?:\.\d+)?", s):                    # 1 000 000
        s = s.replace(" ", "")
    s = _NUMBER_WORDS.sub(_number_words, s)
    s = _FRACTION_WORDS.sub(lambda m: f"\\frac{{{m.group(1) or 1}}}{{{_DENOMINATORS[m.group(2).lower()]}}}", s)
    s = re.sub(r"\s*(?:,\s*)?(?:for all|for every|for any|\\forall)\b.*$", "", s)            # f(x) = x for all x
    # a domain exclusion after the answer: `\frac{1}{x-2}, x \ne 2`, `A = ..., for \omega^2 \ne 4`
    s = re.sub(r"(?:\s*,\s*(?:(?:for|where|with|provided(?: that)?)\s+)?|\s+(?:for|where|with|provided(?: that)?)\s+)"
               r"(?:\\?[A-Za-z]+)(?:\^\{?\d+\}?)?\s*\\ne\s*[-+\w.\\{}]+\s*$", "", s)
    s = re.sub(r"\\(?:emptyset|varnothing)|\\\{\s*\\\}", r"\\emptyset", s)                   # {} is the empty set
    s = re.sub(r"^(?:[A-Za-z\s]{0,40}?\b(?:is|are)\s+)?(?:the\s+)?(?:empty(?:\s+set)?|no\s+(?:real\s+)?solutions?)$",
               r"\\emptyset", s, flags=re.I)                                          # "the solution set is empty"
    # every real number is the interval (-oo, oo)
    s = re.sub(r"^(?:[A-Za-z\s]{0,40}?\b(?:is|are)\s+)?(?:[a-z]\s*\\in\s*)?(?:the\s+set\s+of\s+)?(?:all|every|the)?\s*(?:real\s+(?:numbers?|values?)|reals)(?:\s+[a-z])?$",
               r"(-\\infty, \\infty)", s, flags=re.I)
    s = re.sub(r"\s*,?\s*(?:where\s+)?[a-z]\s*\\in\s*(?:\\mathbb\s*)?\{?\s*[ZN]\s*\}?\s*$", "", s)  # ..., k \in Z
    return s or None


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
    return any(_same_function(q, g) for q in _renamed_constants(p, g))


def _same_function(p, g):
    """Agreement at random rational points (see _exprs_equal)."""
    if p.free_symbols != g.free_symbols:
        return False
    rng = random.Random(0)
    symbols = sorted(g.free_symbols, key=str)
    checked = 0
    for _ in range(10):
        point = {s: sympy.Rational(rng.randint(-40, 40), rng.randint(1, 9)) + sympy.Rational(1, 7) for s in symbols}
        pv, gv = p.subs(point), g.subs(point)
        if pv.has(sympy.nan, sympy.zoo) or gv.has(sympy.nan, sympy.zoo):
            continue
        if not _numbers_equal(pv, gv):
            return False
        checked += 1
        if checked == 4:
            return True
    return False


def _rounded_value(decimal_text, exact):
    """Is `decimal_text` the exact number `exact` (one with no finite decimal expansion: 1/12, pi, sqrt 17) rounded?
    Only a decimal with 4+ decimals and DECIMAL_DIGITS+ significant digits may stand for it; None when the rule does
    not apply (then the two compare exactly)."""
    decimal = re.fullmatch(r"[-+]?(\d*)\.(\d+)", decimal_text)
    if exact.free_symbols or (exact.is_Rational and exact.q in (1, 2, 4, 5, 8, 10)) or not exact.is_number:
        return None
    digits = len((decimal.group(1) + decimal.group(2)).lstrip("0"))
    if digits < DECIMAL_DIGITS or len(decimal.group(2)) < 4:
        return None if exact.is_Rational else False
    half_unit = sympy.Rational(1, 2 * 10 ** len(decimal.group(2)))
    return bool(abs(sympy.N(exact - parse_math(decimal_text), 30)) <= half_unit)


def _values_equal(p, g):
    """Single values (cleaned text, no units, lists or relations)."""
    p, g = _mixed_number(p), _mixed_number(g)
    if _SIMPLE_NUMBER.fullmatch(p) and _SIMPLE_NUMBER.fullmatch(g):
        return Fraction(p) == Fraction(g)  # the common case, without sympy
    if re.fullmatch(r"[A-Za-z]{2,}", p) and re.fullmatch(r"[A-Za-z]{2,}", g):
        return p.lower() == g.lower()  # a word's letters are not commuting variables: NO is not ON
    pp, gp = parse_math(p), parse_math(g)
    if pp is None or gp is None:
        return False
    try:
        gold_has_decimal = re.search(r"\.\d*[1-9]", g) is not None
        if re.fullmatch(r"[-+]?\d*\.\d+", p) and not gold_has_decimal:
            rounded = _rounded_value(p, gp)       # 0.0833333333 for 1/12, 2.6667 for 8/3, 3.14159 for pi
            if rounded is not None:
                return rounded
        if re.fullmatch(r"[-+]?\d*\.\d+", g) and "." not in p:
            rounded = _rounded_value(g, pp)       # \sqrt{17} for a gold 4.123105625617661
            if rounded is not None:
                return rounded
        return _exprs_equal(pp, gp)
    except (TypeError, ValueError, ZeroDivisionError, OverflowError, RecursionError, AttributeError):
        return False


# ------------------------------------------------------------------------------------------------------------
# Units and percent
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
_NOT_UNITS = set("""or and is are was were be not no more less than at least most about around approximately approx
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


def _unit_word(word):
    """A known unit or an allowed count noun (singular or plural)."""
    if _unit_key(word):
        return True
    plain = word.lower().rstrip(".")
    return plain in _COUNT_NOUNS or plain.rstrip("s") in _COUNT_NOUNS or plain[:-2] in _COUNT_NOUNS \
        or (plain.endswith("ies") and plain[:-3] + "y" in _COUNT_NOUNS)


_UNIT_TOKEN = re.compile(r"(?:^|(?<=[\s\d}/)]))([A-Za-zÅ][A-Za-z.]*)(\s*\^\s*\{?\s*-?\d+\s*\}?)?\s*$")


def _unit_key(word):
    """Canonical key of a known unit, or None."""
    key = _UNITS.get(word) or _UNITS.get(word.lower()) or _UNITS.get(word.lower().replace(".", ""))
    if key is None and len(word) > 1:
        key = _UNITS.get(word.lower().rstrip("."))
    return key


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
        key = _unit_key(word)
        if key is None:
            plain = word.lower().rstrip(".")
            if not _unit_word(word) or plain in _NOT_UNITS or words >= 2:
                break
            key, words = "word:" + plain.rstrip("s"), words + 1
        units.insert(0, key + exponent)
        rest = rest[:match.start()].rstrip()
        rest = re.sub(r"(?:\s*(?:/|\\cdot|\*|\bper\b))$", "", rest).rstrip()
    if not units or not rest or not re.search(r"[\d}\)a-zA-Z]$", rest) or rest.endswith("\\"):
        return s, None
    if len(units) == 1 and len(units[0]) == 1 and not s[len(rest):].startswith(" "):
        return s, None  # "5m" is 5*m; a one-letter unit needs a space: "5 m"
    return rest, " ".join(units)


def _units_conflict(pu, gu):
    """Both answers carry known units, and they differ (5 m vs 5 cm, 9 p.m. vs 9 a.m.)."""
    known = [u for u in (pu, gu) if u and "word:" not in u]
    return len(known) == 2 and pu != gu


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
    if _equiv(_as_text(value / 100), other):
        return True
    return bool(abs(value) >= 1) and _equiv(pct, other)


def _as_text(expr):
    """A rational back to text our parser reads (used for X/100)."""
    if expr.is_Rational:
        return f"\\frac{{{expr.p}}}{{{expr.q}}}" if expr.q != 1 else str(expr.p)
    raise ValueError("not rational")


# ------------------------------------------------------------------------------------------------------------
# Structure: lists, tuples, sets, intervals, relations, matrices
# ------------------------------------------------------------------------------------------------------------
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
    return inner if _balanced(inner) else None


def _balanced(s):
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
    """A name for the answer rather than a value: x, x_1, f(x), AB, P(A), \\angle ABC, (x, y)."""
    if any(w.islower() and (w in _NOT_UNITS or is_english(w)) for w in re.findall(r"(?<![\\A-Za-z])[A-Za-z]{2,}", side)):
        return False
    return _LABEL.fullmatch(side) is not None and not re.fullmatch(r"\s*\\(?:pi|infty|e)\s*", side) \
        and not re.search(r"\\(?:sqrt|sin|cos|tan|log|ln)\b|\\frac\s*\{\s*\d", side)


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
    if inner is None and re.fullmatch(r"\{[^{}]*,[^{}]*\}", s):
        inner = s[1:-1]                                               # {1, 2, 3} written without backslashes
    if inner is not None and "|" not in inner and ":" not in inner:
        return _Shape("set", _split_top(inner, [",", ";"]) if inner.strip() else [])
    if re.fullmatch(r"[-+]?\d+(?:\.\d+)?(?:\s+[-+]?\d+(?:\.\d+)?)+", s):
        return _Shape("list", s.split())  # `1 \quad 2` (cleaned to `1 2`): two values side by side, a list
    groups = _split_top(s, [";"])
    if len(groups) > 1 and all(len(_split_top(x, [","])) > 1 for x in groups):
        return _Shape("list", groups)  # `p=5,q=2; p=7,q=2`: semicolons separate solutions, commas their parts
    parts = [p for p in _split_top(s, [",", ";", "and", "or", "\\quad"]) if p]
    parts = [x for p in parts for x in _expand_pm(p)]           # 1 \pm \sqrt 2 -> two answers
    if len(parts) > 1:
        sides = [_split_top(p, ["="]) for p in parts]
        if all(len(x) == 2 and _is_label(x[0]) for x in sides):
            labels = [_canon_label(x[0]) for x in sides]
            if len(set(labels)) == 1:
                return _Shape("list", [x[1] for x in sides])         # x = 1 or x = 2: the solutions
            return _Shape("assign", [x[1] for x in sides], labels=labels)
        return _Shape("list", parts)
    sides = _split_top(s, ["="])
    if len(sides) == 2 and _is_label(sides[0]) and _shape(sides[1]).kind != "single":
        return _shape(sides[1])                                          # (x, y) = (2, 3) -> (2, 3)
    for open_, close in (("(", ")"), ("[", "]"), ("(", "]"), ("[", ")")):
        inner = _enclosed(s, open_, close)
        if inner is not None:
            items = _split_top(inner, [","]) if "," in inner else _split_top(inner, [";"])
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
        if not any(_canon(item) == _canon(k) or _equiv(item, k) for k in kept):
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
        if inner is not None and len(_split_top(inner, [","])) == 2:
            lo, hi = _split_top(inner, [","])
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
    ps, gs = _split_top(p, ["\\cup", "or"]), _split_top(g, ["\\cup", "or"])
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


def _is_working(side):
    """A computation with no unknowns (`5+5+1`, `\\frac{3}{4} \\cdot 8`): the work before a chain's value."""
    value = parse_math(side)
    return value is not None and not value.free_symbols


def _chain_value(sides):
    """A chain of three or more sides (`z = 1 + 1 = 2`) stands for its first side if that is a label, and its last:
    the sides between are working."""
    if len(sides) < 3:
        return sides
    return [sides[0], sides[-1]] if _is_label(sides[0]) else sides[-1:]


def _relations_equal(p_sides, g_sides):
    """At least one side has '='. Labels are stripped; the prediction's value is its last side (see below)."""
    g_sides = _chain_value(g_sides)
    g_value = parse_math(g_sides[0]) if len(g_sides) == 1 else None
    g_constant = g_value is not None and not g_value.free_symbols
    if len(g_sides) == 1 or (len(g_sides) == 2 and _is_label(g_sides[0])):
        gold = g_sides[-1]
        if len(p_sides) == 1:
            return _equiv(p_sides[0], gold)
        if len(g_sides) == 2 and len(p_sides) == 2 and _is_label(p_sides[0]):
            if _canon_label(p_sides[0]) != _canon_label(g_sides[0]):  # x = 3 is not y = 3; but `P = 100 - 0.8X_d`
                return _equations_equal(p_sides, g_sides)              # is `X_d = 125 - 1.25P` solved for P
            return _equiv(p_sides[1], gold)
        if len(g_sides) == 2 and len(p_sides) == 2 and not _is_label(p_sides[0]):
            return _equations_equal(p_sides, g_sides)                 # 2y = 4x + 2 vs y = 2x + 1
        if re.fullmatch(r"[-+]?\d+(?:\.\d+)?", p_sides[0].strip()) or len({_canon(x) for x in p_sides}) == 1:
            return all(_equiv(x, gold) for x in p_sides)              # 3 = 3, \sqrt{16} = 4: each side is the value
        # the last side is the value (`c = I(0)`); a side before it is a label, the quantity asked for, or working:
        # a computation without unknowns (`x = 5+5+1 = 7 = 11` is 11, its slips are not graded); a side with an
        # unknown must itself be the answer (`2x + 3 = 7` is an equation, not 7)
        values = [s for s in p_sides[:-1] if not (_is_label(s) or (g_constant and _is_quantity_name(s)) or _is_working(s))]
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
    match = _MATRIX.fullmatch(s)
    if not match:
        return None
    body = match.group(2).strip().rstrip("\\")  # a row break before \end (cleaned to `\end` when escaped twice)
    rows = [r for r in re.split(r"\\\\", body) if r.strip()]
    return match.group(1), [[c.strip() for c in r.split("&")] for r in rows]


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
    if not matrices or len(matrices) > 6 or None in matrices or re.search(r"[{}\\](?!cdot|times)", skeleton):
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


# ------------------------------------------------------------------------------------------------------------
# Equivalence
# ------------------------------------------------------------------------------------------------------------
_CHOICE = re.compile(r"\(?\s*([A-E])\s*\)?")


def _canon(s):
    s = re.sub(r"(?<=\d)\s+(?=\d)", " ", s)   # `1 2` (from `1 \quad 2`) stays two numbers, never 12
    s = re.sub(r"(?<!\d)\s+|\s+(?!\d)", "", s)
    return re.sub(r"([_^])\{(\w)\}", r"\1\2", s)


def _is_words(s):
    """Plain words (`even`, `Monday`, `no solution`): a run of 3+ letters; `xy` stays a product of symbols."""
    return re.fullmatch(r"[A-Za-z][A-Za-z\s\-']*", s) is not None and re.search(r"[A-Za-z]{3}", s) is not None


_COPULA = re.compile(r"^(?:(?:so|thus|hence|therefore),?\s+)?(?:the\s+[\w\s()'^{}-]{0,60}?|[A-Za-z](?:\s*\(\s*[a-z]\s*\))?\s+)"
                     r"\b(?:is|are)\s+(?:an?\s+)?", re.IGNORECASE)  # "the function is even", "f is odd" (not "it is correct")


def _words(s):
    """Words compared: lowercase, "odd function" is "odd", "neither even nor odd" is "neither"."""
    s = " ".join(s.lower().replace("-", " ").split())
    s = re.sub(r"^neither (even|odd) nor (?!\1)(even|odd)$", "neither", s)
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
_CASE_WORD = re.compile(r"\b(?:if|when|whenever|for|otherwise|else)\b|\\begin\{cases\}", re.I)
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
    return (lambda v: bool(test(left.xreplace(v), right.xreplace(v)))), left.free_symbols | right.free_symbols, set()


def _cases(s):
    """[(value, condition)] of an answer by cases (`\\begin{cases} 1 & n odd \\\\ 0 & n even \\end{cases}`, "5 if n is
    even, 6 if n is odd", "3 when a > 0 and 4 otherwise", "0 for even n and 1 for odd n", `f(x) = x if x \\ge 0 and
    f(x) = -x if x < 0`), with condition None for "otherwise"; None when s is not one."""
    if not _CASE_WORD.search(s) or len(s) > 400:
        return None
    env = re.fullmatch(r"\s*\\begin\{cases\}(.*)\\end\{cases\}\s*", s, re.DOTALL)
    if env:
        rows = [row.split("&") for row in re.split(r"\\\\", env.group(1)) if row.strip()]
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
        value = _split_top(value.strip(), ["="])[-1].strip()
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
    pc, gc = _cases(p), _cases(g)
    if pc is None and gc is None:
        return None
    sides = []
    for cases, text in ((pc, p), (gc, g)):
        if cases is None:
            cases = parse_math(text)
            if cases is None:
                return False
        sides.append(cases)
    symbols, integers = set(), set()
    for cases in sides:
        if isinstance(cases, list):
            for value, test in cases:
                symbols |= value.free_symbols | (test[1] if test else set())
                integers |= test[2] if test else set()
        else:
            symbols |= cases.free_symbols
    if len(symbols) > 3:
        return False
    names = sorted(symbols, key=str)
    grids = [[sympy.Integer(k) for k in (-3, -2, -1, 0, 1, 2, 3, 4, 5, 6)] if x in integers else
             [sympy.Integer(k) for k in (-3, -1, 0, 1, 2, 5)] + [sympy.Rational(7, 2), sympy.Rational(-5, 3)] for x in names]
    met, compared = set(), 0
    for values in itertools.islice(itertools.product(*grids), 120):
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


def _equiv(p, g):
    """Both cleaned. Structure first (choices, words, intervals, lists, units, relations), then values."""
    if p == g or _canon(p) == _canon(g) or _decimal_comma_equal(p, g):
        return True
    if _CASE_WORD.search(p) or _CASE_WORD.search(g):
        by_cases = _cases_equal(p, g)  # "5 if n is even, 6 if n is odd", \begin{cases}, against cases or a formula
        if by_cases is not None:
            return by_cases
    (p_value, p_domain), (g_value, g_domain) = _split_domain(p), _split_domain(g)
    if g_domain:  # a domain the gold states is part of the answer: `x^2 + 2, x \ge 0` (an inverse function)
        return p_domain is not None and _intervals_equal(p_domain, g_domain) is True and _equiv(p_value, g_value)
    if p_domain:  # one only the prediction states restricts nothing the gold asked for
        p = p_value
    if "\\emptyset" in (p, g):
        sides = _split_top(p, ["="])  # `A \cap B = \emptyset`: a set named by an operation on named sets
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
    if _is_words(g):  # a word answer, alone or as the predicate of a sentence: "the function is even" for `even`
        predicate = _COPULA.sub("", p, count=1)
        return any(_is_words(x) and _words(x) == _words(g) for x in (p, predicate))
    p, g = (_NOT_EQUAL.sub(r"(-\\infty, \2) \\cup (\2, \\infty)", x) for x in (p, g))
    if _interval_like(g) or _interval_like(p):
        same = _intervals_equal(p, g)
        if same is not None:
            return same
        if _interval_like(g) and "=" not in g:
            return False
    labelled = _split_top(p, ["="])
    if len(labelled) == 2 and _is_label(labelled[0]) and _matrix(labelled[1]):
        p = labelled[1]  # A^{-1} = \begin{bmatrix}...\end{bmatrix}
    if _matrix(g) or _matrix(p):
        return _matrices_equal(p, g)
    p_shape, g_shape = _shape(p), _shape(g)
    if g_shape.kind == "single" and re.search(r"\\(?:pm|mp)", p) and not re.search(r"\\(?:pm|mp)", g):
        values = _expand_pm(p)  # `3 \pm 0`, `\pm\sqrt{0}`: two values that coincide are that one value
        return len(values) > 1 and all(_equiv(v, values[0]) for v in values[1:]) and _equiv(values[0], g)
    if p_shape.kind != "single" or g_shape.kind != "single":
        return _shapes_equal(p_shape, g_shape)
    return _item_equal(p, g)


def _item_equal(p, g):
    """One answer each (no top-level list)."""
    (pv, pu), (gv, gu) = split_unit(p), split_unit(g)
    if pu == "%" or gu == "%":
        return _percent_equal(pv, pu, gv, gu)
    if "deg" in (pu, gu) and {pu, gu} <= {"deg", "rad", None}:  # 60^\circ = \frac{\pi}{3} (an angle in either unit)
        (degrees, _), (other, _) = ((pv, pu), (gv, gu)) if pu == "deg" else ((gv, gu), (pv, pu))
        if "\\pi" in other and "\\pi" not in degrees:
            return _equiv(f"({degrees})\\cdot\\frac{{\\pi}}{{180}}", other)
    if _units_conflict(pu, gu):
        return False
    if (pu or gu) and _equiv(pv, gv):
        return True
    ratio = [_split_top(x, [":"]) for x in (p, g)]
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
    p_sides, g_sides = _split_top(p, ["="]), _split_top(g, ["="])
    if "\\approx" in p and _MEASUREMENT.fullmatch(g) and re.search(r"\\approx\s*[^=<>]+$", p) \
            and _equiv(_split_top(p, ["=", "\\approx"])[-1], g):
        return True  # P = \frac23 \approx 0.67 for a gold rounded to 0.67: the rounding asked for is stated
    if "\\approx" in p:  # x = 1/3 \approx 0.33: the approximation is a remark when an exact value is given
        exact = [_split_top(side, ["\\approx"])[0] for side in p_sides]
        exact = [x for x in exact if x]
        symbol_named = re.fullmatch(r"\\?[A-Za-z]+(?:_\{?\w+\}?)?", exact[-1]) and exact[-1] != "\\pi" or (
            exact[-1] == "\\pi" and "\\pi" not in g)  # `\pi \approx 3 \times 10^{-3}` where \pi names a parallax
        if symbol_named:
            p_sides = _split_top(p, ["=", "\\approx"])[-1:]
        elif any(not _is_label(x) for x in exact):
            p_sides = exact
        else:
            p_sides = _split_top(p, ["=", "\\approx"])
    if len(p_sides) > 1 or len(g_sides) > 1:
        return _relations_equal(p_sides, g_sides)
    p = p_sides[0]
    numerals = [re.fullmatch(r"\(?([-+]?[0-9A-Za-z]+)\)?(?:_\{?\(?(\d+)\)?\}?)?", _canon(x)) for x in (p, g)]
    if numerals[1] and numerals[1].group(2) or numerals[0] and numerals[0].group(2) and numerals[1]:
        # a numeral in another base compares digit by digit: 1011_2 = (1011)_2 = 1011_{(2)}; the prediction may leave
        # the base out, and two bases must agree; a plain gold whose digits are a base-b numeral may have left the
        # base out too (1011_2 = 1011; not 10110_2, and 12_2 is no numeral)
        (pd, pb), (gd, gb) = numerals[0].groups() if numerals[0] else (None, None), numerals[1].groups()
        return pd is not None and pd.upper() == gd.upper() and (pb is None or int(pb) == int(gb or pb)) \
            and _valid_numeral(pd, int(pb or gb or 10))
    return _values_equal(p, g)


@lru_cache(maxsize=4096)
def gold_is_valid(gold):
    """Can this gold answer be graded at all? Not when it is empty, longer than MAX_ANSWER_CHARS, has unbalanced
    brackets or no letter or digit. (Golds that are not formulas, like `52_8` or `3:1`, still compare.)"""
    g = clean(gold)
    return g is not None and bool(re.search(r"[A-Za-z0-9]", g)) and _balanced(g)


def _is_equiv_unbounded(pred, gold):
    try:
        p, g = clean(pred), clean(gold)
        if p is None or g is None:
            return False
        return bool(_equiv(p, g))
    except Exception:  # noqa: BLE001 -- sympy raises many kinds (PrecisionExhausted, ...): unsure means not equal
        return False


def _math_reward_unbounded(response, gold, strict=False, think_prefilled=False):
    answer = extract_answer(response, strict=strict, think_prefilled=think_prefilled)
    return 1.0 if answer is not None and _is_equiv_unbounded(answer, gold) else 0.0


# ------------------------------------------------------------------------------------------------------------
# The public checks, each bounded in time
# ------------------------------------------------------------------------------------------------------------
class _Late(BaseException):
    """Raised by the alarm inside a check that ran past its time (a BaseException: no `except Exception` in sympy
    can swallow it)."""


def _bounded(op, args, timeout_s):
    """op(*args) with a hard time limit: an alarm in the main thread (the check is interrupted between Python
    bytecodes; the parser's size guards keep every single C-level step short), a worker process elsewhere."""
    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "setitimer"):
        return _pool_call(op.__name__, args, timeout_s)

    def late(signum, frame):
        raise _Late()

    previous = signal.signal(signal.SIGALRM, late)
    outer_left, _ = signal.setitimer(signal.ITIMER_REAL, timeout_s)
    start = time.monotonic()
    try:
        return op(*args)
    except _Late:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left:  # somebody else's timer was running: give it back what is left of it
            signal.setitimer(signal.ITIMER_REAL, max(outer_left - (time.monotonic() - start), 1e-3))


def is_equiv(pred, gold, timeout_s=DEFAULT_TIMEOUT_S):
    """Are the answer strings `pred` and `gold` the same mathematical object? Never raises; False when unsure or
    when the check runs past timeout_s."""
    return bool(_bounded(_is_equiv_unbounded, (pred, gold), timeout_s))


def math_reward(response, gold, strict=False, think_prefilled=False, timeout_s=DEFAULT_TIMEOUT_S):
    """1.0 if the answer extracted from `response` equals `gold`, else 0.0 (also when the check runs past
    timeout_s). strict / think_prefilled: see extract_answer."""
    return _bounded(_math_reward_unbounded, (response, gold, strict, think_prefilled), timeout_s) or 0.0


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
# Worker processes with a hard per-item timeout (workers.py: killed when late)
# ------------------------------------------------------------------------------------------------------------
def _hang_or(op):
    """Tests only: with REWARD_TEST_HANG_S set in a worker's environment, a check of "<hang>" sleeps that long."""
    def run(*args):
        if args and args[0] == "<hang>" and float(os.environ.get("REWARD_TEST_HANG_S", "0")):
            time.sleep(float(os.environ["REWARD_TEST_HANG_S"]))
        return op(*args)
    return run


WORKER_OPS = {"_math_reward_unbounded": _hang_or(_math_reward_unbounded),
              "_is_equiv_unbounded": _hang_or(_is_equiv_unbounded)}


def _run_pool(op, arg_lists, workers, timeout_s, memory_limit_gb, counts):
    """Results of op(*args) for each args in arg_lists (None when late or crashed), `workers` processes at a time."""
    results = []
    for kind, value in get_pool("reward", memory_limit_gb * 2**30).run(op, arg_lists, workers, timeout_s):
        if kind != "ok":
            counts["timeouts" if kind == "timeout" else "errors"] += 1
        results.append(value if kind == "ok" else None)
    return results


def _pool_call(op_name, args, timeout_s):
    return _run_pool(op_name, [args], 1, timeout_s, 4.0, {"timeouts": 0, "errors": 0})[0]


def close_pool():
    """Stop the math grading workers (the next batch starts new ones)."""
    close_pools("reward")


def score_batch(responses, golds, workers=2, timeout_s=DEFAULT_TIMEOUT_S, ids=None, stats=None,
                memory_limit_gb=4.0, strict=False, think_prefilled=False):
    """math_reward for each (response, gold) in parallel worker processes, each item with a hard timeout.

    A late item's worker is killed (SIGKILL also stops C-level big-integer work) and replaced; a late or
    crashing item scores 0.0. The batch always returns a list of len(responses) floats. `stats`, when a dict,
    receives counts: timeouts, errors, invalid_gold. A gold answer that cannot be graded is warned about
    (with its id from `ids`) and scores 0.0 without being checked. workers=0 grades in this process (each item
    still bounded by timeout_s through math_reward's alarm).
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
            scores[k] = math_reward(responses[k], golds[k], strict, think_prefilled, timeout_s)
    else:
        results = _run_pool("_math_reward_unbounded", [(responses[k], golds[k], strict, think_prefilled) for k in todo],
                            workers, timeout_s, memory_limit_gb, counts)
        for k, result in zip(todo, results):
            scores[k] = float(result or 0.0)
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
    parser.add_argument("--strict", action="store_true", help="explicit answers only (no free-text fallback)")
    args = parser.parse_args()
    if args.response is not None:
        if args.gold is None:
            parser.error("--response needs --gold")
        answer = extract_answer(args.response, strict=args.strict)
        print(f"extracted: {answer!r}")
        print(f"gold:      {args.gold!r} ({'valid' if gold_is_valid(args.gold) else 'INVALID'})")
        print(f"correct:   {math_reward(args.response, args.gold, strict=args.strict) == 1.0}")
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
    scores = score_batch(responses, golds, workers=args.workers, timeout_s=args.timeout_s, stats=stats,
                         strict=args.strict)
    elapsed = time.time() - start
    print(f"{len(scores)} rows, accuracy {sum(scores) / max(len(scores), 1):.4f}, {elapsed:.1f}s, {stats}")


# ------------------------------------------------------------------------------------------------------------
# Code problems (rows with `tests`): the sandboxed code reward lives in code_reward.py; score_problems picks the
# reward by each row's data, so the loop calls one function.
# ------------------------------------------------------------------------------------------------------------


def score_problems(responses, problems, workers=2, timeout_s=DEFAULT_TIMEOUT_S, code_timeout_s=None, stats=None,
                   strict=False, think_prefilled=False):
    """Grade responses[i] against problems[i] by the problem's data: a row with `tests` gets the code reward (its
    program run against the tests in a sandbox, hard limit code_timeout_s seconds per item, default
    code_reward.DEFAULT_TIMEOUT_S), a row with `answer` the math grader (score_batch, timeout_s). Returns floats in
    [0, 1]; `stats` receives both graders' counts (timeouts, invalid_gold, code_timeouts, sandbox_refusals, ...).
    strict, think_prefilled: see extract_answer (math rows only)."""
    if len(responses) != len(problems):
        raise ValueError(f"{len(responses)} responses but {len(problems)} problems")
    scores = [0.0] * len(responses)
    is_code = [p.get("tests") is not None for p in problems]
    math_rows = [i for i, c in enumerate(is_code) if not c]
    code_rows = [i for i, c in enumerate(is_code) if c]
    if math_rows:
        part = score_batch([responses[i] for i in math_rows], [problems[i]["answer"] for i in math_rows], workers=workers,
                           timeout_s=timeout_s, ids=[problems[i]["id"] for i in math_rows], stats=stats,
                           strict=strict, think_prefilled=think_prefilled)
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
