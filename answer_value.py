"""Stage 2 of the grader: reduce the span a response commits to (answer_span.py) to ONE value, or to no answer.

Entry points: reduce_span(span); sentence_value / conclusion_value / phrase_value (one reduction for every prose span);
Span; candidates and prepared (a sentence's values, for answer_question.py).

Math spans (a box, a JSON field, a whole-formula response) are their value, unless they hold an answer sentence; a
derivation written as one formula is the value it arrives at (`3n = 15 \\Rightarrow n = 5`, `2^{100} \\equiv 2 \\pmod 7`).
A box is qualified by its own sentence: a doubt, another case, a deferral, another value offered ("\\boxed{12} (or 24
if order matters)" is `12 \\text{ or } 24`, which equals a single gold only when both do).
Prose is first read in the conventions it is written in: digit groups (`1.234.567`, `32 768`, thin spaces; decimal
commas in a decimal-comma language), scale words and letters ("4 million", "3 lakh", "two dozen", "a quarter
million", "12k", "$2.5M"), numbers in words, Chinese numerals, Unicode mathematics, repeat marks (`0.285714...`),
times ("7:15 A.M.", "7 in the evening", "19h05", "noon"), a weekday that ends a statement, compound quantities ("1 h 30
min"), positions below zero ("7 degrees below zero" is -7), tuples, unions and complex numbers written in prose.
An answer sentence states ONE value (sentence_value): the one after a final `=`, a copula, a colon or an arrow; else
the only one not inside a modifier phrase ("for 16 glasses"), a subordinate or purpose clause, a phrase put before the
sentence, or a reference to a given quantity ("the 7 spiders"); a result ("giving 144 ways"), a sum of money, a value
stated twice; values listed after a copula are one list; assignments of different letters one tuple, of one letter
one set; a derivation in one letter its last step; the value after the last `=` of a computation in words and units
("5 shelves x 4 rows x 6 books = 120 books"). Not an answer: a value its writer doubts, bounds ("over 40"), rejects
("not 40", "no es 54"), makes one case of several, gives for now ("so far"), defers ("36, but we still have to remove
...", "which still needs to be halved", "only a first estimate"), puts in a counterfactual ("would be 12 if ..."), an
aside (in parentheses, "Interestingly, ..."), or an arithmetic the text stops before finishing ("Remaining = 27 - 4").
Qualifiers are read from the phrase they are attached to, never from a keyword anywhere in the sentence.
conclusion_value reads free text: the last of its last three statements that states something (not a restated task,
a verification after the answer, an aside, a pending step "Now we must ..."); a last statement taken back after it
("But I double counted") leaves no answer; one cut off mid-sentence is none (a statement ends with its punctuation, or
unpunctuated with a value and at most two words after it), unless it is commentary after a conclusion ("Therefore,
..."); labelled parts ("(a) 9 / (b) 2", "Mean: 4; Median: 3") are the ordered parts `a = 9, b = 2`.
"""
import re
from fractions import Fraction
from functools import lru_cache
from typing import NamedTuple

from answer_compare import COPULA, CASE_WORD, VERB_PREDICATE, parse_cases
from answer_forms import QUADRANT_IN_PROSE, matrix_in_prose
from answer_words import MATH_SEGMENT, outside_math, words_as_values
from latex import (MAX_ANSWER_CHARS, ROUNDING_NOTE, clean, is_english, split_unit, superscripts, unit_key, unit_vector_hats, unit_word,
                   unwrap_commands)
from numerals import (DENOMINATORS, FRACTION_WORDS, NUMBER_WORD, NUMBER_WORDS, base_numerals, cjk_numbers, degrees_minutes_seconds,
                      number_conventions, number_words, repeating_decimals, scaled_numbers)

_CUT_WORDS = re.compile(r"\s(?:because|since|which|where|so|as|when|given|for|if|but|hence|thus|therefore)\b", re.I)


# An answer its writer doubts ("3, but I'm not sure", "(I think)") is no answer
UNSURE = re.compile(r"\b(?:not\s+(?:sure|certain|confident|100)|unsure|uncertain|I\s+think|I\s+believe|I\s+guess|"
                     r"I'?m\s+guessing|probably|maybe|perhaps|possibly|(?:might|could|may)\s+be\s+(?:wrong|incorrect|off|mistaken)|"
                     r"(?:might|could|may)\s+(?:[a-z]+\s+){0,2}?be\s+[$(\\]*-?\d+|"
                     r"if\s+I'?m\s+not\s+mistaken|(?:could|might|may)\s+be\s+either|either\s+(?:one|answer|way)\s+(?:is|could|might|works))\b",
                     re.IGNORECASE)
# ...nor one the response defers: work it announces as still to be done after it ("36, but we still have to remove the
# broken ones", "36 so far"), or a "wait" that takes it back; modals of obligation and their subjects, not topics
_PENDING = (r"(?:we|I|you|one)\s+(?:(?:still|also|first|now|then|yet|will|'ll)\s+)*(?:(?:need|needs|have|has|want|ought)\s+to|"
            r"must|should)\b|(?:but\s+)?wait\b|hold\s+on\b|(?:that|this|it)(?:'s|\s+is)\s+not\s+(?:yet\s+)?(?:the|our|my)\s+"
            r"(?:final\s+)?answer|not\s+(?:done|finished)\s+yet|(?:is|are)\s+yet\s+to\b|remains?\s+to\s+be\b")
_DEFERRED_AFTER = re.compile(r"(?:\s+[\w-]+){0,4}?\s*(?:[,;:]|\.\.\.|…)?\s*(?:[(—–]\s*)?(?:(?:so\s+far|for\s+now|at\s+this\s+(?:point|stage))\b|"
                             r"(?:but|however|though|although|yet|and|then)\b[,\s]*(?:(?:first|now|then|next|still)\b[,\s]*)?(?:"
                             + _PENDING + r")|which\s+(?:(?:we|I)\s+)?(?:still\s+)?(?:needs?|has|have|must|should)\b|"
                             # ...or a status the sentence gives it: "x = 36 is only a first estimate", "... an upper bound"
                             r"(?:is|was)\s+(?:only\s+|just\s+|merely\s+)?(?:an?|our|my)\s+(?:first\s+|rough\s+|initial\s+|preliminary\s+)?"
                             r"(?:estimate|guess|candidate|approximation|upper\s+bound|lower\s+bound|bound)\b)", re.I)
# A value given for now: "Total so far: 36", "For now we have 36"
_PROVISIONAL = re.compile(r"\b(?:so|thus)\s+far\b|\bfor\s+now\b|\bup\s+to\s+now\b|\bat\s+this\s+(?:point|stage)\b", re.I)
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
    """The text right after a value makes it one case of several, or defers it (see _DEFERRED_AFTER)."""
    if _DEFERRED_AFTER.match(after):
        return True
    condition = _CONDITION.match(after)
    return condition is not None and (condition.group(1) is not None or _OTHER_CASE.search(after, condition.end()) is not None)


def _conditional(sentence):
    """The sentence starts with a value that is one case of several."""
    lead = LEADING_VALUE.match(sentence)
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


# A letter of a word in another script (Chinese, Arabic, Bengali, Cyrillic, accented Latin, ...: any letter of the Unicode
# database but ASCII, Greek, letterlike symbols such as ℝ, and modifier letters such as ᵀ, which are mathematics)
OTHER_SCRIPT_LETTER = (r"(?![A-Za-z\u0370-\u03ff\u1f00-\u1fff\u2100-\u218f\u1d00-\u1dbf\u02b0-\u02ff\u2070-\u209f\u00b2\u00b3\u00b9"
                       r"\u00bc-\u00be\u2460-\u24ff])[^\W\d_]")  # (numbers such as ² ½ ① are \w too: not letters)
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
        if close < 0 or match.group(0) == "\\$" or text[close + 1:close + 2].isdigit() or re.search(r"(?<![\\a-zA-Z])(?:[A-Za-z]{3,}|(?:at|in|on|to|of|by|or|is|as|if)"
                                                             r"(?=\s))|[-+*/=×÷]\s*$", inside):  # ("$24,000 - $18,000": no formula ends
            # on an operator)
            out.append(text[pos:match.start()] + CURRENCY)
            pos = match.end()
        else:
            out.append(text[pos:close + 1])
            pos = close + 1
    stripped = "".join(out) + text[pos:]
    if stripped.count("$") % 2:
        stripped = re.sub(r"\$(?=\d)", CURRENCY, stripped)
    return stripped



# Words that change the number next to them ("negative 5", "5 squared", "half of 10", "x plus 5")
_MODIFIER_WORDS = re.compile(r"\b(?:negative|minus|plus|times|half|halves|third|thirds|quarter|quarters|double|twice|"
                             r"triple|(?:square|cubic|cube)(?!\s+(?:units?|feet|foot|inch(?:es)?|meters?|metres?|centimeters?|"
                             r"kilometers?|miles?|yards?|cm|mm|km|m|ft|in|yd)\b)|squared|cubed|roots?\s+of|sqrt|reciprocal|"
                             r"inverse|factorial|divided|"
                             r"multiplied|power|percent|opposite|log|exp)\b", re.IGNORECASE)
# Where an explanation starts after a leading answer ("3 (since 8 - 3 = 5)", "18 miles in six hours")
_EXPLANATION = re.compile(r"\s*(?:$|[(,;:.]|(?:because|since|which|where|so|as|when|given|for|in|on|from|by|using|"
                          r"with|after|at|if|that|to)\b)", re.IGNORECASE)
LEADING_VALUE = re.compile(r"\s*(\$[^$]+\$|\\\(.+?\\\)|[$¤]?-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)")


_FRONTED = re.compile(r"^\s*(?:(?i:over|in|after|within|during|for|at|on|from|by|across|throughout)\s+[^,;$(\[]{1,40}?"
                      r"|[A-Z][a-z]+ing\b[^,;(\[]{1,120}?),\s*(?=[A-Za-z\d¤])")  # "Over 12 weeks, ...", "Starting at 3 degrees ..., "


def _without_fronted_modifier(sentence):
    """ "Over 12 weeks, Lily saves $840": a phrase put before the sentence, up to its comma, only sets the scene;
    its number (and its "over") is neither the answer nor a hedge."""
    fronted = _FRONTED.match(sentence)
    return sentence[fronted.end():] if fronted and _candidates(sentence[fronted.end():]) else sentence




def _value_named(head):
    """The head of a sentence already names its value: it starts with one ("18, since ...") or has one after its
    last copula ("The total is 18 because ..."; not "The remainder of 1024 when divided by 7 is 2")."""
    if LEADING_VALUE.match(head):
        return True
    copulas = list(re.finditer(r"\b(?:is|are|was|were|equals?|be|gives?|get)\b|=", head))
    return bool(copulas) and bool(_candidates(head[copulas[-1].end():]))


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
            if ch in ",;" and re.match(r"\s+[A-Za-z]{2,}", line[k + 1:]) and LEADING_VALUE.match(line):
                return line[:k].strip()
            if ch.isspace():
                cut = _CUT_WORDS.match(line, k)
                if cut and k > 0 and _value_named(line[:k]):
                    return line[:k].strip()
        k += 1
    return line.strip().rstrip(".").strip()


_NUMBER_BODY = r"(?<![\w.^_/])-?(?:\d(?:[\d,]*\d)?(?:\.\d+)?|\.\d+)(?:[eE][-+]?\d+(?![\w.]))?"  # 4.4e7 too
# a unit written against its number in prose (`1,000.99m²`, `12kg`) ends the number; any other letter makes it
# part of a formula (`5x`); a number is never cut inside its decimals (`1,000.99m` is not `1,000`)
_GLUED_UNIT = r"(?:mm|cm|km|m|kg|mg|g|s|ms|min|h|hrs?|mL|ml|L|ft|in|lbs?|oz|mi|yd|mph|kph|Hz|eV|Pa|J|N|W|V|K)[²³]?(?![\w^])"
_NUMBER = re.compile(_NUMBER_BODY + r"(?:/\d+)?(?:(?![\w^/]|\.\d)|(?=" + _GLUED_UNIT + "))(?!-[A-Za-z])", re.ASCII)  # (not "24-hour")  # (a number
# written against a word of another script is a number: `兔有12只`)


# a complex number in prose: 3 + 7i, 2 - i, 2i, i + 5 (and an engineer's j)
_COMPLEX_BODY = (r"(?:-?\d+(?:\.\d+)?\s*[-+]\s*(?:\d+(?:\.\d+)?)?\s*[ij]|-?(?:\d+(?:\.\d+)?)?[ij]\s*[-+]\s*\d+(?:\.\d+)?"
                 r"|-?\d+(?:\.\d+)?[ij])(?![\w^/]|\.\d)")
_COMPLEX = r"(?<![\w.])" + _COMPLEX_BODY
_ITEM = r"-?(?:\d+(?:\.\d+)?(?:/\d+)?|∞|\\infty)"
_PLAIN_VALUE = re.compile(r"(?<![\w)])[(\[]\s*" + _ITEM + r"(?:\s*,\s*" + _ITEM + r")+\s*[)\]](?:\s*\^\s*\{?T\}?|ᵀ)?"  # (5, 1, 3), [3, ∞)
                          r"|(?<![\w:.])\d{1,2}(?::\d{2})?\s*[ap]m\b|(?<![\w:.])\d{1,2}:\d{2}(?![\w:])"  # a time: 10:30, 1:20 pm, 7 am
                          r"|(?<![\w.])\d+!(?=\s*[.,;)]|\s*$)"                              # 10!
                          r"|(?<![\w\\])[A-Z]\((?:\s*" + _ITEM + r"\s*[,;])+\s*" + _ITEM + r"\s*\)"       # a named point: C(2, -5), M(2; 3)
                          r"|(?<![\w\\])-?(?:\d+(?:\.\d+)?\s*\*?\s*)?(?:sqrt\s*\(\s*\d+(?:\.\d+)?\s*\)|pi|π)(?:\s*/\s*\d+)?(?![\w(^])"
                          r"|(?<![\w\\])[A-Za-z]\s*(?:>=|<=|!=|=|>|<|≥|≤|≠)\s*(?:" + _COMPLEX_BODY + r"|-?\d+(?:\.\d+)?(?:/\d+)?(?![\w^/]|\.\d))"
                          r"|" + _COMPLEX + r"|" + _NUMBER_BODY + r"\s+\d+/\d+(?![\w^/])|" + _NUMBER.pattern, re.ASCII)


