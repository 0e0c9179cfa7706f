"""Stage 2 of the grader: reduce the span a response commits to (answer_span.py) to ONE value, or to no answer.

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

"""
import re

from answer_compare import COPULA, CASE_WORD, parse_cases, split_unit, unit_key, unit_word
from latex import DENOMINATORS, FRACTION_WORDS, NUMBER_WORDS, ROUNDING_NOTE, clean, number_words

_CUT_WORDS = re.compile(r"\s(?:because|since|which|where|so|as|when|given|for|if|but|hence|thus|therefore)\b", re.I)


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
            if not word or not (word.group(1) == "/" or unit_word(word.group(1).split("^")[0])):
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
    sentence = NUMBER_WORDS.sub(lambda m: m.group(0) if re.search(r"\b(?:the|this|that|each|every|any|no|which)\s+$",
                                                                     sentence[:m.start()], re.I) and m.group(0).lower() == "one"
                                 else number_words(m), sentence)
    return FRACTION_WORDS.sub(lambda m: f"$\\frac{{{m.group(1) or 1}}}{{{DENOMINATORS[m.group(2).lower()]}}}$", sentence)


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
    if not CASE_WORD.search(sentence) or _UNSURE.search(sentence) or len(sentence) > 400:
        return None
    starts = [0] + [m.end() for m in re.finditer(r"\b(?:is|equals|are|be|gives|i\.e\.,?|namely)\s+|:\s+", sentence)]
    for start in starts:
        tail = sentence[start:].strip().rstrip(".").strip()
        if tail and parse_cases(clean(tail) or ""):
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
            and not re.search(NUMBER_WORDS.pattern + "|" + FRACTION_WORDS.pattern, sentences[-1], re.I):
        return _word_predicate(sentences[-1])  # "The function is even.": a word answer (it equals only a word gold)
    if len(sentences) > 1 and all(re.match(r"\s*(?:if|when)\b", x, re.I) for x in sentences[-2:]):
        return _case_answer(sentences[-2] + " " + sentences[-1])  # "If n is even, f(n) = 5. If n is odd, f(n) = 6."
    for sentence in reversed(sentences[-3:]):
        sentence = re.sub(r"^\s*(?:\d+[.)]|[-*])\s+", "", sentence)  # list markers: "3) $1375 on all ads"
        # the conclusion is the clause after a last "so"/"hence", and it ends where a justification starts
        sentence = re.split(r"[,;]\s+(?:and\s+)?(?:so|hence|therefore|thus)\s+", sentence)[-1]
        by_cases = _case_answer(sentence)
        if by_cases:
            return by_cases  # "It equals 0 for even n and 1 for odd n.": an answer by cases (see parse_cases)
        sentence = _wrap_raw_math(ROUNDING_NOTE.sub(" ", sentence))  # "(to 3 s.f.)" says how the value is rounded
        if re.search(r"\bratio\b", sentence, re.I):  # "the ratio of boys to girls is 1 to 2": 1:2
            sentence = re.sub(r"(?<![\w.])(\d+)\s+to\s+(\d+)(?!\w|\.\d)", r"$\1:\2$", sentence)
        if not _candidates(sentence) and re.search(NUMBER_WORDS.pattern + "|" + FRACTION_WORDS.pattern, sentence, re.I):
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
    if COPULA.match(sentence) and re.fullmatch(r"[A-Za-z\s-]{1,30}", COPULA.sub("", sentence, count=1)):
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
    if unit and unit_key(unit.group(1)) and sentence[position] != "$":
        return f"{value.strip()} {unit.group(1)}"  # "the angle is 60 degrees": the unit is part of the answer
    return value.strip()

