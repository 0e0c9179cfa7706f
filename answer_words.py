"""Values written in words in a sentence of prose, made into the values they are (answer_value.py reads a sentence's
value after these rewrites).

Entry point: words_as_values(sentence): a sign word before a number ("negative five" -> -5), Roman numerals, "or" and
"and" of other languages between assignments, times said or written in any style ("half past nine", "7:15 A.M.",
"19h05", "7 in the evening", noon, midnight) and dates, a weekday that ends a sentence, a quantity in a larger and a
smaller unit ("1 h 30 min"), positions below zero, sets and infinity in words ("the empty set", "there are no
solutions", "all real x except x = 2", "negative infinity"), a variable bounded in words ("x is greater than 3",
"p lies strictly between 0 and 1"). Also MATH_SEGMENT (a math segment of prose: $...$, $$...$$, \\(...\\), \\[...\\])
and outside_math(sentence, change), which rewrites only the prose around them.
"""
import re

from latex import DATE_WORDS, compound_units
from numerals import NUMBER_WORDS, number_words, roman_value

MATH_SEGMENT = re.compile(r"\$\$(.+?)\$\$|\\\[(.+?)\\\]|\\\((.+?)\\\)|\$(.+?)\$", re.DOTALL)


def outside_math(sentence, change):
    """change(text) applied to the parts of a sentence outside its math segments ($...$, \\(...\\), ...)."""
    out, last = [], 0
    for segment in MATH_SEGMENT.finditer(sentence):
        out += [change(sentence[last:segment.start()]), segment.group(0)]
        last = segment.end()
    return "".join(out) + change(sentence[last:])


def words_as_values(sentence):
    """Values written as words that models use for them: a sign word before a number ("negative five" -> -5, "minus
    2" -> -2; not "x minus 2"), times ("10:30 a.m.", "7 o'clock" -> 7:00), infinity, the empty set."""
    sign = r"(?:(?<=^)|(?<=[\s(,:]))(?<!\b[A-Za-z]\s)(?<![\d)}]\s)(?:negative|minus)\s+"
    sentence = re.sub(sign + r"(" + NUMBER_WORDS.pattern + r")", lambda m: "-" + number_words(re.match(r"(?s).*", m.group(1))),
                      sentence, flags=re.I)
    sentence = re.sub(sign + r"(?=\d)", "-", sentence, flags=re.I)
    if re.search(r"(?<![A-Za-z])[IVXLCDM]{2,}(?![A-Za-z])", sentence):  # a Roman numeral (numerals.roman_value) is a value: MCMXCIV
        sentence = outside_math(sentence, lambda t: re.sub(r"(?<![A-Za-z$\\])[IVXLCDM]{2,}(?![A-Za-z$])", lambda m: f"$\\mathrm{{{m.group(0)}}}$"
                                                            if roman_value(m.group(0)) else m.group(0), t))
    sentence = re.sub(r"(?<=[\d$])\s+(?:(или|oder|ou|o|或者|或)|(и|und|et|y|e|和))\s+(?=\$?[A-Za-z]\s*=)",
                      lambda m: " or " if m.group(1) else " and ", sentence)  # x = 5 или x = -1: "or", "and" of other languages
    sentence = outside_math(sentence, _clock_words)
    sentence = outside_math(sentence, lambda t: _WEEKDAY_ENDING.sub(lambda m: f"{m.group(1)}$\\text{{{m.group(2)}}}$", t))  # "→ Fri"
    if re.search(r"\d\s*[A-Za-z]+\.?,?\s*(?:and\s+)?\d", sentence):
        sentence = outside_math(sentence, lambda t: _COMPOUND.sub(lambda m: f"$\\text{{{m.group(1)} {m.group(2)} {m.group(3)} "
                                                                   f"{m.group(4)}}}$" if compound_units(m.group(2), m.group(4))
                                                                   else m.group(0), t))  # "1 h 30 min"
    sentence = re.sub(r"(?<![\w.-])(\d+(?:\.\d+)?)((?:\s*[^\W\d_]+){0,2}?)\s+below\s+(?:zero|sea\s+level|freezing|ground)\b", r"-\1\2",
                      sentence, flags=re.I)  # "7 degrees below zero" -> -7 degrees: a position under the zero of its scale
    sentence = re.sub(r"\b(\d{1,2})\s*o'?clock\b", r"\1:00", sentence, flags=re.I)
    sentence = outside_math(sentence, _set_values) if re.search(r"[∞∅ℝ{]|infinit|empty|solution|real", sentence, re.I) else sentence
    sentence = _BETWEEN_WORDS.sub(lambda m: f"${m.group(2)} < {m.group(1)} < {m.group(3)}$", sentence)
    sentence = _BOUND_WORDS.sub(lambda m: f"${m.group(1)} {_bound_sign(m.group(2))} {m.group(3)}$", sentence)
    return sentence