@lru_cache(maxsize=4096)
def _candidates(sentence):
    """[(position, text)] of the math segments and, outside them, the bare numbers, mixed numbers (`2 1/2`) and
    plain-text relations (`x >= 2`), in order."""
    candidates, last_end = [], 0
    for match in MATH_SEGMENT.finditer(sentence):
        candidates += [(m.start(), m.group(0)) for m in _PLAIN_VALUE.finditer(sentence, last_end, match.start())]
        candidates.append((match.start(), next(g for g in match.groups() if g is not None)))
        last_end = match.end()
    candidates += [(m.start(), m.group(0)) for m in _PLAIN_VALUE.finditer(sentence, last_end)]
    return tuple(_joined_assignments(sentence, candidates))


_ASSIGNMENT = re.compile(r"[A-Za-z]\s*=\s*(?:-?\d+(?:\.\d+)?(?:/\d+)?|[^=<>$]{1,40}?)")
_RELATION = re.compile(r"[A-Za-z]\s*(?:>=|<=|>|<|≥|≤)\s*-?\d+(?:\.\d+)?(?:/\d+)?")


def _joined_assignments(sentence, candidates):
    """`x = 4, y = -1` (and `x = 4 and y = -1`): assignments of different letters joined by a comma or "and" are one
    candidate, a tuple answer (answer_compare reads it as one); of one letter (`x = 3, x = -2`, `x = 2i or x = -2i`)
    one set; relations of one letter joined by "or" one union (`x < 2 or x > 3`)."""
    joined, previous_end = [], 0
    for position, value in candidates:
        segment = MATH_SEGMENT.match(sentence, position) if sentence[position] in "$\\" else None
        end = segment.end() if segment else position + len(value)
        if joined and _RELATION.fullmatch(value) and _RELATION.fullmatch(joined[-1][1].split(" \\text{ or } ")[-1].strip()) \
                and value[0] == joined[-1][1].strip()[0] and re.fullmatch(r"\s*,?\s*or\s*", sentence[previous_end:position]):
            joined[-1] = (joined[-1][0], joined[-1][1] + " \\text{ or } " + value)  # "x < 2 or x > 3": a union
            previous_end = end
            continue
        if joined and _ASSIGNMENT.fullmatch(value) and _ASSIGNMENT.fullmatch(joined[-1][1].split(",")[-1].strip()):
            previous_position, previous = joined[-1]
            between = sentence[previous_end:position]  # (`$x = 2$ and $y = -1$`: between the segments)
            same = value[0] == previous.strip()[0] and re.fullmatch(r"\s*,?\s*(?:or|and)?\s*", between)  # x = 3 or/and/, x = 5
            if same or re.fullmatch(r"\s*(?:,|;|,?\s*and)\s*", between) and value[0] not in [v.strip()[0] for v in previous.split(",")]:
                joiner = " \\text{ or } " if same and "or" in between else ", "
                joined[-1] = (previous_position, previous + joiner + value if segment else sentence[previous_position:end])
                previous_end = end
                continue
        joined.append((position, value))
        previous_end = end
    return joined



_RAW_TOKEN = re.compile(r"\\[a-zA-Z]+|\\[{}|,;!]|[A-Za-zα-ωΑ-Ω]+|\d+(?:\.\d+)?|\s+|.", re.DOTALL)
SHORT_WORDS = {"a", "an", "am", "as", "at", "be", "by", "do", "go", "he", "if", "in", "is", "it", "me", "my", "no", "of",
                "on", "or", "so", "to", "up", "us", "we", "i"}
_RAW_OPERATORS = set("+-*/^_=<>()[]|'!√π½⅓⅔¼¾≤≥≠≈×·−±∓°")


def _wrap_raw_math(piece):
    """LaTeX written in prose without delimiters (`Hence f^{-1}(x) = \\frac{x+5}{3}.`, `c = I(0)`, `2√5 units`,
    a ratio `3:1`): each run of formula tokens with a command, a power, braces, a relation or a ratio is put in `$...$`,
    so that it is one candidate, as if the writer had delimited it. Words (of 3+ letters, or short English ones such as
    "is", "to") end a run; a plain number is left alone."""
    out, last = [], 0
    for segment in list(MATH_SEGMENT.finditer(piece)) + [None]:
        end = segment.start() if segment else len(piece)
        out.append(_wrap_plain(piece[last:end]))
        if segment:
            out.append(segment.group(0))
            last = segment.end()
    return "".join(out)


def _wrap_plain(text):
    if not re.search(r"\\[a-zA-Z]|[\^_{=<>√½⅓⅔¼¾≤≥≠±∓]|\d:\d|[\d}] : \d|(?<![A-Za-z])[A-Za-z](?![A-Za-z])\s*[-+*/]|[-+*/]\s*\d*[A-Za-z]"
                     r"(?![A-Za-z])", text):
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
        elif tok.isalpha() and re.fullmatch(r"[A-Za-zα-ωΑ-Ω]+", tok):  # (a letter of another script is a word)
            mathy = (len(tok) <= 2 and tok.lower() not in SHORT_WORDS) or (tok in ("i", "j") and start is not None and re.search(
                r"[-+*/=\d]\s*$", text[:token.start()])) or (tok.lower() in ("a", "i") and nxt
                                                                             and nxt in "=^_<>+-*/(")
        elif tok in ",." and start is not None:
            mathy = bool(nxt) and not text[token.end():token.end() + 1].isspace() and (tok == "," or nxt.isdigit())
        elif tok == CURRENCY:
            mathy = start is not None and nxt.isdigit()  # "25 × 52 = $1,300": a dollar sign inside the formula
        elif tok == ":" and start is not None:  # a ratio `3:1`, `4 : 25`, `x : y` (spaced alike on both sides; not "ratio: 2")
            before, after = text[token.start() - 2:token.start()], text[token.end():token.end() + 2]
            mathy = (before[-1:].isdigit() and after[:1].isdigit()) or (before[:1] not in ("", " ") and before[-1:] == " " ==
                                                                         after[:1] and re.match(r"[\dA-Za-z(]", after[1:]) is not None)
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
        if not re.search(r"\\[a-zA-Z]|[\^_{=<>√½⅓⅔¼¾≤≥≠±∓]|\d:\d|[\d}] : \d|(?<![A-Za-z])[A-Za-z](?![A-Za-z])\s*[-+*/]|[-+*/]\s*\d*[A-Za-z]"
                         r"(?![A-Za-z])", run) or not re.search(r"[A-Za-z0-9]", run) \
                or re.fullmatch(r"[^\W\d_]\s*(?:[<>]=?|=|[≤≥≠])\s*-?\d+(?:\.\d+)?", run) \
                or run.count("(") != run.count(")") or run.count("{") != run.count("}") \
                or re.fullmatch(r"[A-Za-z]+(?:\s*(?:/|\*|·|\^\{?-?\d\}?)\s*[A-Za-z]*)+", run) and all(
                    unit_key(w) for w in re.findall(r"[A-Za-z]+", run)):  # (a unit, `m/s^2`, is no formula of its own)
            continue
        out.append(text[last:start] + "$" + run + "$")
        last = start + len(run)
    return "".join(out) + text[last:]


_LEADING_REASON = re.compile(r"\s*(?:since|because|as)\s+(?:[^,$]|\$[^$]*\$)*?,\s+", re.IGNORECASE)
_RESULT_WORDS = re.compile(r",\s*(?:giving|yielding|making|leaving|resulting\s+in|for\s+a\s+total\s+of|totall?ing|which\s+gives)\s+"
                           r"(?:(?:us|a\s+total\s+of|an?|the)\s+)*[$¤]?$"
                           # an appositive that names the result: "..., an increase of 1.5 million", "..., a profit of $40"
                           r"|,\s*(?:an?|the)\s+(?:net\s+|total\s+|overall\s+|combined\s+)?(?:increase|decrease|difference|gain|loss|"
                           r"profit|change|drop|rise|growth|reduction|discount|saving|savings|total|sum|product)\s+of\s+[$¤]?$",
                           re.IGNORECASE)


def _spelled_out(sentence):
    """Numbers written in words, in a sentence that has none in digits: "twelve ways" -> "12 ways", "one quarter" ->
    \\frac{1}{4} ("the one on the left" stays)."""
    sentence = NUMBER_WORDS.sub(lambda m: m.group(0) if re.search(r"\b(?:the|this|that|each|every|any|no|which|an?\s+[a-z]+)\s+$",
                                                                     sentence[:m.start()], re.I) and m.group(0).lower() == "one"
                                 else number_words(m), sentence)
    sentence = re.sub(r"(?<![\w.])(\d+)\s+and\s+(?:a|one)\s+(half|third|quarter)\b", lambda m: f"${m.group(1)}\\frac{{1}}"
                      f"{{{DENOMINATORS[m.group(2).lower()]}}}$", sentence, flags=re.I)  # "two and a half hours" -> 2 1/2
    sentence = re.sub(r"(?<=\d)-(?=(?:" + "|".join(DENOMINATORS) + r")\b)", " ", sentence)  # 3-fourths
    sentence = FRACTION_WORDS.sub(lambda m: f"$\\frac{{{m.group(1) or 1}}}{{{DENOMINATORS[m.group(2).lower()]}}}$", sentence)
    return _ORDINAL_WORDS.sub(lambda m: str(_ORDINALS[m.group(1).lower()]), sentence)  # "in fifth place" -> 5


_ORDINALS = {w: k for k, w in enumerate("first second third fourth fifth sixth seventh eighth ninth tenth eleventh twelfth "
                                        "thirteenth fourteenth fifteenth sixteenth seventeenth eighteenth nineteenth "
                                        "twentieth".split(), 1)}
_ORDINAL_WORDS = re.compile(r"(?<=\bthe\s)(" + "|".join(_ORDINALS) + r")\s+(?=[a-z]{3,})(?!(?:of|time|and|or|to|is|was)\b)", re.I)  # "the tenth
# prime", "in the fifth place" (a position; "a tenth" and "one tenth" are fractions)


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
    if not CASE_WORD.search(sentence) or UNSURE.search(sentence) or len(sentence) > 400:
        return None
    starts = [0] + [m.end() for m in re.finditer(r"\b(?:is|equals|are|be|gives|i\.e\.,?|namely)\s+|:\s+", sentence)]
    for start in starts:
        tail = sentence[start:].strip().rstrip(".").strip()
        if tail and parse_cases(clean(tail) or ""):
            return tail
    return None



_VALUE_TEXT = r"(?:\$[^$]{1,80}\$|[$¤]?-?\d[\d,]*(?:\.\d+)?(?:/\d+)?)"
_REJECTED = re.compile(r"(?:,\s*)?\b(?:not|isn't|is\s+not|it'?s\s+not|no\s+es|no\s+son|n'est\s+pas|ist\s+nicht|nicht|не|não\s+é|"
                       r"non\s+è)\s+" + _VALUE_TEXT + r"(?![\w^/]|\.\d)\s*,?(?:\s*(?:sino|mais|sondern|а|mas|ma)\b)?"
                       r"|(?:,\s*)?" + _VALUE_TEXT + r",?\s+(?:is|are|was|must\s+be|should\s+be)\s+(?:(?:also|simply|clearly|therefore)\s+)?"
                       r"(?:rejected|discarded|extraneous|invalid|excluded|ruled\s+out|wrong|incorrect|mistaken|incomplete|"
                       r"(?:a\s+)?mistake|an\s+error|not\s+(?:correct|right|the\s+answer))\b"  # ("the student's 2 is wrong")
                       r"|\b(?:trap|wrong|incorrect|tempting|naive|mistaken|erroneous)\s+(?:answer|value|result|guess|choice)s?\s+"
                       r"(?:is|are|would\s+be|of)\s+" + _VALUE_TEXT +  # "the trap answer is 5 minutes"
                       r"|\b(?:wrongly|incorrectly|mistakenly|erroneously)\s+(?:[A-Za-z]+\s+){0,3}?" + _VALUE_TEXT
                       + r"|\b(?:trap|mistake|error|pitfall)\b[^.;!$\d]{0,40}?\b(?:answer(?:ing)?|writ(?:e|ing)|say(?:ing)?|giv(?:e|ing)|"
                       r"get(?:ting)?|choos(?:e|ing))\s+" + _VALUE_TEXT + r"|\btempting\s+" + _VALUE_TEXT, re.I)  # "students
# wrongly write $-9$": a value the sentence reports as someone's error
# "which is B" ending a sentence restates its value as B (a conversion, a decimal): B is what it ends on
_RESTATED = re.compile(r"(?:[,;]?\s+(?:which|that)\s+(?:is|equals|gives|adds?\s+(?:up\s+)?to|sums?\s+to|totals?|comes?\s+to)|,?\s+(?:i\.\s?e\.|that\s+is|soit|c'est-à-dire|d\.\s?h\.|"
                       r"т\.\s?е\.|то\s+есть|es\s+decir|ou\s+seja|cioè),?(?:\s+(?:at|on))?)\s+(?:an?\s+)?(?=(?:\d{1,2}:\d{2}|" + _VALUE_TEXT
                       + r")(?:\s*[A-Za-zÅ€£%²³/°]{1,12}\.?)?(?:\s+(?!(?:more|less|fewer|greater|smaller|larger|higher|lower|than|times|of|"
                       r"per|out|as)\b)[^\W\d_]+){0,4}\s*[.!]?\s*$)", re.I)  # ("which is 2 more than Tom" restates nothing)


# Another value offered right after the answer: "12 (or 24 if order matters)", "\\boxed{8}, or maybe 9", "0.5 (or
# equivalently 1/2)": the two are one answer `12 \\text{ or } 24`, which equals a single gold only when both do
_OR_VALUE = (r"(\s*[,;]?\s*\(?\s*(?:or|alternatively)\s*,?\s+(?:(?:maybe|perhaps|possibly|equivalently|even)\s+)?)(" + _VALUE_TEXT
             + r")(?![\w^/]|\.\d)(?=\s*(?:[),.;!]|$|(?:if|when|for|depending|in)\b|[A-Za-z]+\s*[),.;]))")  # (not "or else $J$ would")
