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
  3. \\boxed{...} / \\fbox{...}                 (empty boxes, e.g. an echoed "put your answer within \\boxed{}", are
                                               skipped; boxes joined only by "and"/","/"or" are ONE list answer, so
                                               `\\boxed{3} or \\boxed{5}` is a hedge, not a 5)
  4. `#### 18`                                 (GSM8K)
  5. an answer phrase: "the final answer is", "the answer (arabic numerals) is", "Answer:", "A:" (line start),
     "**Final Answer:**" ... up to the end of the sentence
  6. (default mode only; `strict=True` skips it) the conclusion: the last sentence that contains a number or a
     formula, when it names one answer (a single candidate, or the one after a final `=` / "is").
  train.py and eval.py both use the default mode.

Equivalence (`is_equiv(pred, gold)`), the conventions, each tested in tests/test_reward.py:
- Exact values compare exactly: integers of any size, fractions, radicals, pi (`2^64-1` is not `2^64`; `1/2^99`
  is not `1/2^98`). Irrational values are compared to 50 significant digits, never with a loose tolerance.
- A decimal in the PREDICTION is an exact number: `0.5` = `1/2`, but `0.333` != `1/3` and `12.57` != `4\\pi`;
  `0.\\overline{3}` = `1/3`.
- A gold written as a decimal or in scientific notation (`20.39`, `4.4e7`, `1.70 \\times 10^4`) is a rounded
  measurement (Minerva-style physics). ROUNDED_GOLD decides what it accepts; the default "exact" accepts the
  same number written any way (`1.70e4` = `1.70 \\times 10^4` = `17000`), and nothing else: `20.385` is not `20.39`.
  ("half_ulp": anything strictly within half a unit of the gold's last digit; see its comment.)
- Percent: `X\\%` is the number X/100, so `25\\%` = `0.25`. Because "what percent" answers are often written
  without the sign, `X\\%` also equals the bare X when X >= 1 (`50\\%` = `50`); below 1 only the value counts:
  `0.5\\%` != `0.5`.
- Units: a trailing unit (`5\\text{ cm}`, `99\\pi \\text{ square inches}`, `12^{\\text{th}} grade`, `9 a.m.`) is dropped
  when only one side has one; when both sides name known units they must be the same unit (`5 m` != `5 cm`,
  `9 p.m.` != `9 a.m.`). Other trailing text is not a unit: `3 \\text{ or more}`, `3 \\text{ is not the answer}` fail.
- Several answers: a bare list `1, 2`, a set `\\{1,2\\}`, `x \\in \\{1,2\\}`, `1 \\text{ and } 2`, `x = 1 \\text{ or } x = 2`
  and `\\pm 1` are the same unordered multiset; `(1, 2)` is an ordered tuple (and `[0, 1)` an interval whose
  brackets must match); `a = 2, b = 3` and `(x, y) = (2, 3)` are the tuple `(2, 3)`. A prediction with more or fewer
  answers than the gold is wrong: `3 \\text{ or } 5`, `B \\text{ or } C`, `a = 3, b = 5` are not `3`, `B`, `5`.
- Relations: a label is stripped (`x = 3`, `f(x) = 2x+1`, `AB = 5`, `m+n = 29` for 29); every other side of a chain
  must equal the gold (`x = 2+3 = 5` is 5; `x = 3 = 5` is nothing); an equation is compared as an equation
  (`2y = 4x+2` = `y = 2x+1`), an inequality as a set (`1 \\le n \\le 5` is not `5`; `x > 5` = `(5, \\infty)`).
- Letters: `e` is Euler's number, `i` the imaginary unit; a run of letters alone is a word compared in order
  (`NO` != `ON`); `A`-`E` golds are multiple-choice letters (`\\textsf{(D)}`, `B. 12` are `B`/`D`; `A B C D E` is not).
- Undefined things are never numbers: `0^0`, `\\infty^0`, `1/\\infty`, `\\infty - \\infty` do not parse.
- `vmatrix` is a determinant (a number); `pmatrix`/`bmatrix` are matrices compared entry by entry.
- A gold that cannot be parsed never yields reward 1 (`score_batch` warns and counts it).

Safety: untrusted text is never evaluated. `_Parser` builds the sympy tree itself (no `eval`, `sympify` or
`parse_expr`, which run Python), and refuses numbers too large to compute (power towers, huge factorials,
`\\sin(e^{e^{e^5}})`). Every check is bounded in time: `score_batch` grades in worker processes killed at a hard
timeout (SIGKILL also stops C-level big-integer work); in-process calls (`math_reward`, `is_equiv`) run under an
alarm in the main thread and in a worker process elsewhere.
Measured agreement with real model outputs: README "Grader accuracy" (`python bench.py grader`).
"""
import argparse
import json
import math
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

from workers import close_pools, get_pool

MAX_ANSWER_CHARS = 1000      # longer "answers" are not answers
MAX_RESPONSE_CHARS = 200_000  # only the last this many characters of a response are searched for its answer
MAX_INT_DIGITS = 400         # integer literals longer than this are refused
MAX_RESULT_BITS = 20_000     # refuse to compute b**e (and n!) past ~6000 decimal digits
MAX_FUNCTION_ARG = 1e6       # sin(x), exp(x), ... of a constant |x| beyond this are refused (sin(10^100))
MAX_DEPTH = 60               # nesting depth of the expression parser
MAX_SYMBOLIC_POWER = 1000    # x^{1001}, 2^{1001 x}: refused (evaluating them at sample points is unbounded work)
DEFAULT_TIMEOUT_S = 5.0      # hard limit per graded item (worker processes and in-process alarm)
EXACT_DIGITS = 30            # significant digits asked of the difference of two irrational values...
ZERO_TEST_BITS = 1200        # ...and the working precision (bits) beyond which a difference with none is zero
DECIMAL_DIGITS = 6           # a decimal prediction this precise (and with 4+ decimals) may stand for an exact gold
# What a gold written as a decimal accepts (see the docstring): "exact" = the same number, written any way;
# "half_ulp" = anything strictly within half a unit of the gold's last stated digit (0.533 for 0.53). Careful
# graders of Minerva-style answers (the verdicts of the dev set) reject 0.533 for 0.53, so "exact" is the default.
ROUNDED_GOLD = "exact"


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
    words = re.sub(r"\\[()\[\]]|\$|\\q?quad|\\text\s*\{|\\mbox\s*\{|[{}&]|\\\\", " ", between).replace(",", " , ").split()
    if len(words) > 4 or not all(w.lower() in (",", ";", "and", "or", "maybe", "perhaps", "possibly") for w in words):
        return None
    return "or" if any(w.lower() in ("or", "maybe", "perhaps", "possibly") for w in words) else "and"


def _last_boxed(text):
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
        kind = _connective(text[boxes[k - 1][1]:start]) if k else None
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
    return _last_boxed(text) or _phrase_answer(text) or text


_PHRASE = re.compile(
    r"(?:\bfinal\s+answer\b(?:\s+is\b)?|\bthe\s+(?:final\s+|correct\s+)?answer(?:\s*\([^()\n]{0,40}\))?\s*(?:is\b|would\s+be\b"
    r"|will\s+be\b|=|:)|^[ \t>#*_-]*(?:answer|a)\s*(?:\*\*|__)?\s*:|^[ \t>#*_-]*answer\s*(?=\$|\\\[|\\\())",
    re.IGNORECASE | re.MULTILINE)
_CUT_WORDS = re.compile(r"\s(?:because|since|which|where|so|as|when|given|for|if|but|hence|thus|therefore)\b", re.I)


def _phrase_answer(text):
    """The answer after the last answer phrase ("The final answer is $5$. I hope it is correct." -> `5`)."""
    matches = list(_PHRASE.finditer(text))
    if not matches:
        return None
    rest = text[matches[-1].end():]
    rest = re.sub(r"^[ \t*_:=]*(?:is\b)?[ \t*_:]*", "", rest, flags=re.IGNORECASE)
    line, _, after = rest.partition("\n")
    if not line.strip():  # "**Final Answer**" on a line of its own: the answer is the block below
        block = after.strip()
        return _display_math(block) or (_reduce(_sentence_head(block)) if "\n" not in block
                                        else _conclusion_answer(block, finished=False))
    return _display_math(rest.lstrip()) or _reduce(_sentence_head(line)) or None


def _display_math(text):
    """The content of a display-math block that starts the text (it may span lines), else None."""
    for opener, closer in (("\\[", "\\]"), ("$$", "$$")):
        if text.startswith(opener):
            end = text.find(closer, len(opener))
            if end > 0:
                return text[len(opener):end].strip() or None
    return None


# Words that make a sentence something other than a plain statement of its number: hedges, negations, bounds
_HEDGE_WORDS = re.compile(r"\b(?:or|not|no|never|cannot|can't|isn't|aren't|wasn't|won't|either|neither|maybe|perhaps|"
                          r"possibly|approximately|approx|about|around|roughly|nearly|almost|least|most|between|than|"
                          r"more|less|fewer|over|under|estimate|guess)\b|n't\b", re.IGNORECASE)
# Words that change the number next to them ("negative 5", "5 squared", "half of 10", "x plus 5")
_MODIFIER_WORDS = re.compile(r"\b(?:negative|minus|plus|times|half|halves|third|thirds|quarter|quarters|double|twice|"
                             r"triple|square|squared|cube|cubed|root|roots|sqrt|reciprocal|inverse|factorial|divided|"
                             r"multiplied|power|percent|opposite|log|exp)\b", re.IGNORECASE)
# Where an explanation starts after a leading answer ("3 (since 8 - 3 = 5)", "18 miles in six hours")
_EXPLANATION = re.compile(r"\s*(?:$|[(,;:.]|(?:because|since|which|where|so|as|when|given|for|in|on|from|by|using|"
                          r"with|after|at|if|that|to)\b)", re.IGNORECASE)
_LEADING_VALUE = re.compile(r"\s*(\$[^$]+\$|\\\(.+?\\\)|\$?-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)")


def _reduce(span):
    """The answer inside an answer phrase. A phrase that starts with a value is that value and its unit ("3 (since
    8 - 3 = 5)" -> 3, "18 miles in six hours" -> 18 miles); a sentence ("Dana can travel 18 miles") stands for its
    one number. Hedges, negations and number-changing words keep the span whole, so it fails to compare."""
    if not span or _HEDGE_WORDS.search(span):
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
    """A line cut at the end of its first sentence, or before a comma/word that starts an explanation; math
    ($...$, braces) is never cut."""
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
            if ch in ",;" and re.match(r"\s+[A-Za-z]{2,}", line[k + 1:]):
                return line[:k].strip()
            if ch.isspace():
                cut = _CUT_WORDS.match(line, k)
                if cut and k > 0:
                    return line[:k].strip()
        k += 1
    return line.strip().rstrip(".").strip()


_MATH_SEGMENT = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|\$(.+?)\$", re.DOTALL)
_NUMBER = re.compile(r"(?<![\w.^_/])-?(?:\d[\d,]*(?:\.\d+)?|\.\d+)(?:/\d+)?(?![\w^/])")


def _candidates(sentence):
    """[(position, text)] of the math segments and the bare numbers outside them, in order."""
    candidates, last_end = [], 0
    for match in _MATH_SEGMENT.finditer(sentence):
        candidates += [(m.start(), m.group(0)) for m in _NUMBER.finditer(sentence, last_end, match.start())]
        candidates.append((match.start(), next(g for g in match.groups() if g is not None)))
        last_end = match.end()
    return candidates + [(m.start(), m.group(0)) for m in _NUMBER.finditer(sentence, last_end)]


def _conclusion_answer(text, finished=True):
    """Free text: the answer is the one number or formula of the conclusion (the last sentence that has any),
    or the last one when it follows a final `=` or "is". Several candidates otherwise: no answer (a hedge)."""
    tail = text.strip()[-4000:].replace("\\$", "")
    if tail.count("$") % 2:  # an odd number of $: some are currency signs
        tail = re.sub(r"\$(?=\d)", "", tail)
    sentences = [s for s in re.split(r"\n\s*\n|\n(?=\S)|(?<=[.!?])\s+(?=[A-Z])|(?<=\$\$|\\\])\s+(?=[A-Z])", tail) if s.strip()]
    if finished and len(sentences) > 1 and not re.search(r"(?:[.!?$)\]}]|\\\])\s*$", sentences[-1]):
        return None  # the last sentence is unfinished: a response cut off mid-thought states no conclusion
    for sentence in reversed(sentences[-3:]):
        sentence = re.sub(r"^\s*(?:\d+[.)]|[-*])\s+", "", sentence)  # list markers: "3) $1375 on all ads"
        if _candidates(sentence):
            return None if _HEDGE_WORDS.search(sentence) else _one_candidate(sentence)
    return None


def _one_candidate(sentence):
    """The sentence's answer: its only candidate, or the last one when it follows `=` or "is"; None when an
    operator, a relation or a number-changing word touches it (`x = y - 5`, `x > 5`, "negative 5")."""
    candidates = _candidates(sentence)
    if not candidates:
        return None
    position, value = candidates[-1]
    before, after = sentence[:position].rstrip(), sentence[position + len(value):]
    if sentence[position] == "$":  # a math segment: skip its closing delimiter
        after = sentence[sentence.find("$", position + 1 + len(value)) + 1:] if "$" in sentence[position + 1:] else ""
    if len(candidates) > 1 and not (re.search(r"(?<![!<>=])=$", before) or
                                    re.search(r"\b(?:is|be|are|was|equals?|gives?|get|obtain|total)$", before, re.I)):
        return None
    if re.search(r"(?:[-+*/^<>≤≥≠]|!=|\\[a-z]+)\s*$", before) and not re.search(r"(?<![!<>=])=$", before):
        return None
    if re.match(r"\s*(?:[-+*/^(<>=]|[A-Za-z](?![A-Za-z]))", after) and not re.match(r"\s*[IiAa]\s", after):
        return None  # 5x, 5 + y, 5(1+x), 5 = ...
    after = re.sub(r"^\s*times\s*(?=[.,;!?]|$)", "", after)  # "rang 22 times." counts; "5 times x" multiplies
    nearby = " ".join(before.split()[-4:] + after.split()[:2])
    if _MODIFIER_WORDS.search(nearby):
        return None
    return value.strip()


def extract_answer(response, strict=False, think_prefilled=False):
    """The final answer a response commits to (a string), or None. See the module docstring for the order.
    strict=True: only explicit answers (JSON field, <answer>, box, ####, answer phrase), no free-text fallback."""
    text = final_text(response, think_prefilled)
    if text is None or not text.strip():
        return None
    last_box = text.rfind("\\boxed{")
    if last_box >= 0 and _braced(text, last_box + len("\\boxed")) is None:
        return None  # the last box never closes: the answer was cut off while being written
    found = _json_answer(text)
    if found is None and re.match(r"\s*(?:```(?:json)?\s*)?\{\s*\"", text) and not re.search(r"\}\s*(?:```)?\s*$", text):
        return None  # a JSON object opened and never closed: cut off before its answer field
    if found is None and "<answer>" in text:
        found = _inner_answer(re.findall(r"<answer>(.*?)(?:</answer>|$)", text, flags=re.DOTALL)[-1])
    if found is None:
        found = _last_boxed(text)
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
    if found is None:
        found = _phrase_answer(text)
    if found is None and not strict:
        bare = text.strip()
        if "\n" not in bare and len(bare) <= 200 and parse_math(split_unit(clean(bare) or "")[0]) is not None:
            found = bare  # the whole response is a formula: `\frac{10}{9}`
        else:
            found = _conclusion_answer(text)
    if found is None or not found.strip() or len(found) > MAX_ANSWER_CHARS:
        return None
    found = found.strip()
    inline = re.fullmatch(r"\$([^$]+)\$|\\\((.+)\\\)", found, flags=re.DOTALL)  # "$42$" -> "42"
    return (inline.group(1) or inline.group(2)).strip() if inline else found


# ------------------------------------------------------------------------------------------------------------
# Cleaning: answer text -> canonical LaTeX-ish text (pure string work, no math yet)
# ------------------------------------------------------------------------------------------------------------
_UNICODE = {"½": "\\frac{1}{2}", "⅓": "\\frac{1}{3}", "⅔": "\\frac{2}{3}", "¼": "\\frac{1}{4}",
            "¾": "\\frac{3}{4}", "−": "-", "–": "-", "—": "-", "π": "\\pi ", "∞": "\\infty ", "√": "\\sqrt", "×": "\\times ", "·": "\\cdot ",
            "÷": "\\div ", "≤": "\\le ", "≥": "\\ge ", "≠": "\\ne ", "∪": "\\cup ", "∩": "\\cap ", "°": "^\\circ ",
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
    s = re.sub(r"(\d*)\.(\d*)\s*\\overline\s*\{(\d+)\}", _repeating_decimal, s)
    s = re.sub(r"\\(?:left|right|bigl|bigr|Bigl|Bigr|biggl|biggr|big|Big|bigg|Bigg)(?![a-zA-Z])\s*\.?", "", s)
    s = re.sub(r"\\(?:displaystyle|textstyle|scriptstyle|limits|nolimits)(?![a-zA-Z])", "", s)
    s = re.sub(r"\\[hv]space\*?\s*\{[^}]*\}", " ", s)
    # thousands separators written in LaTeX: 1{,}000  16,\!386  1\,000  1\ 000
    s = re.sub(r"(\d)\s*(?:\{\s*,\s*\}|,\\!)\s*(?=\d{3}(?!\d))", r"\1,", s)
    s = re.sub(r"(\d)\\[,;: ]\s*(?=\d{3}(?!\d))", r"\1", s)
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
    # thousands separators: 1,000 and 1,234,567.5 -- not `1, 000` or `1,2` (lists), and not inside a list
    thousands = re.compile(r"(?<![\d,.(\[{])\d{1,3}(?:,\d{3})+(?:\.\d+)?(?![\d,)\]}])")
    if thousands.search(s) and "," not in thousands.sub("", s):
        s = thousands.sub(lambda m: m.group(0).replace(",", ""), s)
    if re.fullmatch(r"[-+]?\d{1,3}(?: \d{3})+(?:\.\d+)?", s):                    # 1 000 000
        s = s.replace(" ", "")
    s = _NUMBER_WORDS.sub(_number_words, s)
    s = _FRACTION_WORDS.sub(lambda m: f"\\frac{{{m.group(1) or 1}}}{{{_DENOMINATORS[m.group(2).lower()]}}}", s)
    s = re.sub(r"\s*(?:,\s*)?(?:for all|for every|for any|\\forall)\b.*$", "", s)            # f(x) = x for all x
    s = re.sub(r"\s*,?\s*(?:where\s+)?[a-z]\s*\\in\s*(?:\\mathbb\s*)?\{?\s*[ZN]\s*\}?\s*$", "", s)  # ..., k \in Z
    return s or None


def _mixed_number(s):
    """A mixed number alone is its value: 2\frac{1}{2} is 5/2, not 2 * 1/2."""
    mixed = re.fullmatch(r"([-+]?)(\d+)\s*\\frac\s*(?:\{(\d+)\}|(\d))\s*(?:\{(\d+)\}|(\d))", s)
    if not mixed:
        return s
    sign, whole = mixed.group(1), mixed.group(2)
    num, den = mixed.group(3) or mixed.group(4), mixed.group(5) or mixed.group(6)
    return f"{sign}({whole}+\\frac{{{num}}}{{{den}}})"


# ------------------------------------------------------------------------------------------------------------
# A small LaTeX -> sympy parser that builds the tree itself (never evaluates text as code)
# ------------------------------------------------------------------------------------------------------------
class ParseError(Exception):
    pass


_TOKEN = re.compile(r"\s*(\d+\.\d*|\.\d+|\d+|\\[a-zA-Z]+|\\[{}|]|[A-Za-z]|[-+*/^_!()\[\]{}|,'])")
_FUNCS = {"arccot": sympy.acot, "arcsec": sympy.asec, "arccsc": sympy.acsc, "sin": sympy.sin, "cos": sympy.cos, "tan": sympy.tan, "cot": sympy.cot, "sec": sympy.sec,
          "csc": sympy.csc, "arcsin": sympy.asin, "arccos": sympy.acos, "arctan": sympy.atan, "sinh": sympy.sinh,
          "cosh": sympy.cosh, "tanh": sympy.tanh, "ln": sympy.log, "exp": sympy.exp}
_INVERSE = {"sin": sympy.asin, "cos": sympy.acos, "tan": sympy.atan, "cot": sympy.acot, "sec": sympy.asec,
            "csc": sympy.acsc}
_GREEK = ("alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta", "iota",
          "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon", "phi", "varphi", "chi", "psi",
          "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Pi", "Sigma", "Phi", "Psi", "Omega", "ell", "hbar")
_ACCENTS = ("bar", "hat", "vec", "dot", "ddot", "tilde", "overline", "widehat", "widetilde", "overrightarrow")
_KNOWN_COMMANDS = set(_FUNCS) | set(_GREEK) | set(_ACCENTS) | {
    "frac", "sqrt", "binom", "pi", "infty", "log", "cdot", "times", "div", "lfloor", "rfloor", "lceil", "rceil",
    "angle", "triangle", "{", "}", "|"}


_STRUCTURAL = {"begin", "end", "approx", "sim", "simeq", "cong", "equiv", "to", "rightarrow", "Rightarrow",
               "implies", "iff", "cup", "cap", "in", "notin", "subset", "subseteq", "mid", "pm", "mp", "le", "ge",
               "ne", "dots", "ldots", "cdots", "quad", "qquad", "text", "choose", "over", "mod", "pmod", "bmod"}


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


def _is_infinite(x):
    return x.has(sympy.oo, -sympy.oo, sympy.zoo)


def _safe_pow(base, exp):
    """base**exp, refusing what is undefined (0^0, inf^0) or too large to compute (9^{9^{9^9}}, e^{e^{e^5}})."""
    if _is_infinite(base) or _is_infinite(exp):
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
    `decimal_tolerances` collects, for every decimal literal, the relative rounding it stands for (ROUNDED_GOLD).
    Infinity is allowed only alone or negated: any arithmetic with it is refused (1/oo, oo-oo, oo^0).
    """

    def __init__(self, text):
        self.tokens = _tokenize(text)
        self.pos = 0
        self.depth = 0
        self.decimal_tolerances = []
        self.symbols_seen = False
        self.infinity_seen = False

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
            elif token is not None and self._ATOM_START.match(token):
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
            value = sympy.Rational(int(integer or "0") * 10 ** len(frac) + int(frac or "0"), 10 ** len(frac))
            if frac.strip("0") and value != 0:  # a non-integer decimal: remember its rounding
                self.decimal_tolerances.append(0.5 * 10 ** -len(frac) / abs(float(value)))
            return value
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
            return sympy.Abs(self.delimited("|"))
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
        if name == "pi":
            return sympy.pi
        if name == "infty":
            self.infinity_seen = True
            return sympy.oo
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


_COMMON_WORDS = set("""the and not are was but for has had its may can one two six ten yes all any who why how see
set say use way get got let lot off old our out own per put too top try yet you she her him his man men new now day
end far few odd sum max min mod gcd lcm arc deg rad sec cis""".split())


def _is_english(run):
    """A run of letters that is a word rather than a product of variables: 4+ lowercase letters, or a common
    3-letter word (`LCs`, `abc`, `xyz` stay products)."""
    word = run[0].lower() + run[1:]  # "Answer" is a word too
    return word.islower() and (len(run) >= 4 or word in _COMMON_WORDS)


@lru_cache(maxsize=8192)
def parse_math(text):
    """Cleaned text -> (sympy expression, relative rounding of its decimals) or None when it is not a formula we
    read. Words (3+ letters in a row outside a command) are not formulas: `is not` must not become i*s*n*o*t."""
    if any(_is_english(w) for w in re.findall(r"(?<![\\a-zA-Z])[a-zA-Z]{3,}", text)):
        return None
    try:
        parser = _Parser(text)
        value = parser.parse()
    except (ParseError, RecursionError, ValueError, TypeError, ZeroDivisionError, OverflowError, AttributeError):
        return None
    if parser.symbols_seen and not value.free_symbols:
        return None  # letters that vanished: `I(0)` read as I*0 = 0 is a function value, not the number 0
    return value, max(parser.decimal_tolerances, default=0.0)


# ------------------------------------------------------------------------------------------------------------
# Comparing values
# ------------------------------------------------------------------------------------------------------------
_SIMPLE_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)")
_INTEGRATION_CONSTANTS = ("C", "c", "C_1", "c_1", "C_0", "c_0")


def _decimal_rel(text):
    """Relative half-unit of the last digit of a gold written as a decimal (for ROUNDED_GOLD = 'half_ulp')."""
    if ROUNDED_GOLD != "half_ulp":
        return 0.0
    parsed = parse_math(text)
    return parsed[1] if parsed and not parsed[0].free_symbols else 0.0


def _numbers_equal(p, g, rel=0.0):
    """Two constants: exactly equal (rationals); for irrationals, their difference evaluates to zero: sympy's
    adaptive evalf either finds a nonzero digit of p - g (then they differ, however tiny: pi + 10^{-60} is not pi)
    or exhausts ZERO_TEST_BITS of precision without one (then they are equal: sqrt2 + sqrt3 = sqrt(5 + 2 sqrt6));
    or, for rounded golds, strictly within rel * |g|."""
    if p == g:
        return True
    if _is_infinite(p) or _is_infinite(g):
        return False
    if p.is_Rational and g.is_Rational and not rel:
        return False
    if rel:
        pv, gv = sympy.N(p, 30), sympy.N(g, 30)
        return bool(pv.is_number and gv.is_number and abs(pv - gv) < sympy.Float(rel, 30) * abs(gv))
    diff = sympy.N(p - g, EXACT_DIGITS, maxn=ZERO_TEST_BITS)
    if diff == 0:
        return True
    if diff.has(sympy.nan, sympy.zoo, sympy.oo, -sympy.oo) or not diff.is_number:
        return False
    # a Float with (almost) no significant bits is evalf's "zero to the precision I could reach"
    return all(part == 0 or (isinstance(part, sympy.Float) and part._prec <= 10) for part in diff.as_real_imag())


def _unify_constants(p, g):
    """An arbitrary constant written C in one answer and c in the other (Minerva's ODE answers) is one symbol."""
    extra_p, extra_g = p.free_symbols - g.free_symbols, g.free_symbols - p.free_symbols
    if len(extra_p) == 1 and len(extra_g) == 1:
        (a,), (b,) = extra_p, extra_g
        if a.name in _INTEGRATION_CONSTANTS and b.name in _INTEGRATION_CONSTANTS:
            return p.subs(a, b)
    return p


def _exprs_equal(p, g, rel=0.0):
    """Parsed answers: constants by _numbers_equal, formulas by agreement at random rational points (exact
    arithmetic), which decides polynomial and rational identities with negligible error."""
    if not p.free_symbols and not g.free_symbols:
        return _numbers_equal(p, g, rel)
    p = _unify_constants(p, g)
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


def _values_equal(p, g):
    """Single values (cleaned text, no units, lists or relations)."""
    p, g = _mixed_number(p), _mixed_number(g)
    if _SIMPLE_NUMBER.fullmatch(p) and _SIMPLE_NUMBER.fullmatch(g) and ROUNDED_GOLD == "exact":
        return Fraction(p) == Fraction(g)  # the common case, without sympy
    if re.fullmatch(r"[A-Za-z]{2,}", p) and re.fullmatch(r"[A-Za-z]{2,}", g):
        return p.lower() == g.lower()  # a word's letters are not commuting variables: NO is not ON
    pp, gp = parse_math(p), parse_math(g)
    if pp is None or gp is None:
        return False
    try:
        decimal = re.fullmatch(r"[-+]?(\d*)\.(\d+)", p)
        if decimal and not gp[0].free_symbols and not gp[1] and not gp[0].is_Rational or (
                decimal and gp[0].is_Rational and gp[0].q not in (1, 2, 4, 5, 8, 10)):
            digits = len((decimal.group(1) + decimal.group(2)).lstrip("0"))
            if digits >= DECIMAL_DIGITS and len(decimal.group(2)) >= 4:  # 0.0833333333 for 1/12, 3.14159 for pi
                half_unit = sympy.Rational(1, 2 * 10 ** len(decimal.group(2)))
                return bool(abs(sympy.N(gp[0] - pp[0], 30)) <= half_unit)
        return _exprs_equal(pp[0], gp[0], _decimal_rel(g))
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
    "sq": "square", "cu": "cubic",
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
    if value is None or value[0].free_symbols:
        return False
    if _equiv(_as_text(value[0] / 100), other):
        return True
    return bool(abs(value[0]) >= 1) and _equiv(pct, other)


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
        r"(?:_\{?[\w,]+\}?)?'*(?:\([^()=]*\))?)"
_NAMES = rf"(?:m\s*)?{_NAME}(?:\s*{_NAME}){{0,3}}"
_LABEL = re.compile(rf"\s*(?:{_NAMES}|\|\s*{_NAMES}\s*\||{_NAMES}\s*:\s*{_NAMES}|\\frac\s*\{{\s*{_NAMES}\s*\}}\s*\{{\s*{_NAMES}\s*\}}"
                    rf"|\(\s*{_NAME}(?:\s*,\s*{_NAME})+\s*\))\s*")


def _is_label(side):
    """A name for the answer rather than a value: x, x_1, f(x), AB, P(A), \\angle ABC, (x, y)."""
    if any(w.islower() and (w in _NOT_UNITS or _is_english(w)) for w in re.findall(r"(?<![\\A-Za-z])[A-Za-z]{2,}", side)):
        return False
    return _LABEL.fullmatch(side) is not None and not re.fullmatch(r"\s*\\(?:pi|infty|e)\s*", side) \
        and not re.search(r"\\(?:sqrt|sin|cos|tan|log|ln)\b|\\frac\s*\{\s*\d", side)


def _is_quantity_name(side):
    """m+n, a+2z, xy: a polynomial in letters with no constant term and no powers -- the quantity a problem asks
    for, restated before its value (`m+n = 29`); `x^2-4` or `2x+3` are not."""
    parsed = parse_math(side)
    if parsed is None or not parsed[0].free_symbols:
        return False
    try:
        poly = sympy.Poly(parsed[0], *sorted(parsed[0].free_symbols, key=str))
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


def _match_unordered(preds, golds):
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
    if len(parts) == 3 and is_var[1] and not is_var[0] and not is_var[2] and len(set(ops)) <= 2:
        if all(op in ("<", "\\le") for op in ops):
            return parts[0], parts[2], ops[0] == "\\le", ops[1] == "\\le"
        if all(op in (">", "\\ge") for op in ops):
            return parts[2], parts[0], ops[1] == "\\ge", ops[0] == "\\ge"
    return None


def _intervals_equal(p, g):
    """Unions of intervals (order-free) with matching brackets; None when either side is not one."""
    ps, gs = _split_top(p, ["\\cup", "or"]), _split_top(g, ["\\cup", "or"])
    pi, gi = [_as_interval(x) for x in ps], [_as_interval(x) for x in gs]
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
    if _exprs_equal(p[0][0], g[0][0]) and _exprs_equal(p[1][0], g[1][0]):
        return True
    dp, dg = p[0][0] - p[1][0], g[0][0] - g[1][0]
    if dp.free_symbols != dg.free_symbols or not dg.free_symbols:
        return False
    rng = random.Random(1)
    ratios = []
    for _ in range(8):
        point = {s: sympy.Rational(rng.randint(-30, 30), rng.randint(1, 7)) + sympy.Rational(1, 11) for s in dg.free_symbols}
        a, b = dp.subs(point), dg.subs(point)
        if b == 0 or a.has(sympy.nan, sympy.zoo) or b.has(sympy.nan, sympy.zoo):
            continue
        ratios.append(a / b)
    return len(ratios) >= 3 and ratios[0] != 0 and all(_numbers_equal(r, ratios[0]) for r in ratios)


def _canon_label(side):
    return re.sub(r"[\s{}]", "", side)


def _relations_equal(p_sides, g_sides):
    """At least one side has '='. Labels are stripped; every remaining side of the prediction must be the answer."""
    g_constant = len(g_sides) == 1 and (parse_math(g_sides[0]) or (sympy.Symbol("x"),))[0].free_symbols == set()
    if len(g_sides) == 1 or (len(g_sides) == 2 and _is_label(g_sides[0])):
        gold = g_sides[-1]
        if len(p_sides) == 1:
            return _equiv(p_sides[0], gold)
        if len(g_sides) == 2 and len(p_sides) == 2 and _is_label(p_sides[0]):
            if _canon_label(p_sides[0]) != _canon_label(g_sides[0]):
                return False                                          # x = 3 is not y = 3
            return _equiv(p_sides[1], gold)
        if len(g_sides) == 2 and len(p_sides) == 2 and not _is_label(p_sides[0]):
            return _equations_equal(p_sides, g_sides)                 # 2y = 4x + 2 vs y = 2x + 1
        values = [s for s in p_sides if not (_is_label(s) or (g_constant and _is_quantity_name(s)))]
        return bool(values) and all(_equiv(v, gold) for v in values)
    if len(p_sides) != len(g_sides):
        return False
    if len(g_sides) == 2:
        return _equations_equal(p_sides, g_sides)
    return _match_ordered(p_sides, g_sides)


# ---- matrices ------------------------------------------------------------------------------------------------
_MATRIX = re.compile(r"\\begin\{([pbBvV]?matrix|array)\}(?:\{[^}]*\})?(.*)\\end\{\1\}", re.DOTALL)


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
    rows = [r for r in re.split(r"\\\\", match.group(2)) if r.strip()]
    return match.group(1), [[c.strip() for c in r.split("&")] for r in rows]


def _determinant_text(kind_rows):
    """A vmatrix is a determinant: its value, as text our parser reads (entries must parse)."""
    _, rows = kind_rows
    if not rows or any(len(r) != len(rows) for r in rows) or len(rows) > 6:
        return None
    entries = [[parse_math(c) for c in r] for r in rows]
    if any(e is None for r in entries for e in r):
        return None
    det = sympy.Matrix([[e[0] for e in r] for r in entries]).det()
    return det


def _matrices_equal(p, g):
    pm, gm = _matrix(p), _matrix(g)
    if (pm and pm[0] in ("vmatrix", "Vmatrix")) or (gm and gm[0] in ("vmatrix", "Vmatrix")):
        pv = _determinant_text(pm) if pm and pm[0].lower() == "vmatrix" else (parse_math(p) or (None,))[0]
        gv = _determinant_text(gm) if gm and gm[0].lower() == "vmatrix" else (parse_math(g) or (None,))[0]
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
    s = re.sub(r"\s+", "", s)
    return re.sub(r"([_^])\{(\w)\}", r"\1\2", s)


def _is_words(s):
    """Plain words (`even`, `Monday`, `no solution`): a run of 3+ letters; `xy` stays a product of symbols."""
    return re.fullmatch(r"[A-Za-z][A-Za-z\s\-']*", s) is not None and re.search(r"[A-Za-z]{3}", s) is not None


def _words(s):
    return " ".join(s.lower().replace("-", " ").split())


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


def _equiv(p, g):
    """Both cleaned. Structure first (choices, words, intervals, lists, units, relations), then values."""
    if p == g or _canon(p) == _canon(g):
        return True
    choice = _CHOICE.fullmatch(g)
    if choice:
        return _choice_equal(p, choice.group(1))
    if _is_words(g):
        return _is_words(p) and _words(p) == _words(g)
    if _interval_like(g) or _interval_like(p):
        same = _intervals_equal(p, g)
        if same is not None:
            return same
        if _interval_like(g) and "=" not in g:
            return False
    if _matrix(g) or _matrix(p):
        return _matrices_equal(p, g)
    p_shape, g_shape = _shape(p), _shape(g)
    if p_shape.kind != "single" or g_shape.kind != "single":
        return _shapes_equal(p_shape, g_shape)
    return _item_equal(p, g)


def _item_equal(p, g):
    """One answer each (no top-level list)."""
    (pv, pu), (gv, gu) = split_unit(p), split_unit(g)
    if pu == "%" or gu == "%":
        return _percent_equal(pv, pu, gv, gu)
    if _units_conflict(pu, gu):
        return False
    if (pu or gu) and _equiv(pv, gv):
        return True
    if ":" in g and "=" not in g:  # ratios and times: ordered parts (3:1 is not 1:3)
        g_parts, p_parts = _split_top(g, [":"]), _split_top(p, [":"])
        return len(g_parts) == len(p_parts) and all(_equiv(a, b) for a, b in zip(p_parts, g_parts))
    p_sides, g_sides = _split_top(p, ["="]), _split_top(g, ["="])
    if "\\approx" in p:  # x = 1/3 \approx 0.33: the approximation is a remark when an exact value is given
        exact = [_split_top(side, ["\\approx"])[0] for side in p_sides]
        exact = [x for x in exact if x]
        p_sides = exact if any(not _is_label(x) for x in exact) else _split_top(p, ["=", "\\approx"])
    if len(p_sides) > 1 or len(g_sides) > 1:
        return _relations_equal(p_sides, g_sides)
    base = re.fullmatch(r"([-+]?\d+)_\d+", _canon(g))
    if base:  # 52_8: a numeral in another base compares as written (the base may be left out)
        return _canon(p) == base.group(1)
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
# Code problems (rows with `tests`): the sandboxed code reward lives in code_reward.py and is re-exported here so
# that the loop imports one module; score_problems picks the reward by each row's data.
# ------------------------------------------------------------------------------------------------------------
from code_reward import DEFAULT_TIMEOUT_S as CODE_TIMEOUT_S  # noqa: E402
from code_reward import STAT_KEYS as CODE_STAT_KEYS  # noqa: E402,F401
from code_reward import score_code_batch  # noqa: E402


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