# Sets and infinity in prose as the values they are: the empty set (∅, `{ }`, "the empty set", "there are no solutions",
# "the equation has no solution"), the reals ("x ∈ ℝ"; "all real x except x = 2 and x = -2" is R \ {2, -2}), infinitely
# many ("∞ many"), infinity (∞, +∞, "negative infinity")
_EXCEPT = re.compile(r"\b(?:all|every|any)\s+real\s+(?:numbers?\s+|values?\s+)?(?:[a-z]\s+)?(?:except|other\s+than|but)\s+(?:for\s+)?"
                     r"((?:\s*(?:,|and|or|[a-z]\s*=|±|\\pm|-?\d+(?:\.\d+)?))+)", re.I)


def _set_values(text):
    text = re.sub(r"(?:(?<=\s)|^)\+?\s*∞\s+many\b", "infinitely many", text)
    text = re.sub(r"(?<![\w\\])([+-])?\s*∞", lambda m: "$-\\infty$" if m.group(1) == "-" else "$\\infty$", text)
    text = re.sub(r"(?<![\w$\\])(?:(negative|minus)\s+|(?:positive\s+|plus\s+)?)infinity\b",
                  lambda m: "$-\\infty$" if m.group(1) else "$\\infty$", text, flags=re.I)
    text = re.sub(r"(?<!\{)\binfinitely\s+many\b(?:\s+(?:solutions?|values?|roots?|ways?|points?))?", r"$\\text{infinitely many}$",
                  text, flags=re.I)
    text = re.sub(r"(?:\b(?:the\s+)?empty\s+set\b|∅)(?:\s*\{\s*\}|\s*∅)?|(?<=set\s)\{\s*\}", r"$\\emptyset$", text, flags=re.I)
    text = re.sub(r"\b(?:there\s+(?:is|are|exists?)|(?:it|(?:the\s+)?(?:equation|system|inequality)(?:\s+\w+)?)\s+has)\s+no\s+(?:real\s+)?"
                  r"solutions?\b", r"the solution set is $\\emptyset$", text, flags=re.I)
    text = re.sub(r"(?<![\w$\\])([a-z])\s*∈\s*ℝ", r"$\1 \\in \\mathbb{R}$", text)
    excepted = _EXCEPT.search(text)
    if excepted:  # "all real x except x = 2 and x = -2": the reals without those points
        values = re.findall(r"(±|\\pm)?\s*(-?\d+(?:\.\d+)?)", excepted.group(1))
        points = [v for sign, number in values for v in ([number, f"-{number}"] if sign else [number])]
        text = text[:excepted.start()] + f"$\\mathbb{{R}} \\setminus \\{{{', '.join(points)}\\}}$" + text[excepted.end():]
    return text


# A weekday that ends a sentence after a colon, an arrow or a copula is its value ("6 days after Wednesday: Tue", "→ **Fri**",
# "it's also a Sun."); elsewhere a weekday names a time, not an answer ("On Monday she sold 5")
_WEEKDAY_ENDING = re.compile(r"((?:[:→]|->|=>|\b(?:is|be|was|'s|on|a|an)\b)\s*(?:(?:also|still|then|again)\s+)?(?:an?\s+)?[*_]*)"
                             r"((?:mon|tue|tues|wed|thu|thur|thurs|fri|sat|sun)(?:day)?)\b\.?[*_]*(?=\s*[.!]?\s*$)", re.IGNORECASE)
# Two quantities of one kind in a larger and a smaller unit are one value: "1 h 30 min", "2 hours and 24 minutes", "5 ft 3 in"
_COMPOUND = re.compile(r"(?<![\w.])(\d+(?:\.\d+)?)\s*([A-Za-z]+)\.?,?\s*(?:and\s+)?(\d+(?:\.\d+)?)\s*([A-Za-z]+)\b\.?")


_DAYPART = {"morning": "am", "afternoon": "pm", "evening": "pm", "night": "pm"}


# A time said in words: "half past nine", "quarter to ten", "seven o'clock", "half past midnight" (the hour in digits or
# words; then "in the morning" and a.m./p.m. read as with digits)
_HOURS = {w: k for k, w in enumerate("one two three four five six seven eight nine ten eleven twelve".split(), 1)}
_SPOKEN_TIME = re.compile(r"\b(?:(half|quarter)\s+(past|after|to|before)\s+)?(" + "|".join(_HOURS) + r"|1[0-2]|[1-9]|noon|midnight)"
                          r"(\s+o'?clock)?\b", re.IGNORECASE)
# A date written in numbers, with its year: ISO 2024-04-04, day or month first 14/02/2023, 2/27/2024 (answer_compare reads
# the order: the first number is the month unless it cannot be one)
_NUMERIC_DATE = re.compile(r"(?<![\d/.$-])(?:\d{4}-\d{1,2}-\d{1,2}|\d{1,2}/\d{1,2}/\d{4})(?![\d/-])")