_ALTERNATIVE = re.compile(r"(?<![\w.])(" + _VALUE_TEXT + r")(?![\w^/]|\.\d)" + _OR_VALUE, re.I)


def _alternatives(sentence):
    """Values joined by an alternative (see _ALTERNATIVE) as one math candidate: `$12 \\text{ or } 24$`."""
    return _ALTERNATIVE.sub(lambda m: f"${m.group(1).strip('$' + CURRENCY)} \\text{{ or }} {m.group(3).strip('$' + CURRENCY)}$",
                            sentence) if re.search(r"\bor\b|\balternatively\b", sentence, re.I) else sentence


def _without_rejected_values(sentence):
    """A value the sentence rejects ("not 10", "6, not 5") is no answer and no hedge: it is dropped with its "not",
    and so is a leading "No,"/"Not": "not it's not 10 it's 1,000.99" asserts 1,000.99."""
    kept = _REJECTED.sub(lambda m: " is " if re.search(r"(?:sino|mais|sondern|а|mas|ma)\s*$", m.group(0)) else " ", sentence)
    if kept == sentence:
        return sentence
    return re.sub(r"^\s*(?:no|not)\b[,!]?\s*", "", kept, flags=re.I)


def _word_predicate(sentence):
    """`The function is even.` -> itself (stripped) when a sentence says what something is in a few plain words, or
    what it does in one verb ("the series **diverges**": VERB_PREDICATE)."""
    sentence = re.sub(r"[*_]+", "", sentence).strip().rstrip(".!")
    none = re.fullmatch(r"(?:.*?[,;:]\s*)?there\s+(?:is|are|exists?)\s+(no\s+[a-z]+)", sentence, re.I)
    if none:
        return none.group(1)  # "..., so there is no mode": `no mode`
    if COPULA.match(sentence) and re.fullmatch(r"[A-Za-z\s-]{1,30}", COPULA.sub("", sentence, count=1)):
        return sentence
    return sentence if VERB_PREDICATE.fullmatch(sentence) else None


# Words that put the number after them in a modifier of the sentence, not in its assertion ("for 16 glasses",
# "by selling 9 eggs", "after 3 days", "out of 5")
_MODIFIER_START = re.compile(r"\b(?:for|by|in|(?<!total )(?<!sum )of|per|after|before|from|with|without|at|on|over|within|among|"
                             r"into|across|through|during|since|until|via|using|than|like|including|between|below|above|under|beyond|except|besides|"
                             r"toward|towards|against|near|past|upon|onto|along|around|throughout)\b", re.IGNORECASE)
_PURPOSE = re.compile(r"(?<!\bneeds\s)(?<!\bneed\s)(?<!\bhas\s)(?<!\bhave\s)(?<!\bhad\s)(?<!\bwants\s)(?<!\bwant\s)"
                      r"(?<!\bought\s)(?<!\bable\s)(?<!\bgoing\s)\bto\s+(?!be\b)[a-z]{2,}\b", re.IGNORECASE)  # "7 weeks to save $210": after a quantity


# A subordinate clause after a value ("250 minutes left if this month has 30 days"): its numbers are not asserted
_SUBORDINATE = re.compile(r"\b(?:if|when|whenever|unless|because|since|while|although|though|provided|assuming|where)\b",
                          re.IGNORECASE)


def _asserted(sentence, candidates):
    """The candidate a sentence with several asserts as its quantity: the last one after a final `=` or "is", or
    else the only one not inside a modifier phrase (`Kylar needs to pay 64 for 16 glasses` -> 64; `The total for
    3 shirts is 45` -> 45). None when no single one stands out (`5 apples and 3 oranges`)."""
    solved = _solved_for(sentence, candidates)
    if solved:
        return solved  # "So $6w + 6 = 36$, $w = 5$": equations in w, then w solved for
    position, value = candidates[-1]
    before = sentence[:position].rstrip()
    if re.search(r"(?<![!<>=])=\s*\$?$|:$|→$|->$|=>$", before.rstrip(" *_")) or re.match(r"\s*=(?!=)", value) or re.search(r"\b(?:is|be|are|was|were|equals?|gives?|get|obtain|total)"
                                                            r"(?:\s+(?:a|an|the))?\s*[$¤]?$", before, re.I):
        parallel = [c for c in candidates[:-1] if re.search(r"\b(?:is|are|was|were)\s*[$¤]?$", sentence[:c[0]].rstrip(), re.I)
                    and re.search(r"\b(?:and|but|while|whereas)\b|[,;]", sentence[c[0] + len(c[1]) + 1:position])]
        if parallel and not re.search(r"\b(?:gives?|equals?|get|obtain|total)(?:\s+(?:a|an|the))?\s*[$¤]?$", before, re.I):
            return None  # "the length is 8 and the width is 12": two quantities (not "... is 8 h; minus 15 min gives 7 h 45")
        return candidates[-1]
    subject = sentence[:candidates[0][0]]
    if len(candidates) == 2 and sentence[candidates[0][0]] in "$\\" and re.fullmatch(
            r"\s*(?:(?:so|thus|hence|therefore),?\s+)?(?:the|this|our|a|an)\s+[A-Za-z\s-]{1,40}?\s*", subject, re.I) \
            and not re.search(r"\b(?:is|are|was|were|has|have|had|equals?|gives?)\s*$", subject.strip(), re.I):
        candidates = candidates[1:]  # "The harmonic series $\sum 1/n$ diverges to $+\infty$": the subject's name
        return candidates[0]
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
                not _MODIFIER_START.search(re.split(r"\b(?:is|are|was|were|equals?)\b|=", " ".join(lead_in[-3:]))[-1])
                and not (lead_in and re.fullmatch(r"(?:the|these|those|both|all|its|their|his|her|my|our|your)", lead_in[-1], re.I))
                and not (previous_end and _PURPOSE.search(" ".join(lead_in)))
                and not (previous_end and _SUBORDINATE.search(" ".join(lead_in))))
        if is_asserted:
            asserted.append((position, value))
        previous_end, previous_asserted = position + len(value), is_asserted
    finals = {re.sub(r"[\s,$¤]|\\text\{[^{}]*\}", "", v.split("=")[-1]) for _, v in asserted}
    if len(asserted) > 1 and len(finals) == 1 and finals != {""}:
        return asserted[-1]  # "= $250,000 -- each heir receives a quarter of a million (250000) dollars": one value, twice
    results = [(p, v) for p, v in asserted if _RESULT_WORDS.search(sentence[:p])]
    if len(asserted) > 1 and len(results) == 1:
        return results[0]  # "12 ways for each shelf, giving 144 ways in total": the value the sentence arrives at
    predicates = [(p, v) for p, v in asserted if re.search(r"\b(?:is|are|was|were)\s*[$¤]?$", sentence[:p].rstrip())]
    if len(asserted) > 1 and len(predicates) == 1 and all(p < predicates[0][0] for p, _ in asserted if (p, _) != predicates[0]):
        return predicates[0]  # "So 20 is 0.25 percent of 80": the subject, then the value the copula states
    if len(asserted) > 1:  # "Janet sells 16 - 3 - 4 = 9 eggs a day, making $18": the one sum of money
        money = [(p, v) for p, v in asserted if sentence[p - 1:p] == CURRENCY
                 or re.match(r"\s*(?:dollars?|cents?)\b", sentence[p + len(v):], re.I)]
        if len(money) == 1:
            return money[0]
        # else the one in the main clause: "John runs 120 miles a week, running 3 days a week" -> 120
        main = [(p, v) for p, v in asserted if not re.search(r",\s*(?:not\s+)?[a-z]+ing\b", sentence[:p])]
        return main[0] if len(main) == 1 and not money else None
    return asserted[0] if asserted else None


def _solved_for(sentence, candidates):
    """The last candidate when the sentence ends in a derivation: equations in one letter joined by commas or "so",
    the last of them the letter solved for (`x = 1.222...`, `9x = 11`, `x = \\frac{11}{9}` -> x = 11/9). Assignments
    alone are several answers (`x = 2, x = 3`), not a derivation."""
    last = re.fullmatch(r"\s*([A-Za-z])\s*=\s*[^=<>]+", candidates[-1][1])
    if last is None:
        return None
    letter = rf"(?<![A-Za-z\\]){last.group(1)}(?![A-Za-z])"
    run = [candidates[-1]]
    for position, value in reversed(candidates[:-1]):
        segment = MATH_SEGMENT.match(sentence, position) if sentence[position] in "$\\" else None
        between = sentence[segment.end() if segment else position + len(value):run[-1][0]]
        if "=" not in value or not re.search(letter, value) or not re.fullmatch(r"[\s$]*(?:[,;]|,?\s*(?:so|then|hence|thus))?[\s$]*",
                                                                              between, re.I):
            break
        run.append((position, value))
    steps = [v for _, v in run[1:]]
    return candidates[-1] if steps and any(not re.fullmatch(r"\s*[A-Za-z]\s*=[^=]+", v) for v in steps) else None


def _derivation_end(sentence):
    """The last equation of a sentence that ends on it, when the sentence is a derivation whatever its words: the
    letter solved for (`3x = 18, then divide by 3, so x = 6`; the letter is in an earlier equation that is not itself
    an assignment) or a computation on an earlier result (`... = 1111, and 7 \\times 1111 = 7777`), else None."""
    steps = _candidates(sentence)
    position, last = steps[-1]
    segment = MATH_SEGMENT.match(sentence, position) if sentence[position] in "$\\" else None
    if not re.fullmatch(r"[\s$*_]*[.!]?\s*", sentence[segment.end() if segment else position + len(last):]):
        return None
    earlier = [v for _, v in steps[:-1] if "=" in v]
    solved = re.fullmatch(r"\s*([A-Za-z])\s*=\s*([^=<>]+)", last)
    if solved:
        letter = rf"(?<![A-Za-z\\]){solved.group(1)}(?![A-Za-z])"
        return last if any(re.search(letter, v) and not re.fullmatch(r"\s*[A-Za-z]\s*=[^=]+", v) for v in earlier) else None
    computed = re.fullmatch(r"([^=A-Za-z]*?\d[^=A-Za-z]*)=\s*(-?\d[\d,]*(?:\.\d+)?)\s*", re.sub(r"\\(?:times|cdot|div)\b", "*", last))
    results = [v.split("=")[-1].strip() for v in earlier]
    used = computed and any(re.fullmatch(r"-?\d[\d,]*(?:\.\d+)?", r) and re.search(rf"(?<![\d.]){re.escape(r)}(?![\d.])",
                                                                                   computed.group(1)) for r in results)
    return computed.group(2) if used else None


def _unit_after(after):
    """The text after a value opens with a compound unit (`m/s`, `m/s^2`, `kg·m/s²`) and the sentence's end or a comma."""
    unit = re.match(r"\s*([A-Za-z]+(?:\s*(?:/|·|\*)\s*[A-Za-z]+)+(?:\^\{?-?\d\}?|[²³])?)\s*(?:[.,;!]|$)", after)
    return bool(unit) and all(unit_key(w) for w in re.findall(r"[A-Za-z]+", unit.group(1)))


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
    value = re.sub(r"^\s*=\s*", "", value)  # "P(at least one six) $= 1 - 25/36 = 11/36$": a chain after a label in words
    segment = MATH_SEGMENT.match(sentence, position) if sentence[position] in "$\\" else None
    if segment:  # a math segment ($...$, \(...\)): skip its closing delimiter
        after = sentence[segment.end():].lstrip("*_")
    provisional = _PROVISIONAL.search(sentence, 0, position)
    if provisional and not re.search(r"=|;|\b(?:gives?|giving|leaves|leaving|makes?|making|so|then|now)\b", sentence[provisional.end():position]):
        return None  # "Total so far: 36": a value given for now
    if re.search(r"\b(?:would|could|might)\s+(?:be|have|get|give|make|cost|take|equal)\s*[$¤]?$", before, re.I) \
            and re.match(r"\s*(?:[\w-]+\s+){0,3}?if\b", after, re.I):
        return None  # "The answer would be 12 if the boxes were full": a counterfactual
    if _conditional_after(after) or _qualified(sentence, position, segment.end() if segment else position + len(value)):
        return None  # "5 if n is even", "over 40", "not 40", "12 or more"
    if re.search(r"(?:[-+*/^<>≤≥≠]|!=|\\[a-z]+)\s*$", before) and not re.search(r"(?<![!<>=])=$", before):
        return None
    if re.match(r"\s*(?:[-+*/^<>=]|\((?!\s*[A-Za-z]{2,})|[A-Za-z](?![A-Za-z]))", after) and not re.match(r"\s*[IiAa]\s", after) \
            and not (sentence[position] != "$" and re.match(r"\s*" + _GLUED_UNIT, after)) \
            and not _unit_after(after):
        return None  # 5x, 5 + y, 5(1+x), 5 = ... (but "5 m", "5m²": a unit)
    after = re.sub(r"^\s*times\s*(?=[.,;!?]|$)", "", after)  # "rang 22 times." counts; "5 times x" multiplies
    percent = re.match(r"\s*(?:\\?%|percent\b|per\s+cent\b)", after)
    after = after[percent.end():] if percent else after
    before = re.split(r"\b(?:is|are|was|were|be|equals?|gives?|makes?|yields?|gets?)\b|=", before)[-1]  # "the inverse is $y = ...$"
    nearby = " ".join(re.split(r"[,;:]", before)[-1].split()[-4:] + re.split(r"[,;:]", after)[0].split()[:2])
    if _MODIFIER_WORDS.search(nearby):
        return None
    if percent:
        return value.strip() + "\\%"  # "0.5%", "0.5 percent": the sign is part of the value (0.5% is not 50%)
    if re.match(r"\s*°", after) and sentence[position] != "$":
        return value.strip() + "^\\circ"  # "i.e. 60°": an angle in degrees (equal to \frac{\pi}{3}, not to \frac{\pi}{3} as 60)
    unit = re.match(r"\s*([A-Za-z]+)", after)
    if unit and unit_key(unit.group(1)) and sentence[position] != "$":
        return f"{value.strip()} {unit.group(1)}"  # "the angle is 60 degrees": the unit is part of the answer
    return value.strip()



# ------------------------------------------------------------------------------------------------------------
# Qualifiers: each is attached to the value it qualifies, never read from anywhere in the sentence
# ------------------------------------------------------------------------------------------------------------
# A bound, an approximation or a denial right before the value ("over 40", "at least 5", "more than 12", "not 40",
# "cannot be 7", "up to 8"), with nothing but a copula, "equal to", an article or a currency sign between them; a
# negated verb one word before it ("cannot buy 7", "didn't spend $40"). A negation or a comparison elsewhere belongs to
# another phrase: "the stickers not on the wall is 35", "3 more laps than Priya", "$36 on snacks over 3 weeks".
_BOUND_BEFORE = re.compile(
    r"(?:\b(?:over|under|above|below|about|around|roughly|nearly|almost|least|most|than|up\s+to|between|either|neither|"
    r"nor|not|no|never|cannot)|n't)\s+(?:(?:be|been|being|equal|equals|equal\s+to|to|exactly|just|only|even|a|an|the|"
    r"of)\s+)*[(\s]*[$¤]?\s*$"
    r"|(?:\b(?:not|never|cannot)|n't)\s+(?!(?:is|are|was|were|equals?)\b)[a-z]+\s+[$¤]?\s*$", re.IGNORECASE)
# ... or right after it ("12 boxes or more", "5 apples at most", "40 minutes or so", "5+")
_BOUND_AFTER = re.compile(r"\s*(?:[A-Za-z]+\s+){0,2}?(?:or\s+(?:more|less|fewer|greater|higher|lower|above|below|over|under|"
                          r"so|thereabouts|longer|shorter)\b|at\s+(?:least|most)\b)|\s*,?\s*(?:give\s+or\s+take|more\s+or\s+less|"
                          r"plus\s+or\s+minus|roughly|approximately|or\s+close\s+to\s+it)\b|\s*\+(?![\w\\({$])|-?ish\b", re.IGNORECASE)
_APPROX_WORD = re.compile(r"(?<!\\)\b(?:approximately|approx\.?|about|around|roughly|nearly|environ|ungefähr|etwa|circa|ca\.|"
                          r"примерно|около|aproximadamente|cerca\s+de|circa)\s+(?=[$¤]?-?\d)|(?:大约|约)\s*(?=-?\d)", re.IGNORECASE)


def _qualified(sentence, start, end):
    """A bound or a denial is attached to the value at sentence[start:end] (see _BOUND_BEFORE, _BOUND_AFTER)."""
    return _BOUND_BEFORE.search(sentence[max(0, start - 80):start]) is not None \
        or _BOUND_AFTER.match(sentence, end) is not None


def _approximate_value(sentence):
    """`approximately 0.2` -> `\\approx 0.2` (a rounded value: it equals only a gold that is itself rounded, see
    answer_compare): the approximation word is attached to the value that follows it."""
    approx = _APPROX_WORD.search(sentence)
    plain = sentence[:approx.start()] + sentence[approx.end():] if approx else sentence
    value = _one_candidate(plain)
    if value and approx and plain[approx.start():].lstrip("$" + CURRENCY).startswith(value):
        return "\\approx " + value
    return value


# ------------------------------------------------------------------------------------------------------------
# The reduction: one span (whatever found it) -> one value, or None
# ------------------------------------------------------------------------------------------------------------
class Span(NamedTuple):
    """What stage 1 (answer_span.py) found. kind: box | field (JSON / <answer> value) | formula (a whole response) |
    phrase (the text after an answer phrase) | line (a `####` line, a table's last row) | conclusion (free text).
    text: the span; context, start, end: the text it was found in and its place there (a box's or a phrase's
    sentence can qualify it: "\\boxed{5}, but I'm not sure", "If n is even, the answer is 5; ...")."""
    kind: str
    text: str
    context: str = ""
    start: int = 0
    end: int = 0
    decimal_comma: bool = False  # the response is written in a language whose decimal mark is a comma (see below)


def reduce_span(span):
    """The one value a span states (see _reduce_span); a bare option letter with the value the response ties to it."""
    value = _reduce_span(span)
    return _option_with_value(value, span.context or span.text) if value and len(value) < 20 else value


def _reduce_span(span):
    """The one value a span states (a string), or None. Math spans (box, field, formula) are their value, unless
    they hold an answer sentence; prose spans go through sentence_value; a qualifier of the span in its sentence
    (a doubt, a condition, another case) makes it no answer."""
    if span.decimal_comma or span.kind in ("phrase", "line", "conclusion"):
        span = span._replace(text=_scale_suffixes(number_conventions(span.text, span.decimal_comma)))  # ("12k", "$2.5M")
    if span.kind in ("phrase", "line", "conclusion"):  # "0.285714...", "0.\overline{3}" in prose: one value each
        span = span._replace(text=outside_math(span.text, lambda t: repeating_decimals(t, "$")))
    if span.kind == "field" and len([w for w in re.findall(r"(?<![\\A-Za-z])[A-Za-z]{3,}", re.sub(r"\$[^$]*\$", " ", span.text))
                                     if is_english(w)]) >= 2:
        value = sentence_value(_strip_currency(span.text.strip()))  # <answer>There are 12 outfits.</answer>
        return value if value or re.search(r"\d", span.text) else span.text.strip()  # (a word answer stays as written)
    if span.kind in ("box", "field", "formula"):
        text = _scale_suffixes(span.text.strip(), formula=True) if span.kind == "formula" else span.text.strip()  # `$2.4M × 1.25 = $3M`
        if span.kind != "formula" and re.search(r"\banswer\s+is\b|^\\text\s*\{\s*\(?[A-E]\)?\s*\}\s*\S", text, re.I):
            text = phrase_value(unwrap_commands(text)) or _choice_with_value(text) or text  # `\boxed{\text{The answer is } 5}`
        if span.kind == "box" and span.context:
            rest = _first_sentence(span.context[span.end:span.end + MAX_ANSWER_CHARS].split("\n", 1)[0].lstrip("$ )\\]"))
            if UNSURE.search(rest) or _conditional_after(rest) or _case_of_several(span.context, span.start, span.end):
                return None  # "\boxed{7}, but I'm not sure." / "\boxed{5} if n is even, else 6": no answer
            other = re.match(_OR_VALUE, rest, re.I)
            if other:  # "\boxed{12} (or 24 if order matters)"
                return f"{_last_step(text)} \\text{{ or }} {other.group(2).strip('$' + CURRENCY)}"
        return _last_step(text)
    if span.kind == "phrase":
        return phrase_value(span.text, span.context, span.start, span.end)
    if span.kind == "line" and not re.search(r"[A-Za-z]{3}", span.text):
        return span.text.strip()  # `#### 18`, `#### $1,234`
    if span.kind == "line":
        return sentence_value(_strip_currency(span.text))
    return conclusion_value(span.text)




# An option letter that ends a clause: "option B", "choice (C)", "(D)"
_OPTION_BEFORE = re.compile(r"(?:\b(?:option|choice|answer)\s+(?:is\s+)?\(?([A-E])\)?|\(([A-E])\))\s*$")
_OPTION_VALUE = r"(\$[^$\n]{1,60}\$|[$¤]?-?\d(?:[\d,]*\d)?(?:\.\d+)?(?:/\d+)?)"


def _option_with_value(answer, text):
    """A bare option letter (`(C)`, `C`) given as the answer, with the value the response ties to it before ("26,
    which matches choice (C)", "(C) 26", "option C: 26"): the letter with its value, `(C) 26` (it equals the letter
    and the value); else the letter alone."""
    letter = re.fullmatch(r"\s*(?:\\text\s*\{\s*)?\(?\s*([A-E])\s*\)?\s*\}?\s*\.?", answer or "")
    if letter is None or not text:
        return answer
    name = rf"(?:\(\s*{letter.group(1)}\s*\)|\b(?:option|choice)\s+\(?{letter.group(1)}\b\)?)"
    before = list(re.finditer(r"(?<![\w.,])" + _OPTION_VALUE + rf"[^.\n$\d]{{0,40}}?\b(?:matches|corresponds\s+to|is|gives)\s+(?:the\s+)?(?:answer\s+)?"
                              + name, text[-3000:]))
    after = list(re.finditer(name + r"\s*(?:[:=]|is|,)?\s*" + _OPTION_VALUE + r"(?![\d.])", text[-3000:]))
    found = max(before + after, key=lambda m: m.start(), default=None)
    return f"({letter.group(1)}) {found.group(1).strip('$')}" if found else answer


def _choice_with_value(text):
    """`\\text{(C) } 12`: an option letter with its value is the value (the letter alone stays a letter)."""
    match = re.fullmatch(r"\\text\s*\{\s*\(?[A-E]\)?\s*\}\s*(.+)", text.strip())
    return match.group(1) if match else None


def phrase_value(rest, context="", start=0, end=0):
    """The answer after an answer phrase ("The final answer is $5$. I hope it is correct." -> `5`): the first
    sentence of `rest`, or the block below a phrase on a line of its own ("**Final Answer**\\n\\n\\[ ... \\]")."""
    rest = re.sub(r"^[ \t*_:=]*(?:\((?=[^()\n]*[A-Za-z]{3})[^()\n]{0,40}\)[ \t*_:]*)?(?:is\b)?[ \t*_:]*", "", rest, flags=re.IGNORECASE)  # ("(spoiler)")
    line, _, after = rest.partition("\n")
    if not line.strip():  # "**Final Answer**" on a line of its own: the answer is the block below
        block = re.split(r"\n[ \t]*#{1,6}[ \t]", after.strip())[0]  # (up to the next heading)
        return _display_math(block) or (sentence_value(_strip_currency(block)) if "\n" not in block
                                        else conclusion_value(block, finished=False))
    display = _display_math(rest.lstrip())
    if display:
        return display
    line = _strip_currency(line[:4 * MAX_ANSWER_CHARS])  # (a longer line is no answer: bounded work)
    line = re.split(r"\s\|\s+(?=[*_]*[^\W\d_][\w ]{0,30}[*_]*\s*:)", line)[0]  # "7 | **Confidence:** 8/10": the next field
    if context and not after.strip() and _cut_off(line):
        return None  # "The answer is 42 apples per": the response stops mid-sentence
    sentence = _first_sentence(line)
    if context and not UNSURE.search(sentence) and not _case_answer(sentence) and _case_of_several(context, start, end):
        sentence_start = max(context.rfind(stop, max(0, start - 300), start) for stop in (". ", "\n", "! ", "? ")) + 1
        return _case_answer(context[sentence_start:].split("\n", 1)[0] if context[sentence_start:start].strip() else
                            context[sentence_start:start] + line)  # an answer by cases (see parse_cases), else none
    if context and re.search(r"\b(?:would|could|might)\b", context[start:end], re.I):  # "The answer would be 12 if ..."
        contrast = re.search(r",\s*but\s+", sentence)
        if contrast is None:
            return None  # a counterfactual, and no actual value after it
        sentence = sentence[contrast.end():]  # "..., but since two are empty it's 10."
    value = sentence_value(sentence)
    word = re.fullmatch(r"\s*[*_]*([A-Za-z]+(?:[ -][A-Za-z]+){0,2})[*_]*\s*[.!]?\s*", sentence) if value is None else None
    if word and not UNSURE.search(sentence):
        return word.group(1)  # "Answer: True", "Final answer: **odd**": a word answer as written
    if value and value.startswith("\\approx ") and _ROUNDING_ASKED.search(context[max(0, start - 200):start].split("\n")[-1]):
        return value[len("\\approx "):]  # "Rounding to the nearest whole number, the answer is approximately 12."
    return value


def _display_math(text):
    """The content of a display-math block that starts the text (it may span lines), else None."""
    for opener, closer in (("\\[", "\\]"), ("$$", "$$")):
        if text.startswith(opener):
            end = text.find(closer, len(opener))
            if end > 0:
                return text[len(opener):end].strip() or None
    return None


def _unicode_in_prose(sentence):
    """Unicode mathematics written in prose as the LaTeX it stands for, where it joins numbers: `10⁶` -> `10^{6}`,
    `3×10` -> `3 \\times 10`, `−7` -> `-7` (so that `3×10⁶` is one formula)."""
    sentence = re.sub(r"(?<=[\d)}])[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+", lambda m: superscripts(m.group(0)), sentence)
    sentence = re.sub(r"(?<![A-Za-z][A-Za-z])(?<=[A-Za-z])[⁰¹²³⁴⁵⁶⁷⁸⁹⁻⁺]+(?=\s*[-+=<>*/−·×),≤≥≠])", lambda m: superscripts(m.group(0)),
                      sentence)  # x² + 2x + 1, x³ = 27 (a letter's power in a formula; not "12 m².")
    sentence = re.sub(r"(?<![\w])[−–](?=\s*\d)", "-", sentence)
    sentence = unit_vector_hats(sentence)  # 2î + ĵ
    sentence = re.sub(r"(?:(?<=\d)|(?<=[A-Za-z]{2})) [xX] (?=[$¤]?\d)", " × ", sentence)  # "5 shelves x 4 rows": a times sign
    sentence = re.sub(r"([√∛∜])\s*(\d+(?:\.\d+)?|[A-Za-z](?![A-Za-z]))",
                      lambda m: {"√": "\\sqrt", "∛": "\\sqrt[3]", "∜": "\\sqrt[4]"}[m.group(1)] + "{" + m.group(2) + "}", sentence)
    sentence = re.sub(r"(?<=\d)\s*[×·]\s*(?=\d)", r" \\times ", sentence)
    if re.search(r"=>|[⇒⟹∴]|\s-{1,3}>\s|\\(?:Rightarrow|implies|Longrightarrow|therefore)(?![a-z])", sentence):
        sentence = outside_math(sentence, lambda t: _ARROW.sub(", so ", t))  # "... = 24 => 24", "2x = 14 ∴ x = 7"
    return sentence


_ARROW = re.compile(r"\s*(?:==?>|[⇒⟹∴]|(?<=\S)\s+-{1,3}>\s+(?=\S)|\\(?:Rightarrow|implies|Longrightarrow|therefore)(?![a-z]))\s*")


_NUMBER_OR_WORD = r"(\d+|(?:" + NUMBER_WORD + r"))"
_CHANCE = re.compile(r"(?<![\w.])" + _NUMBER_OR_WORD + r"(?:\s*-\s*|\s+)(?:in|out\s+of|chances?\s+in)(?:\s*-\s*|\s+)"
                     + _NUMBER_OR_WORD + r"(?!\w|\.\d)", re.IGNORECASE)