def _spoken_time(match):
    part, direction, hour, oclock = match.groups()
    if not part and not oclock:
        return match.group(0)
    named = hour.lower()
    hours = 12 if named in ("noon", "midnight") else _HOURS.get(named) or int(hour)
    minutes = {"half": 30, "quarter": 15}.get((part or "").lower(), 0)
    if direction and direction.lower() in ("to", "before"):
        hours, minutes = (hours - 2) % 12 + 1, 60 - minutes
    suffix = " \\text{ am}" if named == "midnight" else " \\text{ pm}" if named == "noon" else ""
    return f"${hours}:{minutes:02d}{suffix}$" if suffix else f"{hours}:{minutes:02d}"


def _clock_words(sentence):
    """Times as `H:MM am`: "7:15 A.M." and "7:15AM" -> `7:15 am`, "7 in the evening" -> `7 pm`; "noon" and "midnight"
    (in a sentence with no number in digits) -> `12:00 pm`, `12:00 am`."""
    sentence = re.sub(r"(?<![\w:.])(\d{1,2})h(\d{2})\b", r"\1:\2", sentence)  # 19h05
    sentence = re.sub(r"(?<![\w:.])(\d{1,2})\.(\d{2})(?=\s*[apAP]\.?\s?[mM]\b)", r"\1:\2", sentence)  # 7.15 p.m.
    if re.search(r"\b[A-Z][a-z]{2,8}\.?\s+\d|\d\s+[A-Z][a-z]{2,8}\b", sentence):  # "March 14", "14 March 2025": a date
        sentence = DATE_WORDS.sub(lambda m: f"$\\text{{{m.group(0)}}}$", sentence)
    sentence = _SPOKEN_TIME.sub(_spoken_time, sentence) if re.search(r"o'?clock|half|quarter", sentence, re.I) else sentence
    sentence = _NUMERIC_DATE.sub(lambda m: f"$\\text{{{m.group(0)}}}$", sentence)  # 2024-04-04, 14/02/2023, 2/27/2024
    sentence = re.sub(r"(?<![\w:.$])(\d{1,2}(?::\d{2})?)\s*([ap])\.?\s?m\b\.?(?=\W|$)",
                      lambda m: f"${m.group(1)} \\text{{ {m.group(2).lower()}m}}$", sentence, flags=re.I)
    sentence = re.sub(r"(?<![\w:.$])(\d{1,2}(?::\d{2})?)(?:\s*o'?clock)?\s+(?:in\s+the\s+(morning|afternoon|evening)|at\s+(night))\b",
                      lambda m: f"${m.group(1)} \\text{{ {_DAYPART[(m.group(2) or m.group(3)).lower()]}}}$", sentence, flags=re.I)
    if re.search(r"\b(?:noon|midday|midnight)\b", sentence, re.I) and not re.search(r"\d", re.sub(r"\b12\b", "", sentence)):
        sentence = re.sub(r"(?:\b12\s*)?\b(noon|midday|midnight)\b", lambda m: "$12:00 \\text{ am}$" if m.group(1).lower() ==
                          "midnight" else "$12:00 \\text{ pm}$", sentence, flags=re.I)
    return sentence


# A variable bounded in words: "x is greater than 3" -> x > 3, "k must be at least 2" -> k \ge 2, "p lies strictly between
# 0 and 1" -> 0 < p < 1 (the bound words are attached to the variable, so they state an inequality, not a hedge)
_VERB = r"\s+(?:is|must\s+be|can\s+be|should\s+be|has\s+to\s+be|lies|needs\s+to\s+be)\s+(?:strictly\s+)?"
_NUM = r"\$?\s*(-?\d+(?:\.\d+)?)\s*\$?"
_BETWEEN_WORDS = re.compile(r"\$?\b([a-z])\$?" + _VERB + r"between\s+" + _NUM + r"\s+and\s+" + _NUM)
_BOUND_WORDS = re.compile(r"\$?\b([a-z])\$?" + _VERB + r"((?:greater|more|larger|less|smaller)\s+than(?:\s+or\s+equal\s+to)?|"
                          r"at\s+(?:least|most)|no\s+(?:more|less)\s+than)\s+" + _NUM, re.IGNORECASE)


def _bound_sign(words):
    """The relation that bound words state: "greater than" >, "at most" <=, "no less than" >=, ..."""
    words = words.lower().split()
    upper = any(w in ("less", "smaller", "most") for w in words)
    if words[0] == "no":
        return "\\le" if not upper else "\\ge"  # no more than 5: <= 5
    return ("\\le" if upper else "\\ge") if "equal" in words or words[0] == "at" else ("<" if upper else ">")