def _number_text(text):
    return text if text.isdigit() else number_words(re.match(".*", text, re.S))


# An exact value followed by its rounding ("$\\sqrt{27}$, about 5.196", "2/3 (≈ 0.67)"): one value, `X \\approx Y`
_ROUNDED_AFTER = re.compile(r"(\$[^$]{1,80}\$|(?<![\w.])\d+/\d+)\s*(?:,\s*|\(\s*)(?:about|approximately|roughly|≈|\\approx)\s*"
                            r"(\$?-?\d+\.\d+\$?)\s*\)?", re.IGNORECASE)
# A scale letter written against a number: "12k", "$3.2k", "$2.5M", "$1.2bn", "8 bn", "2M people" (thousand, million,
# billion). A lowercase k, bn or mn is no unit, so it always scales; K, M and B are also kelvin, molar or bytes, so
# they scale only after a currency sign or before a word that is no unit ("300K" alone may be a temperature). In a
# formula the letter is a variable when the text also uses it alone (`k = 3`, `2k^2`) or adds a plain number to the
# scaled one (`3k + 2`); where every number added is scaled alike (`12k + 3k = 15k`) or the others only multiply or
# divide it (`$2.4M × 1.25 = $3M`, `8 bn ÷ 4 = 2 bn`), it scales.
_SCALE_SUFFIX = re.compile(r"(?<![\w.^_/*+=-])([$¤]\s*)?(\d+(?:\.\d+)?)(k|K|M|\s?bn|\s?mn|B)(?![\w^(_\\]|\.\d)")
_SCALED_NUMBER = r"[$¤]?\d+(?:\.\d+)?\s?(?:k|K|M|bn|mn|B)\b"
_SCALE_LETTERS = {"k": 1000, "K": 1000, "M": 10**6, "mn": 10**6, "bn": 10**9, "B": 10**9}


def _scale_suffixes(sentence, formula=False):
    """Scale letters as their numbers (see above); in a formula (formula=True) only after a currency sign or as bn, mn."""
    if not re.search(r"\d\s?(?:k|K|M|bn|mn|B)\b", sentence):
        return sentence
    rest = _SCALE_SUFFIX.sub(" ", sentence)
    variables = {letter for letter in ("k", "K", "M", "B") if re.search(rf"(?<![\w\\]){letter}(?![\w])|{letter}\s*\^", rest)}

    def value(match):
        letter = match.group(3).strip()
        number = Fraction(match.group(2)) * _SCALE_LETTERS[letter]
        after, before = sentence[match.end():], sentence[:match.start()]
        word = re.match(r"\s+([a-z]+)", after)
        if formula and not match.group(1) and letter not in ("bn", "mn"):
            return match.group(0)
        if letter in "KMB" and not match.group(1) and not (word and not unit_key(word.group(1))):
            return match.group(0)  # 300K without a currency sign may be kelvin
        if letter in variables or re.match(r"\s*[-+]\s*[$¤]?\d", after) and not re.match(r"\s*[-+]\s*" + _SCALED_NUMBER, after) \
                or re.search(r"\d\s*[-+]\s*[$¤]?$", before) and not re.search(_SCALED_NUMBER + r"\s*[-+]\s*[$¤]?$", before) \
                or re.match(r"\s*[\^(]|\s*[-+*/=]\s*[A-Za-z]", after):
            return match.group(0)  # `x = 3k + 2`, `2k^2`: a letter in a formula
        return (match.group(1) or "") + (str(number.numerator) if number.denominator == 1 else str(float(number)))
    return _SCALE_SUFFIX.sub(value, sentence) if formula else outside_math(sentence, lambda t: _SCALE_SUFFIX.sub(value, t))


# Numbers in words joined by arithmetic words: "two hundred forty thousand dollars plus twenty-four thousand dollars plus
# twelve thousand dollars, which equals ...": the working of a model asked for numerals, written out (it states no
# answer in words; a single number in words does: "two hundred ninety-four dollars")
_WORD_ARITHMETIC = re.compile(rf"\b(?:{NUMBER_WORD})\b[\w\s-]{{0,40}}?\b(?:plus|minus|times|multiplied\s+by|divided\s+by|"
                              rf"added\s+to)\s+(?:{NUMBER_WORD})\b", re.I)


# The domain of a parameter declared after the value that uses it ("$x = 5k + 2$, $k \\in \\mathbb{Z}$", "x = (2k + 1)π, k an
# integer", "for any integer n"): no part of the statement's value (latex.PARAMETER_DOMAIN for a whole answer)
_PROSE_DOMAIN = re.compile(r"(?:\s*[,;]\s*(?:where\s+|for\s+(?:all\s+|any\s+|every\s+|some\s+)?)?|\s+(?:where|for(?:\s+(?:all|any|every|some))?)\s+)"
                           r"(?:(?:an?\s+)?integers?\s+)?\$?\s*(?<![A-Za-z\\])[a-z]\s*"
                           r"(?:\\in|∈)\s*(?:\\mathbb\s*\{?\s*[ZNRQ]\s*\}?|[ℤℕℝℚ])\s*\$?|\s*[,;]\s*(?:where\s+)?[a-z]\s+(?:is\s+)?(?:an?\s+|any\s+)?"
                           r"(?:integer|whole\s+number|real\s+number)s?\b|\s+for\s+(?:all\s+|any\s+|every\s+)?integers?\s+[a-z]\b")


@lru_cache(maxsize=1024)
def _prepared(sentence):
    """A sentence made ready to choose its value: its list marker, the clause before a last ", so", a rounding note,
    a reason clause in front ("Since f(-x) = f(x), ...") and the values it rejects ("not 15") dropped; LaTeX
    written without delimiters, ratios "1 to 2" and numbers in words made into candidates."""
    sentence = re.sub(r"^\s*(?:\d+[.)]|[-*])\s+", "", sentence)  # list markers: "3) $1375 on all ads"
    sentence = re.sub(r"(?<=[A-Za-z]{2})['’](?=s\b)", "", sentence)  # "it's 1/36": a contraction, not a prime
    sentence = re.sub(r"(?<=[A-Za-z,:]\s)\+(?=\d)", "", sentence)  # "the result is +6": a sign that says the value is positive
    sentence = _PROSE_DOMAIN.sub("", sentence) if re.search(r"\\in|∈|integer|whole|real", sentence) else sentence  # ", k ∈ ℤ"
    sentence = outside_math(degrees_minutes_seconds(sentence), lambda t: base_numerals(t, "$"))  # "47°15′", "1000 (base 2)"
    sentence = scaled_numbers(_unicode_in_prose(outside_math(sentence, lambda t: repeating_decimals(t, "$"))))  # "0.666...", "3×10⁶", "−7", "4 million"
    sentence = words_as_values(_scale_suffixes(sentence))
    sentence = re.sub(r"(?<![\w.])(\d+)(?:\s+and\s+|-)(\d+)/(\d+)(?=\s+([A-Za-z]+))",  # "2 and 3/4 feet", "1-1/2 ft" (a unit after)
                      lambda m: f"${m.group(1)}\\frac{{{m.group(2)}}}{{{m.group(3)}}}$" if unit_word(m.group(4)) else m.group(0), sentence)
    if re.search(r"[\u4e00-\u9fff]", sentence):
        sentence = cjk_numbers(sentence)
    sentence = _ROUNDED_AFTER.sub(lambda m: f"${m.group(1).strip('$')} \\approx {m.group(2).strip('$')}$", sentence)
    sentence = _alternatives(sentence)
    # the conclusion is the clause after a last "so"/"hence" (when it states something)
    parts = re.split(r"[,;]\s+(?:and\s+)?(?:so|hence|therefore|thus|which\s+means(?:\s+that)?)\s+", sentence)
    if len(parts) > 1 and (_candidates(parts[-1]) or _word_predicate(parts[-1]) or _set_words(parts[-1])
                           or NUMBER_WORDS.search(parts[-1])):
        sentence = parts[-1]
    named = re.search(r"(?<!:):\s+((?:an?\s+|the\s+)?[^:$=]{1,40}?)\s*[.!]?\s*$", sentence)
    if named and len(_candidates(named.group(1))) == 1 and len(_candidates(sentence)) > 1 \
            and not re.search(r"\b(?:is|are|was|were|has|have|be|but|if|or|not)\b", named.group(1), re.I):
        sentence = named.group(1)  # "The drop is $10 out of $50: a 20% decrease.": what the working comes to, named
    confirmed = re.search(r"\s[—–]\s+(?:(?:yes|so|indeed|exactly|that's|that\s+is|i\.e\.)\W+)*([^—–]{1,30})$", sentence, re.I)
    if confirmed and len(_candidates(confirmed.group(1))) == 1 and not re.search(r"[A-Za-z]{3}", re.sub(
            r"\$[^$]*\$", "", confirmed.group(1))):
        sentence = confirmed.group(1)  # "4 on top, 4 below and 4 vertical ones — yes, 12.": the value it confirms
    if "(" in sentence:  # an aside in parentheses ("0.3 (a computer would print 0.30000000000000004)") is no answer
        sentence = _without_asides(sentence)
    sentence = _wrap_raw_math(ROUNDING_NOTE.sub(" ", sentence))  # "(to 3 s.f.)" says how the value is rounded
    if re.search(r"\b(?:ratio|odds)\b", sentence, re.I):  # "the ratio of boys to girls is 1 to 2", "odds of 1 to 4": 1:2
        sentence = re.sub(r"(?<![\w.])(\d+)\s+to\s+(\d+)(?!\w|\.\d)", r"$\1:\2$", sentence)
    sentence = re.sub(r"(\b(?:is|are|was|were|be)\s+|:\s+)(\d+)\s+to\s+(\d+)(?=\s*[.!]?\s*$)", r"\1$\2:\3$", sentence)  # "... is 1 to 2"
    if not _candidates(sentence) and re.search(NUMBER_WORDS.pattern + "|" + FRACTION_WORDS.pattern, sentence, re.I):
        if not _WORD_ARITHMETIC.search(sentence):  # (arithmetic done in words is working, not an answer in words)
            sentence = _spelled_out(sentence)
    else:  # numbers in words after the last copula ("..., so the probability is one half")
        copula = list(re.finditer(r"\b(?:is|are|was|were|equals?|gives?|makes?|yields?)\b", sentence))
        tail = sentence[copula[-1].end():] if copula else ""
        if tail and not _candidates(tail) and re.search(NUMBER_WORDS.pattern + "|" + FRACTION_WORDS.pattern, tail, re.I):
            sentence = sentence[:copula[-1].end()] + _spelled_out(tail)
    if re.search(r"\b(?:probability|chances?|odds|likel(?:y|ihood))\b", sentence, re.I):  # "1 in 4", "5 out of 36"
        sentence = _CHANCE.sub(lambda m: f"$\\frac{{{_number_text(m.group(1))}}}{{{_number_text(m.group(2))}}}$", sentence)
    elif re.search(r"\b(?:out\s+of|in)\s+\S+\s*[.!;]?\s*$", sentence):  # "3 out of 10", "i.e. 1 out of 13.": a part of a whole,
        sentence = re.sub(_CHANCE.pattern + r"(?=\s*[.!;]?\s*$)", lambda m: f"$\\frac{{{_number_text(m.group(1))}}}{{"  # the statement's end
                          f"{_number_text(m.group(2))}}}$", sentence, flags=re.I)
    sentence = re.sub(r"(\b(?:is|are|was|were|be)\s+|:\s+)(\d+)\s+to\s+(\d+)(?=\s*[.!]?\s*$)", r"\1$\2:\3$", sentence)  # "five to eight"
    reason = _LEADING_REASON.match(sentence)  # "Since f(-x) = f(x), the function is even.": the main clause
    if reason and (_candidates(sentence[reason.end():]) or _word_predicate(sentence[reason.end():])
                   or _set_words(sentence[reason.end():])):
        sentence = sentence[reason.end():]
    return sentence


def _without_asides(text):
    """Parentheses that set an aside apart from the statement (found with the sentence's math set aside, so that an
    aside may hold math): three English words or more ("0.3 (a computer would print 0.30000000000000004)"), a
    verification or a rejection ("(check $(1,0,0)$: $12 = 12$ ✓)", "($x = -2$ is rejected)"), or, after a value and its
    unit words, working or words without a letter of a formula ("150 minutes (2 h = 120 min, 0.5 h = 30 min)", "60 (15
    × 4)", "12,00,000 रुपये (12 लाख)"); not "3 (2x + 1)", "(or 24 ...)", "(not 40 ...)", "(assuming n is even; ...)": another
    value offered or rejected, a condition."""
    masked = MATH_SEGMENT.sub(lambda m: "\x01" * len(m.group(0)), text) if "$" in text or "\\" in text else text
    kept, last = [], 0
    for match in re.finditer(r"\s*\([^()]*\)", masked):
        inner = text[match.start():match.end()]
        if re.match(r"\s*\(\s*(?:or|not|correction|corrected|actually|maybe|possibly|perhaps|probably|wait|oops|rather)\b", inner, re.I) or re.search(r"\b(?:if|unless|assuming|provided|otherwise|else|depending)\b",
                                                                inner, re.I) and not re.search(r"\b(?:would|could|might)\b", inner, re.I) \
                or re.search(r"\d\s*[ap]\.?\s?m\b|\\text\s*\{\s*[ap]m\s*\}", inner, re.I):  # ("half past four (4:30 a.m.)": the time, said precisely)
            continue  # (another value offered or rejected, a condition: they qualify the value; not a counterfactual aside)
        english = [w for w in re.findall(r"(?<![\\A-Za-z])[A-Za-z]{3,}", re.sub(r"\$[^$]*\$", " ", inner)) if is_english(w)]
        after_value = re.search(r"\d[%¤]?(?:\s*[^\s\d()=+*/^<>,.;:]+){0,3}\s*$", text[:match.start()])
        formula = re.sub(r"(?<=\d)\s*([A-Za-z]+)\b", lambda u: " " if unit_key(u.group(1)) else u.group(0), inner)
        other = re.match(r"\s*\(\s*(?:and|for\s+a\s+total\s+of|plus|with|while|whereas|vs\.?|versus)\b|\s*\(\s*([A-Za-z]{3,})\b[^()]*?\d",
                         inner, re.I)  # "(and 10 dimes)", "(nullity 1)", "(local min -2 at x = 1)": another quantity, named
        if other and other.group(1) and (unit_key(other.group(1)) or other.group(1).lower() in ("about", "approximately", "exactly")):
            other = None  # ("(about 3.14)": the same value again)
        if len(english) >= 3 or other and after_value or re.match(r"\s*\(\s*(?:check|verif|substitut)", inner, re.I) \
                or re.search(r"\b(?:rejected|extraneous|discarded|excluded|invalid|ruled\s+out)\b", inner, re.I) \
                or after_value and re.search(r"\d", inner) and not re.search(r"(?<![A-Za-z\\])[A-Za-z](?![A-Za-z])", formula) \
                or after_value and re.fullmatch(r"\s*\(\s*(?:(?:" + NUMBER_WORD + "|" + "|".join(DENOMINATORS) + r"|and|an?|point)[\s-]*)+\)", inner,
                                                re.I):  # "1/2 (one half)": the value again, in words
            kept.append(text[last:match.start()])
            last = match.end()
    return "".join(kept) + text[last:]


# A shape stated as "a by b (by c)" at the end of a statement ("The rectangle is 12 m by 6 m."): a \\times b
_SHAPE_BY = re.compile(r"(?:\b(?:is|are|be|measures?|dimensions?)\b|:)\s*\$?(\d+(?:\.\d+)?)\s*([a-z]{1,3}\b)?\s*by\s+"
                       r"(\d+(?:\.\d+)?)\s*(?:\2\b)?(?:\s*by\s+(\d+(?:\.\d+)?)\s*(?:\2\b)?)?\s*(?:units?|[a-z]{1,3})?\$?\s*[.!]?\s*$")


def sentence_value(sentence):
    """The one value an answer sentence states, or None: the same reduction for the sentence after an answer phrase,
    a `####` line, a table's last row and a conclusion (see the module docstring)."""
    sentence = re.sub(r"^[*_\s]+|[*_\s]+$", "", sentence)  # **x = 3**, ***18***, __2/3__
    label = re.fullmatch(r"[^\W\d_]{2,}(?:\s+[^\W\d_]{2,})?[*_]*\s*[:：]\s*(.+?)\s*", sentence)
    if label and len(_candidates(label.group(1))) == 1 and not re.search(r"[A-Za-z]{2}|" + OTHER_SCRIPT_LETTER,
                                                                          MATH_SEGMENT.sub(" ", label.group(1))):
        sentence = label.group(1)  # "Απάντηση: 55", "Total: $42$": a value labelled by a word of any script
    sentence = outside_math(degrees_minutes_seconds(sentence), lambda t: base_numerals(t, "$"))  # "1000 (base 2)", "47°15′"
    sentence = _PROSE_DOMAIN.sub("", sentence) if re.search(r"\\in|∈|integer|whole|real", sentence) else sentence
    if "(" in sentence:
        sentence = _without_asides(sentence)  # "60 (15 × 4).": the working after a value
    if not sentence or UNSURE.search(sentence) or _conditional(sentence):
        return None  # "3, but I'm not sure", "5 if n is even, else 6"
    shape = _SHAPE_BY.search(sentence) if " by " in sentence else None
    if shape:  # "The box is 5 by 5 by 3 units.", "... : 12 m by 6 m.": a shape, its factors in order
        return " by ".join(x for x in shape.group(1, 3, 4) if x)  # (never the product: `12 by 6` is no 72)
    matrix = matrix_in_prose(sentence)
    if matrix:
        return matrix  # "the first row of AB is (2, 1) and the second row is (4, 3)": a matrix by its rows or columns
    compass = QUADRANT_IN_PROSE.search(sentence)
    if compass:
        return compass.group(1)  # "The bearing is S 60° E.": a quadrant bearing the sentence ends on
    named = _NAMED_PREDICATE.search(sentence)
    if named and not NUMBER_WORDS.search(named.group(2)) and not _candidates(sentence[named.end(1):]):
        return f"{named.group(1)} is {named.group(2).strip()}"  # "..., so $f$ is **odd**.": what the named object is
    if _REFUSAL.search(sentence):
        return "\\text{cannot be determined}"  # "There is not enough information to determine it."
    by_cases = _case_answer(sentence)
    if by_cases:
        return by_cases  # "5 for n = 1 and 6 for n = 2": an answer by cases, not its first value
    if re.match(r"\s*(?:if|when|whenever|unless|assuming)\b", sentence, re.I) and re.search(
            r"[;,]\s*(?:and\s+|but\s+)?(?:if|when|whenever|otherwise|else)\b[^;]*?(?:\d|\$)", sentence, re.I):
        return None  # "If order matters it is 10; if not, it is 5": two cases, neither of them alone
    if re.search(r"[,;]\s*(?:and\s+|but\s+|while\s+)?(?:for|if|when)\s+\$?[a-z]\$?\s+(?:is\s+)?(?:even|odd|positive|negative)\b",
                 sentence, re.I) and len(_candidates(sentence)) > 2:
        return None  # "\boxed{2} for n even, for n odd it is \boxed{3}": the second of two cases is not the answer
    concluded = re.split(r"[,;:]\s+(?:and\s+)?(?:so|hence|therefore|thus)\s+", sentence)[-1]
    if concluded != sentence and not _candidates(concluded) and not NUMBER_WORDS.search(concluded) and _word_predicate(concluded):
        return _word_predicate(concluded)  # "... the line $x = 3$ is vertical, so its slope is undefined.": what it concludes
    parts = re.split(r"(?:\$\s*)?[,;]\s+(?:and\s+)?(?:so|hence|therefore|thus)\s+(?=\$|[A-Za-z]\s*=)", sentence)
    if len(parts) > 1 and _candidates(parts[-1]):
        sentence = parts[-1]  # "$x^2 = 9$, so $x = \pm 3$": the clause after the last "so"
    counterfactual = re.search(r"\b(?:would|could|might)\b[^.;]*?\bif\b[^.;]*?,\s*but\s+", sentence, re.I)
    if counterfactual and _candidates(sentence[counterfactual.end():]):
        sentence = sentence[counterfactual.end():]  # "It would be 12 if the boxes were full, but since two are empty it's 10."
    contrast = re.search(r",\s*but\s+", sentence)
    if contrast and not counterfactual and _candidates(sentence[:contrast.start()]) and _candidates(sentence[contrast.end():]):
        return sentence_value(sentence[contrast.end():])  # "1998 + 30 = 2028, but counting ... it is 2029": the clause revises
    words_outside_math = re.search(r"(?<![\\a-zA-Z])(?:[a-zA-Z]{3,}|[Ii][sft]|[Bb]e|[Ss]o|[Aa][st]|[Ww]e)(?![a-zA-Z])|" + OTHER_SCRIPT_LETTER,
                                   split_unit(clean(ROUNDING_NOTE.sub(" ", sentence)) or "")[0])
    tail = _equation_tail(sentence) if words_outside_math else None
    if tail:
        return sentence_value(tail)  # "24 h × 60 min × 60 s = 86 400 s", "96 ÷ 4 = 24 dollars each"
    if not words_outside_math and (not re.search(r"^\s*[$¤]?\s*-?\d[\d,]*(?:\.\d+)?\s*(?:[.,;]|:(?!\d))\s*\S", sentence)
                                   or re.fullmatch(r"\s*-?\d+(?:\.\d+)?(?:\s*,\s+-?\d+(?:\.\d+)?)+\s*\.?\s*", sentence)):  # (`1, 12, 2, 6`)
        sentence = re.sub(r",?\s*(?:\.\.\.|…|\\[lc]?dots)\s*\.?$", "", sentence) if "," in sentence else sentence
        steps = _candidates(sentence)
        solved = _solved_for(sentence, steps) if len(steps) > 1 else None
        if solved:
            return _last_step(solved[1])  # `$99x = 45$, $x = \frac{5}{11}$`: a derivation ends in the letter solved for
        return _last_step(sentence.rstrip(".").strip())  # no words: the whole span is the value (`x^2 + 1`, `3, 5`)
    reason = re.search(r"[,;]\s+(?:because|since)\b", sentence)
    if reason and reason.start() > 0:
        sentence = sentence[:reason.start()]  # "positive, because two of the three numbers are negative": a reason
    rounding_asked = _ROUNDING_ASKED.search(sentence)
    sentence = _prepared(sentence)
    whole = sentence
    if _set_words(sentence):
        return _set_words(sentence)  # "All reals.", "No solution.", "x can be any real number.": a set in words
    if not _candidates(sentence):
        return _word_predicate(sentence)  # "The function is even.", "..., so the solution set is empty."
    sentence = re.sub(r"\band\s+(?:its|their)\s+(?:[a-z]+\s+){0,2}?(?=\$)", "and ", sentence)  # "$1 + i$ and its conjugate $1 - i$"
    sentence = _without_rejected_values(_without_fronted_modifier(sentence))
    if not _candidates(sentence):
        return None  # "The answer is not 5.": a rejected value, and nothing asserted
    listed = _LISTED.search(sentence)
    if listed:  # "the first five terms are 1, 4, 9, 16, 25.", "So the numbers are 5, 10, and 20."
        return re.sub(r",?\s*and\s+", ", ", listed.group(1)).replace("$", "")
    lead = _leading_value(sentence)
    if lead is not None:
        return lead or None
    restated = _RESTATED.search(sentence)  # "..., which is 1,000.99 m²": the value the sentence ends on
    if restated and len(_candidates(sentence[restated.end():])) == 1:
        letter = _OPTION_BEFORE.search(sentence[:restated.start()])
        if letter and _one_candidate(sentence[restated.end():]):  # "The correct option is B, which equals $\sqrt{5}$."
            return f"({letter.group(1) or letter.group(2)}) {_one_candidate(sentence[restated.end():])}"
        sentence = sentence[restated.end():]
    named = re.search(r"[,;]?\s+(?:which|that)\s+is\s+(?:a\s+)?(" + _DAYS + r")\s*[.!]?\s*$", sentence)
    if named:
        return named.group(1)  # "..., which is Monday."
    if re.search(r"[,;]\s*which\s+(?:(?:we|I)\s+)?(?:still\s+)?(?:needs?|has|have|must|should)\b", sentence, re.I):
        return None  # "We get 36, which still needs to be halved.": a value the sentence defers
    cut = re.search(r"[,;]?\s+(?:because|since|as(?!\s+an?\s)|which|where)\b", sentence)  # a reason, a relative clause
    # (not "as a decimal": "$\frac23$ as a decimal is about 0.67" states 0.67)
    closed = cut and re.match(r"[,;]?\s+(?:because|since|as)\b[^,;.$\d]{1,80},\s*", sentence[cut.start():])
    if closed and _candidates(sentence[cut.start() + closed.end():]):
        sentence = sentence[cut.start() + closed.end():]  # "..., and since a determinant is an area, $|-1| = 1$": the reason
        # closed by its comma, then the main clause that concludes from it
    elif cut and _candidates(sentence[:cut.start()]):
        sentence = sentence[:cut.start()]
    if re.match(r"\s*(?:otherwise|else|in\s+the\s+other\s+case)\b", sentence, re.I):
        return None  # "Otherwise it is 4.": one case of several
    value = _approximate_value(sentence)
    if value and rounding_asked and value.startswith("\\approx "):
        value = value[len("\\approx "):]  # "Rounding to the nearest whole number as asked, the answer is approximately 12."
    return _given_letters(_last_step(value), whole) if value else value


# a sentence that ends saying in plain words what an object it names by a letter is ("so $f$ is **odd**", "i.e. $g$ is
# even (its graph ...)"); the sentence's value is that statement (compared with a word gold by answer_compare)
_NAMED_PREDICATE = re.compile(r"(?:^|[,;:]\s*|\b(?i:so|thus|hence|therefore|i\.\s?e\.)\s+)[*_]*\$?([A-Za-z](?:\s*\(\s*[a-z]\s*\))?)\$?[*_]*"
                              r"\s+(?:is|are)\s+[*_]*((?:[a-z]+[ -]?){1,4}?)[*_]*\s*(?:\([^()]*\))?\s*[.!]?\s*$")


def _equation_tail(sentence):
    """The text after the last `=` of a statement in prose whose side before it computes on numbers (units and words
    allowed: "24 h × 60 min × 60 s = 86 400 s", "5 shelves × 4 rows × 6 books = 120 books", "2^15 = 32 768") or names
    the result in words ("Total cost = $18"), when one value follows it; None when that side has an unknown
    (`y = 2x + 1 = 7` stays an equation) or math delimiters (`$y = 2x + 1 = 7$` is compared as written)."""
    equals = [m.start() for m in re.finditer(r"(?<![<>!=])=(?![=>])", re.sub(r"\$[^$]*\$", lambda m: "#" * len(m.group(0)), sentence))]
    if not equals:
        return None
    left = re.split(r"[,;:]\s", sentence[equals[-2] + 1 if len(equals) > 1 else 0:equals[-1]])[-1]
    tail = sentence[equals[-1] + 1:]
    units_dropped = re.sub(r"(?<=\d)\s+[A-Za-z]{1,12}(?:/[A-Za-z]{1,12})?\b|\b[A-Za-z]{2,}\b", " ", left)  # (45 km/h × 3 h)
    if re.search(r"[A-Za-z$\\]", units_dropped) or len(_candidates(_prepared(tail))) != 1:
        return None
    return tail


# A rounding the sentence says was asked for: the approximate value is the rounded answer
_ROUNDING_ASKED = re.compile(r"\bround(?:ed|ing)?\b[^.;]{0,30}?\bto\s+the\s+nearest\s+(?:whole\s+number|integer|unit|"
                             r"dollar|cent|tenth|hundredth|thousandth|percent|degree)", re.I)


def _given_letters(value, sentence):
    """`\\pi r^2 = 25\\pi` in a sentence that gives r ("With $r = 5$, the area is $\\pi r^2 = 25\\pi$"): the formula
    is evaluated at the given value, so its result is the value (25π). A formula in letters the sentence does not
    give stays an equation (`y = 2x + 1 = 7` is not 7)."""
    sides = value.split("=")
    if len(sides) < 2 or re.search(r"[<>]|\\[lg]e", value):
        return value
    letters = set(re.findall(r"(?<![\\A-Za-z])[A-Za-z](?![A-Za-z])", re.sub(r"\\[A-Za-z]+", " ", sides[0])))
    if not letters or re.search(r"(?<![\\A-Za-z])[A-Za-z](?![A-Za-z])", re.sub(r"\\[A-Za-z]+", " ", sides[-1])):
        return value
    position = sentence.find(sides[0].strip()[:20])
    given = position > 0 and all(re.search(rf"(?<![\\A-Za-z]){x}\s*=\s*-?\d", sentence[:position]) for x in letters)
    return sides[-1].strip() if given else value


_DAYS = r"Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday"
_LISTED = re.compile(r"(?:\b(?:are|is|were|be)\b|:(?:\*\*|__)?)\s+((?:" + _VALUE_TEXT + r")(?:\s*,\s*(?:and\s+)?(?:" + _VALUE_TEXT +
                     r")|\s*,?\s*and\s+(?:" + _VALUE_TEXT + r"))+)(?:\s*,?\s*(?:\.\.\.|…|\\ldots|\\dots))?\s*[.!]?\s*$", re.I)
# A statement that the answer cannot be found ("not enough information", "cannot be determined")
_REFUSAL = re.compile(r"\b(?:not\s+enough\s+information|insufficient\s+(?:information|data)|cannot\s+be\s+determined|"
                      r"can't\s+be\s+determined|(?:is|are)\s+undetermined)\b", re.I)


def _last_step(value):
    """The value a derivation written as one formula arrives at: after its last implication (`3n = 15 \\Rightarrow
    n = 5` -> `n = 5`), and the residue of a congruence with its modulus (`2^{100} \\equiv 2 \\pmod 7` -> `2 \\pmod{7}`: it equals
    the gold 2 and the class `x \\equiv 9 \\pmod 7`, answer_forms.congruence)."""
    inline = re.fullmatch(r"\$([^$]+)\$", value.strip())
    value = inline.group(1) if inline else value
    value = re.split(r"\\(?:Rightarrow|implies|Longrightarrow|therefore)(?![a-z])|⇒|⟹|∴|==?>", value)[-1].strip()
    arrow = re.split(r"\\to(?![a-z])|\\rightarrow(?![a-z])|→|(?<![<-])->(?!>)", value)
    if len(arrow) == 2 and not re.fullmatch(r"\s*[A-Za-z]\s*", arrow[0]) and "\\lim" not in arrow[0] and arrow[1].strip():
        value = arrow[1].strip()  # `\frac{3x^2+1}{x^2-5} \to 3` (as x -> oo): the value it tends to
    residue = re.fullmatch(r"\s*(-?\d+)\s*(?:\\pmod\s*\{?\s*(\d+)\s*\}?|\(\s*\\?(?:bmod|mod)\s*(\d+)\s*\))\s*", value)
    if residue:
        return f"{residue.group(1)} \\pmod{{{residue.group(2) or residue.group(3)}}}"  # `3 (mod 7)`: the residue and its modulus
    congruence = re.fullmatch(r"(?:.*\\equiv)\s*(.+?)\s*(?:\\pmod\s*\{?\s*([^{}$]+)\}?|\(\s*\\?(?:bmod|mod)\s*([^()]+)\))\s*\$?\s*\.?", value,
                              re.DOTALL)
    if congruence is None:
        return value
    last, modulus = congruence.group(1).split("=")[-1].strip(), (congruence.group(2) or congruence.group(3)).strip()
    return f"{last} \\pmod{{{modulus}}}" if re.fullmatch(r"-?\d+", last) and modulus.isdigit() else congruence.group(1).strip()


def _leading_value(sentence):
    """A sentence that starts with its value is that value and its unit ("3 (since 8 - 3 = 5)" -> 3, "18 miles in six
    hours" -> 18 miles); "" when a bound follows it ("12 or more"); None when it does not start with a value that an
    explanation follows."""
    lead = LEADING_VALUE.match(sentence)
    if not lead:
        return None
    rest, units = sentence[lead.end():], ""
    if re.match(r"\s*\(\s*(?:correction|corrected|actually|maybe|possibly|perhaps|probably|wait|oops|rather)\b", rest, re.I):
        return ""  # "12 (actually 15, counting the loose ones)": taken back or doubted in the same breath
    percent = re.match(r"\s*\\?%", rest)
    if percent:
        rest, units = rest[percent.end():], "\\%"
    while True:  # unit words right after the value
        word = re.match(r"\s*([A-Za-zÅ][A-Za-z.]*(?:\^\{?-?\d+\}?)?|/)", rest)
        if not word or not (word.group(1) == "/" or unit_word(word.group(1).split("^")[0])):
            break
        units, rest = units + word.group(0), rest[word.end():]
    if _BOUND_AFTER.match(sentence, lead.end()) or _conditional_after(rest):
        return ""
    if re.search(r"(?:\b(?:is|are|was|gives?|equals?|makes?|becomes?)\b|=|:\s|→|->)\s*(?:(?:about|approximately|roughly|around|"
                 r"nearly|almost|exactly|just|over|under)\s+)?(?:[$¤]?-?\d|\$)", re.sub(r"\([^()]*\)", "", rest)) or _RESTATED.search(rest):
        return None  # "1.5498 eV, which rounded gives 1.55 eV", "6 days after Wednesday: Tue": the value is asserted later
    if _EXPLANATION.match(rest) and not re.match(r"\s*(?:,|and|or)\s*[$¤]?-?\d", rest):
        return _last_step(lead.group(1)) + units.rstrip()
    return None


def conclusion_value(text, finished=True):
    """Free text: the answer is the one value of the conclusion (the last sentence that has any, of the last three),
    reduced by sentence_value. finished=False: the text need not end a sentence."""
    tail = _strip_currency(text.strip()[-4000:].replace("\\$", ""))
    tail = re.sub(r"\n[ \t]*(?==[^=])", " ", tail)  # a line that goes on with `= ...` continues the equation above
    tail = re.sub(r"(\$\$|\\\])\s*\n+\s*(?=(?:which|where|giving|so\s+that)\b)", r"\1 ", tail)  # "$$n = 60$$ / which has 12 divisors"
    if "```" in tail:  # a code block that holds only a value is that value (code itself is no answer: it was not run)
        tail = re.sub(r"```[\w+-]*[ \t]*\n\s*([$¤]?-?\d[\d,]*(?:\.\d+)?)\s*\n[ \t]*```", r"\1", tail)
    check = _CHECK.search(tail)
    if check and check.start() > 0 and _candidates(tail[:check.start()]):
        later = _CONCLUDING_LINE.search(tail, check.end())  # "x = 3.\n\nCheck: 2(3) + 5 = 11 ✓": a verification after the
        tail = tail[:check.start()] + ("\n" + tail[later.start():] if later else "")  # answer is no answer (a conclusion after it is)
    sentences = [s for s in re.split(r"\n\s*\n|\n(?=\S)|(?<=[.!?。])(?<!\b[A-Za-z]\.)\s*(?=[A-Z(])|(?<=[!?])\s+(?=\d)|(?<=\$\$|\\\])\s+(?=[A-Z])"
                                       r"|(?<=[.!?])\s+(?=\$|\\\(|\\\[)", tail)
                 if s.strip()]
    sentences = [words_as_values(_PROSE_DOMAIN.sub("", x) if re.search(r"\\in|∈|integer|whole|real", x) else x) for x in sentences]
    if finished and len(sentences) > 1 and not _finished(sentences[-1]) and not _candidates(_prepared(sentences[-1])) \
            and not _TASK.match(sentences[-1]) and re.match(r"\s*(?:therefore|thus|hence|so(?!\s+far)|in\s+total|in\s+conclusion|"
                                                            r"finally)\b", sentences[-2], re.I):
        sentences = sentences[:-1]  # "Therefore, they have 56 legs. This shows how multiplication is a fundamental": commentary
    if finished and sentences and not _finished(sentences[-1]):
        return None  # the last sentence is unfinished: a response cut off mid-thought states no conclusion
    if sentences and re.search(r"\(\s*[A-E]\s*\)\s*,?\s*(?:or|and/or|/)\s*\(\s*[A-E]\s*\)", sentences[-1]):
        return None  # "I'd go with (C) or (D).": a hedge between options
    parts = _labelled_parts(tail)
    if parts:
        return parts  # "(a) 9\n(b) 2", "Mean: 4; Median: 3", "Length = 8, width = 7.": the parts, in order
    if sentences and _set_words(sentences[-1]):
        return _set_words(sentences[-1])
    if sentences and not _candidates(sentences[-1]) and _word_predicate(sentences[-1]) \
            and not re.search(NUMBER_WORDS.pattern + "|" + FRACTION_WORDS.pattern, sentences[-1], re.I):
        return _word_predicate(sentences[-1])  # "The function is even.": a word answer (it equals only a word gold)
    if len(sentences) > 1 and all(re.match(r"\s*(?:if|when)\b", x, re.I) for x in sentences[-2:]):
        return _case_answer(sentences[-2] + " " + sentences[-1])  # "If n is even, f(n) = 5. If n is odd, f(n) = 6."
    for sentence in reversed(sentences[-3:]):
        if _TASK.match(sentence) or sentence.rstrip(" *_").endswith("?"):
            return None  # the question restated ("We need to find how many of the 12 ..."): no answer yet
        prepared = _prepared(sentence)
        if _candidates(prepared) and not _candidates(_without_rejected_values(prepared)) and not _NOT_VALUE.search(sentence):
            continue  # "The other root, -9, is rejected.": the answer was stated before
        if not _candidates(prepared) and _RETRACTION.search(sentence):
            return None  # "The total is 36. But I double counted the corners.": the value before is taken back
        labelled = re.fullmatch(r"\s*\(\s*([A-Za-z][\w ]{0,20}:\s*[^()]+)\)\s*[.!]?\s*", sentence)
        if labelled and len([w for w in re.findall(r"[A-Za-z]{3,}", labelled.group(1).split(":", 1)[1]) if is_english(w)]) < 2:  # "(Majority: 8)": a labelled value set apart, no aside
            sentence, prepared = labelled.group(1), _prepared(labelled.group(1))
        elif _ASIDE.match(sentence) or re.fullmatch(r"\s*\((?:[^()]|\([^()]*\))*\)[.!]?\s*", sentence):
            continue  # "Interestingly, her brother will be 31 ...", "(Banker's rounding would give 2, ...)": not the answer
        missing = re.search(r"\b(?:does\s+not|doesn't)\s+exist\b", prepared, re.I)
        if missing and all(position < missing.start() for position, _ in _candidates(prepared)) and (
                not _candidates(prepared) or re.search(r"\\lim|\blimits?\b", prepared[:missing.start()], re.I)):
            return "\\text{DNE}"  # "..., the limit does not exist.", "$\lim_{x\to 0} \frac{1}{x}$ does not exist since ..."
        if _case_answer(sentence) or _set_words(prepared) or _candidates(prepared) or _word_predicate(prepared) \
                or _REFUSAL.search(sentence):
            value = sentence_value(sentence)
            if value and re.fullmatch(r"(?:.*=)?\s*[-+]?\d[\d.,]*(?:\s*[-+*/×÷]\s*\d[\d.,]*)+\s*", value.replace(CURRENCY, "")
                                      .replace("\\$", "")) and re.search(r"\d\s*[-+*×÷]\s*\d", value.split("=")[-1]) \
                    and not re.fullmatch(r"\s*\d[\d,.]*\s*", value.split("=")[0]):  # ("360 = 2 × 2 × 2 × 3 × 3 × 5" decomposes 360)
                return None  # "Remaining = 27 - 4": a computation the response stops before finishing
            if value is None and len(_candidates(prepared)) > 1 and not _OTHER_CASE.search(sentence) \
                    and not UNSURE.search(sentence):  # "Tom has 12 apples and Jerry has 8": the one asked for,
                return _derivation_end(prepared) or _asked_for(prepared, tail) or _last_clause(prepared)  # else the last
                # clause's ("...; the larger is 11")
            return value
    return None


# A part of a multi-part answer: its label ("(a)", "b)", "(ii)", "Part c:"), or a name in words of any script before a
# colon or `=` ("Mean:", "width ="; not "Step 2:", a step of the working)
_PART_LABEL = re.compile(r"\s*(?:[*_]{1,2})?(?:part\s*)?(?:\(([a-h]|i{1,3}|iv|vi{0,3})\)|([a-h]|i{1,3}|iv|vi{0,3})\))(?:[*_]{1,2})?\s*[:.]?\s*",
                         re.IGNORECASE)
_WORD = r"(?:[A-Za-z]|" + OTHER_SCRIPT_LETTER + r"){2,}"
_NAME_LABEL = re.compile(r"\s*(?:[*_]{1,2})?(?!(?:so|then|thus|hence|and|but|therefore)\b)((?:the\s+)?" + _WORD + r"(?:[\s-]" + _WORD
                         + r"){0,2})(?:[*_]{1,2})?\s*(?::|=(?!=))\s*", re.IGNORECASE)


def _labelled_parts(tail):
    """A conclusion that gives the parts of a multi-part answer: the last lines each opening with a part label in order
    ((a), (b), ... or (i), (ii), ...), or one last line of two or more items "name: value" / "name = value" set apart
    by `;` or `,`; `a = v1, b = v2` (answer_compare reads it as the ordered tuple), else None."""
    lines = [line for line in tail.strip().split("\n") if line.strip()][-8:]
    if lines and len(_PART_LABEL.findall(lines[-1])) > 1:  # "Part (a): 5. Part (b): 11." on one line: its sentences
        lines = lines[:-1] + re.split(r"(?<=[.;])\s+(?=(?:[*_]{1,2})?(?:part\s*)?\(?(?:[a-h]|i{1,3}|iv|vi{0,3})\))", lines[-1], flags=re.I)
    labelled = [(_PART_LABEL.match(line), line) for line in lines]
    k = len(labelled)
    while k > 0 and labelled[k - 1][0]:
        k -= 1
    items = [line[match.end():] for match, line in labelled[k:]]
    names = [(match.group(1) or match.group(2)).lower() for match, _ in labelled[k:]]
    if len(items) < 2 or names != (["i", "ii", "iii", "iv", "v", "vi", "vii", "viii"] if names[0] == "i" else list("abcdefgh"))[:len(names)]:
        last = re.split(r"(?<=[.!?])\s+(?=[A-Z])", re.sub(r"[.!]\s*$", "", lines[-1]))[-1] if lines else ""
        items = re.split(r"\s*;\s*", last)
        if len(items) < 2:
            items = re.split(r"\s*,\s*(?=[^\W\d_][^,=:]{0,30}(?::|=(?!=)))", last)
        named = [_NAME_LABEL.match(item) for item in items]
        if len(items) < 2 or not all(named) or any(re.search(r"\b(?:step|case)\b", m.group(1), re.I) for m in named):
            return None
        items = [item[m.end():] for m, item in zip(named, items)]
    values = [sentence_value(item.strip().rstrip(".")) for item in items]
    if not all(values) or len(values) > 8 or any(re.search(rf"(?<![\w.]){re.escape(v.split('=')[-1].strip())}(?![\w.])",
                                                           item.rsplit("=", 1)[0]) for k, item in enumerate(items)
                                                 for v in values[:k] if "=" in item):
        return None  # (a step that computes with an earlier result is working: "Eggs = 9; money = 9 x 2 = 18")
    values = [v.split("=")[-1].strip() if "=" in v and not re.search(r"[A-Za-z]", v.rsplit("=", 1)[0]) else v for v in values]
    return ", ".join(f"{chr(ord('a') + k)} = {v}" for k, v in enumerate(values))


# A statement that the working went wrong ("But I double counted the corners.", "That's wrong.")
_RETRACTION = re.compile(r"\b(?:double[- ]?counted|over-?counted|under-?counted|miscounted|miscalculated|(?:a|an|my)\s+(?:mistake|error)|"
                         r"(?:that|this|it)(?:'s|\s+is|\s+was)\s+(?:wrong|incorrect|not\s+right)|I\s+forgot|I\s+missed)\b", re.I)
# A last line that holds only a value, perhaps labelled ("Output: 42", "42", "Total: $48"): finished, though unpunctuated
_VALUE_LINE = re.compile(r"\s*(?:[A-Za-z][A-Za-z ]{0,20}:\s*)?[$¤]?-?\d[\d,]*(?:\.\d+)?\s*[A-Za-z%]{0,10}\s*")
# Words that cannot end a sentence (articles, prepositions, conjunctions, pronouns, auxiliaries and modals): a text
# that stops on one was cut off ("... but we still have to remove the")
OPEN_WORD = re.compile(r"(?:the|an?|of|to|in|on|at|by|for|with|from|into|onto|than|as|and|or|but|so|then|if|that|which|"
                        r"is|are|was|were|be|been|being|we|i|you|he|she|it|they|this|these|those|has|have|had|will|would|"
                        r"can|could|must|should|shall|may|might|need|needs|per|every|its|their|our|my|your|his|her|no|"
                        r"plus|minus|because)",
                        re.IGNORECASE)


def _cut_off(line):
    """A line that stops where no sentence can: on a function word, an operator, a comma or an open bracket, or trailing
    off into an ellipsis after words."""
    line = line.rstrip(" *_\t")
    last = re.search(r"([^\W\d_]+)$", line)
    return bool(re.search(r"(?:[-+*/=×÷^,(\[{]|(?<!\d)\s*(?:\.\.\.|…))$", line)) or (last is not None and
                                                                          OPEN_WORD.fullmatch(last.group(1)) is not None)


def _finished(sentence):
    """Does the last sentence of a text end the way a statement ends? With its punctuation or a closed math block, not
    an ellipsis ("we still have to remove ..." trails off); or, unpunctuated, with a value and at most two words after it
    that are not function words: a last line that is an equation or a statement ending in its value ("5 shelves x 4 rows x
    6 books = 120 books", "Total cost = $18") is finished."""
    sentence = sentence.rstrip(" *_\t\n")
    if re.search(r"(?<!\d)\s*(?:\.\.\.|…|\\[lc]?dots)$", sentence):
        return False  # (after digits an ellipsis marks a repeating decimal: "0.333...")
    if re.search(r"(?:[.!?$)\]}。]|\\\])$", sentence) or re.fullmatch(r"\s*[*_]+[^*_]+[*_]+\s*", sentence) \
            or _VALUE_LINE.fullmatch(sentence):
        return True
    if re.match(r"\s*(?:therefore|thus|hence|so|in\s+total|altogether|finally)\b", sentence, re.I) and re.search(r"\d", sentence) \
            and not _cut_off(sentence):
        return True  # "Therefore, Janet makes $18 every day at the farmers' market": a conclusion, unpunctuated
    if "=" in sentence and not re.search(r"[A-Za-z]{3}", sentence) and re.search(r"[\w)\]}′″']$", sentence) \
            or re.search(r"(?:[=*/^]|->|→)\s*[\w.]{1,12}$", sentence):
        return True  # a line of formulas without words, ending on a term: "x = 3 + 4t, y = 6 + 8t", "∠C = 22°30′"
    label = re.match(r"\s*[^\W\d_][^:\n]{0,30}:\s*", sentence)  # "Result: 3 + 7j", "Solutions: x = 3, x = -2": one value
    rest = sentence[label.end():] if label else sentence
    candidates = _candidates(rest)
    if len(candidates) == 1 and not rest[:candidates[0][0]].strip() and not rest[candidates[0][0] + len(candidates[0][1]):].strip():
        return True
    tail = re.search(r"(?:\d|[%)\]}|!°π∞¤\u00b2\u00b3\u00b9\u00bc-\u00be\u2070-\u209f])(?:\s*¤)?((?:\s+[^\s\d=+*/^(\[{,<>-]+){0,2})$",
                     re.sub(r"\s+(?:per|each|a|an)\s+[^\W\d_]+$|\s+each$", "", sentence))  # ("2 bn people per group": a rate)  # (a word of any script: its letters and combining marks, `ตารางหน่วย`, `रुपये`)
    return tail is not None and not OPEN_WORD.fullmatch((tail.group(1).split() or [""])[-1].rstrip(".").lower())
_NOT_VALUE = re.compile(r"\bnot\s+(?:the|a|an)\b", re.I)
# A sentence beside the answer: an aside ("Interestingly, ...", "By the way, ...") or a hypothetical ("If there were 8
# boxes, it would be 56.")
_ASIDE = re.compile(r"\s*(?:(?:interestingly|incidentally|by\s+the\s+way|as\s+a\s+side\s+note|as\s+an\s+aside|fun\s+fact|"
                    r"for\s+comparison|side\s+note|btw|more\s+generally|in\s+general(?=\s*,)|(?:note|notice)\s+that\s+if\b[^.]{0,200}?\b(?:would|might)"
                    r")\b|(?:but\s+|and\s+)?(?:if|had|were)\b[^.]{0,200}?\b(?:would|might)\b)", re.I)  # (a variation on the problem)
# A verification after the answer ("Check: ...", "Verify: ...", "Substituting back: ...")
_CHECK = re.compile(r"(?:^|\n\s*\n|\n|(?<=[.!])\s+)\s*(?:\d+[.)]\s+)?(?:\*\*)?(?:check(?:ing)?|verif(?:y|ication|ying)|sanity\s+check|"
                    r"double[-\s]check|substituting\s+back|plugging\s+(?:back|in)|let'?s\s+(?:double[-\s])?(?:check|verify)|"
                    r"let\s+(?:me|us)\s+(?:quickly\s+)?(?:double[-\s])?(?:check|verify))\b", re.I)
# A line that concludes (after a verification: "5. Therefore, she has 12 apples left.", "The number of students who play
# both is 4.")
_CONCLUDING_LINE = re.compile(r"\n[ \t]*(?:\d+[.)][ \t]+)?(?:\*\*)?(?:(?:therefore|thus|hence|so|in\s+total|finally|in\s+conclusion)\b|"
                              r"(?:the\s+)?(?:final\s+)?answer\b|the\s+[^\n=]{3,80}?\s+(?:is|are|was|were)\s+[$¤]?-?\d[^\n]*$)",
                              re.IGNORECASE | re.MULTILINE)
STOP_WORDS = set("""the and that this with from have has had for are was were what which how many much does did find
their there they them into than then each other when where will would should could your its also some more most
asked determine compute calculate value number total""".split())


def _last_clause(sentence):
    """The value of a sentence's last clause when it is a statement of its own ("...; the larger is 11")."""
    last = re.split(r"[;]\s*|(?:,\s*|\s+)and\s+(?=(?:the|its|their|his|her)\b)|,\s*(?=(?:the|its|their|his|her)\b)", sentence)[-1]
    return _one_candidate(last) if last != sentence and re.search(r"\b(?:is|are|was|were)\b", last) else None


def _asked_for(sentence, text):
    """Of a conclusion that states several quantities, the one the restated question asks for: the clause sharing a
    word with the question ("How many apples does Jerry have? ... Tom has 12 apples and Jerry has 8 apples" -> 8)."""
    question = re.search(r"(?:^|[.!?]\s+|\n)([^.!?\n]{5,200}\?|(?:find|determine|compute|we\s+are\s+asked\s+for|we\s+need|we\s+want)\b"
                         r"[^.!?\n]{3,200})",
                         text, re.I)
    return clause_for(sentence, question.group(1)) if question else None


def clause_for(sentence, asked):
    """The value of the one clause of `sentence` (parts set apart by commas, "and", "while", "whereas", "where") that
    shares the most words with `asked` (a question), else None."""
    def stems(text):
        return {w.lower().rstrip("s") for w in re.findall(r"[A-Za-z]{3,}", text)} - STOP_WORDS
    words = stems(asked)
    masked = MATH_SEGMENT.sub(lambda m: "\x01" * len(m.group(0)), sentence)  # (never split inside math: `$C(2,-5)$`)
    cuts = [(0, 0)] + [(m.start(), m.end()) for m in re.finditer(r"[,;]\s*(?:and\s+|while\s+|whereas\s+|where\s+)?|\s+(?:and|while|"
                                                                 r"whereas)\s+", masked)] + [(len(sentence), len(sentence))]
    clauses = [c for c in (sentence[a[1]:b[0]] for a, b in zip(cuts, cuts[1:])) if len(_candidates(c)) == 1]
    scores = [len(words & stems(c)) for c in clauses]
    best = [c for c, k in zip(clauses, scores) if k == max(scores, default=0) and k > 0]
    return _one_candidate(best[0]) if len(best) == 1 else None


def final_statement(text):
    """The last sentence of a text that states a value (made ready as sentence_value reads it), else None."""
    sentences = [x for x in re.split(r"\n\s*\n|\n(?=\S)|(?<=[.!?])\s+(?=[A-Z(])", _strip_currency(text.strip()[-2000:])) if x.strip()]
    for sentence in reversed(sentences[-3:]):
        prepared = _prepared(words_as_values(sentence))
        if _candidates(prepared) and not _candidates(_without_rejected_values(prepared)):
            continue  # "Be careful: the trap answer is 5.": the value before it is the statement
        if _candidates(prepared):
            return prepared
    return None


_DECREASE = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*(?:\\?%|percent)\s+(?:decrease|drop|decline|reduction|loss|fall)\b|\b(?:decreased|dropped|"
                       r"declined|fell|shrank|lost|reduced)\s+by\s+(\d+(?:\.\d+)?)\s*(?:\\?%|percent)", re.I)


def signed_decrease(text):
    """A percent change the conclusion states as a decrease ("i.e. a 25% decrease", "fell by 25%") as the signed
    change `-25\\%` (it equals a gold -25%; the bare 25% is read as written), when it is the statement's only percent;
    else None."""
    if not _DECREASE.search((text or "")[-2000:]):
        return None
    statement = final_statement(text or "") or ""
    found = _DECREASE.findall(statement)
    return f"-{found[-1][0] or found[-1][1]}\\%" if len(found) == 1 and len(re.findall(r"%|percent", statement)) == 1 else None


# What keeps a sentence from asserting its statement: a question, a task or a check still to do, a supposition, a
# condition, a contrast, an alternative, a bound, a negation, someone else's words or a belief
_UNASSERTED = re.compile(r"\?|\b(?:but|if|or|unless|whether|would|could|might|maybe|perhaps|than|at\s+(?:least|most)|up\s+to|over|"
                         r"under|not|never|no|none|false|wrong|suppose|supposing|assume|assuming|let'?s|need|needs|must|should|will|"
                         r"going\s+to|check|verify|prove|show|decide|determine|test|claim(?:s|ed)?|says?|said|wrote|writes?|"
                         r"think|thought|believe[sd]?|according|initially|earlier|first\s+glance|looks?|seems?|"
                         r"one\s+might|many|some\s+people|students?)\b|n't\b|'ll\b", re.I)


def asserted(sentence):
    """Does a sentence assert what it states (see _UNASSERTED; nor a doubt, a task or a retraction)?"""
    return not (_UNASSERTED.search(sentence) or UNSURE.search(sentence) or _TASK.match(sentence) or _RETRACTION.search(sentence))


def settled_statement(text):
    """final_statement, when the response settles on it: it is the text's last sentence, the text ends as a statement
    ends, and the sentence asserts it (asserted); else None."""
    statement = final_statement(text or "")
    last = [x for x in re.split(r"(?<=[.!?])\s+|\n+", (text or "").strip()) if x.strip()]
    if statement is None or not last or not _finished(last[-1]) or not asserted(last[-1]) or not asserted(statement) \
            or len(candidates(_prepared(words_as_values(last[-1])))) == 0:
        return None
    return statement


def candidates(sentence):
    """The values a sentence states, in order (see _candidates): [(position, text)]."""
    return list(_candidates(sentence))


# A sentence that sets the task rather than answering it: a question, or "We need to find ...", "Let's compute ..."
_TASK = re.compile(r"\s*(?:(?:but|and|now|next|however|then|so|first)\b[,\s]*)*(?:" + _PENDING + r"|we\s+are\s+asked\s+to|"
                   r"we\s+are\s+(?:told|given)\b|the\s+(?:problem|question)\s+"
                   r"(?:says|states|tells\s+us|gives)\b|let'?s|let\s+us|I\s+(?:need|want)\s+to|(?:now\s+)?(?:find|"
                   r"compute|calculate|determine|evaluate|simplify|solve|what|how|which)\b)", re.IGNORECASE)
