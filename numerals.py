"""How numbers are written, read through the Unicode database and the grammar of each numeral system (below latex.py).

Entry points (each takes text and returns text, numbers rewritten as ASCII numerals or LaTeX fractions):
  plain_unicode(text): the digits, separators, signs and punctuation of any script as ASCII: decimal digits of any script
    (category Nd), decimal and thousands separators, percent signs, dashes that are minus signs, sentence and clause
    punctuation, full-width forms; numeric characters by their value (vulgar fractions `⅜`, `²⁄₄`, Roman numeral signs
    `Ⅻ` as `XII`); quotation marks of any script as `"`.
  number_conventions(text, decimal_comma): digit groups (`1.234.567`, `32 768`, `1'234'567`) and, in a text that
    writes decimal commas, `0,875` and `1.562,50`; decimal_comma_text(text) decides that from the whole text.
  cjk_numbers(text): Chinese and Japanese numerals by their positional grammar (`三千五百`, `二十四`, `三分之二`, `三点五`).
  roman_value(word): the value of a Roman numeral written by the strict grammar (`MCMXCIV` 1994), else None.
  degrees_minutes_seconds(text) (`22°30′` -> `22.5°`); base_numerals(text) (`0xFF`, `1000 (base 2)` -> `FF_{16}`, `1000_{2}`).
  number_words / NUMBER_WORDS, scaled_numbers, FRACTION_WORDS / DENOMINATORS: numbers in English words and scale
    words ("two hundred ninety-four", "4 million", "3 lakh", "two dozen", "a quarter million").
  repeating_decimals(text): repeat marks as exact fractions (`0.\\overline{3}`, `0.(3)`, `0.\\dot{3}`, `0.333...`).
  accounting_negatives(text): an amount in parentheses written for a negative one (`$(100)`, `($3,500)`, `(70.00)`,
    `41 - 48 = (7)`) as `-100`, `-3,500`, ...
  GROUPED_DIGITS, DIGIT_MARKS: the grammar of digit groups (1,234,567; the Indian 12,34,567; 1'234'567).
"""
import ast
import operator
import re
import unicodedata
from fractions import Fraction
from functools import lru_cache

# Characters of any script read through the Unicode database (never a table per script): a decimal digit (category
# Nd: Arabic-Indic ٤٢, Persian ۴۲, Devanagari ४२, full-width ４２, bold 𝟒𝟐) is its ASCII digit; a decimal or thousands
# separator (Arabic ٫ ٬) and a percent sign (٪) are `.`, `,` and `%`; a hyphen or a minus sign of any form (‐ ‑ ‒ − ﹣
# ➖; not the dashes of prose, – —) is `-`; punctuation that ends a sentence or a clause (。 ۔ । ， 、 ： ； ？ ！) is its
# ASCII mark and a space; other full-width forms (＝ ＋ （ ．) are their ASCII form; quotation marks of any script (« »
# “ ” „ and the CJK brackets 「」【】《》, but not ‘ ’, which are also apostrophes) are `"`; a numeric character (categories
# No, Nl) is its value: a vulgar fraction (½ ⅜, whose compatibility form is `3⁄8`) `\frac{3}{8}`, a Roman numeral
# sign (Ⅻ) its letters XII (superscripts and subscripts are powers and indices: latex.py; a circled number ④ labels an
# option); format characters (direction marks, zero-width joiners) and emoji variation
# selectors are dropped; narrow spaces (figure, punctuation, hair) are thin spaces, which set digit groups apart.
_PUNCTUATION_NAMES = (("QUESTION MARK", "? "), ("EXCLAMATION MARK", "! "), ("SEMICOLON", "; "), ("COLON", ": "),
                      ("COMMA", ", "), ("FULL STOP", ". "), ("DANDA", ". "))
_MINUS_NAME = re.compile(r"^(?:(?:SMALL |FULLWIDTH )?HYPHEN-MINUS|(?:NON-BREAKING |ARMENIAN )?HYPHEN|FIGURE DASH|(?:HEAVY )?MINUS SIGN)$")
_PLAIN = {}


def _numeric_char(ch, category, name):
    """A numeric character (No, Nl) as ASCII (see above), or None."""
    if category not in ("No", "Nl") or re.search(r"SUPERSCRIPT|SUBSCRIPT|IDEOGRAPHIC|CJK", name):
        return None
    compatible = unicodedata.normalize("NFKC", ch)
    fraction = re.fullmatch(r"(\d+)\u2044(\d+)", compatible)
    if fraction:
        return f"\\frac{{{fraction.group(1)}}}{{{fraction.group(2)}}}"
    if "ROMAN NUMERAL" in name and compatible.isalpha():
        return compatible
    return None  # (a circled or parenthesized number ④ ⑴ labels an option or a step: it is no value)


def _plain_char(ch):
    """What one non-ASCII character reads as (see above); the character itself when it stays."""
    category, name = unicodedata.category(ch), unicodedata.name(ch, "")
    wide = unicodedata.decomposition(ch).startswith(("<wide>", "<narrow>"))
    if category == "Nd":
        return str(unicodedata.decimal(ch))
    numeric = _numeric_char(ch, category, name)
    if numeric is not None:
        return numeric
    if category == "Cf" or "VARIATION SELECTOR" in name:
        return ""
    if "DECIMAL SEPARATOR" in name:
        return "."
    if "THOUSANDS SEPARATOR" in name:
        return ","
    if name.endswith("PERCENT SIGN"):
        return "%"
    if category == "Sc":
        return "¤"  # a currency sign (€, £, ₹, ¥) is no part of the value, as a dollar sign (answer_value.CURRENCY)
    if category in ("Pd", "Sm", "So") and _MINUS_NAME.search(name):
        return "-"
    if category in ("Pi", "Pf") and "SINGLE" not in name or "QUOTATION MARK" in name and "SINGLE" not in name \
            or category in ("Ps", "Pe") and 0x3000 <= ord(ch) <= 0x303F:
        return '"'
    if category == "Po" and not (wide and "FULL STOP" in name):  # (a full-width full stop is a decimal point: ３．５)
        marks = [mark for word, mark in _PUNCTUATION_NAMES if word in name]
        if marks:
            return marks[0]
    if wide or category in ("Ps", "Pe") and 0xFF00 <= ord(ch) <= 0xFFEF:
        return unicodedata.normalize("NFKC", ch)
    if category == "Zs" and ch not in "\u00a0\u202f\u2009":
        return "\u2009" if re.search(r"FIGURE|PUNCTUATION|HAIR|THIN|SIX-PER-EM", name) else " "
    return ch


def plain_unicode(text):
    """`text` with the digits, separators and punctuation of any script as ASCII (see above); a fraction written with
    a fraction slash between superscript and subscript digits (`⁵⁄₄`) or digits (`1⁄3`) is `\\frac{5}{4}`."""
    if text.isascii():
        return text
    if "，" in text:  # a full-width comma between digit groups is a thousands separator: １，２５０
        text = re.sub(r"(?<=\d)，(?=\d{3}(?!\d))", ",", text)
    if "\u2044" in text or "\u2215" in text:
        text = re.sub(r"([⁰¹²³⁴⁵⁶⁷⁸⁹]+|\d+)\s*[\u2044\u2215]\s*([₀₁₂₃₄₅₆₇₈₉]+|\d+)", lambda m: "\\frac{" + m.group(1).translate(
            _SMALL_DIGITS) + "}{" + m.group(2).translate(_SMALL_DIGITS) + "}", text).replace("\u2044", "/").replace("\u2215", "/")
    for ch in set(re.findall(r"[^\x00-\x7f]", text)):
        if ord(ch) not in _PLAIN:
            _PLAIN[ord(ch)] = _plain_char(ch)
    return text.translate(_PLAIN)


_SMALL_DIGITS = str.maketrans("⁰¹²³⁴⁵⁶⁷⁸⁹₀₁₂₃₄₅₆₇₈₉", "01234567890123456789")


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
# Scale words multiply what comes before them: "two dozen" 24, "3 lakh" 300000 (lakh 10^5 and crore 10^7: the Indian
# system), "a million", "a quarter million" 250000, "half a dozen" 6, "two and a half billion"
_SCALES = {"hundred": 100, "thousand": 1000, "million": 10**6, "billion": 10**9, "trillion": 10**12, "dozen": 12,
           "lakh": 10**5, "lakhs": 10**5, "crore": 10**7, "crores": 10**7}
_SCALE_WORD = "|".join(sorted(_SCALES, key=len, reverse=True))
NUMBER_WORD = "|".join(sorted(list(_SMALL_NUMBERS) + list(_TENS) + list(_SCALES), key=len, reverse=True))
NUMBER_WORDS = re.compile(rf"\b(?:an?\s+(?=(?:{_SCALE_WORD})\b))?(?:{NUMBER_WORD})(?:(?:\s+and\s+|[\s-]+)(?:{NUMBER_WORD}))*\b",
                          re.IGNORECASE)
_PARTS = {"half": Fraction(1, 2), "quarter": Fraction(1, 4), "third": Fraction(1, 3), "quarters": Fraction(1, 4),
          "thirds": Fraction(1, 3)}
_PART_OF_SCALE = re.compile(rf"\b(?:(\d+|{'|'.join(_SMALL_NUMBERS)})\s+and\s+)?(?:(an?|one|two|three)[\s-]+)?(half|quarters?|thirds?)"
                            rf"\s+(?:of\s+)?(?:an?\s+)?({_SCALE_WORD})\b", re.IGNORECASE)


def number_words(match):
    """'two hundred ninety-four' -> '294' (answers written in words); an ungrammatical run ('five five') is left
    as it is, and so fails to compare."""
    total, current, last = 0, 0, None
    for word in re.split(r"[\s-]+", match.group(0).lower()):
        if word == "and":
            continue
        if word in ("a", "an"):  # "a million", "a dozen"
            word = "one"
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


def _part_of_scale(match):
    """"a quarter million" -> 250000, "half a dozen" -> 6, "two and a half million" -> 2500000; a part that is no whole
    number ("a third of a million") stays as written."""
    whole, count, part, scale = match.groups()
    whole = Fraction(_SMALL_NUMBERS[whole.lower()] if whole.lower() in _SMALL_NUMBERS else int(whole)) if whole else 0
    count = {"two": 2, "three": 3}.get((count or "").lower(), 1)
    if part.lower() == "half" and count != 1:
        return match.group(0)
    number = (whole + count * _PARTS[part.lower()]) * _SCALES[scale.lower()]
    return str(number.numerator) if number.denominator == 1 else match.group(0)


_SCALED = re.compile(rf"(?<![\w.,])(\d{{1,3}}(?:,\d{{3}})*(?:\.\d+)?|\d+(?:\.\d+)?)\s*(\\text\s*\{{\s*)?({_SCALE_WORD})\b(?(2)\s*\}})",
                     re.IGNORECASE)


def scaled_numbers(s):
    """Numbers with a scale word: "4 million" -> 4000000, "2.5 billion" -> 2500000000, "3 lakh" -> 300000, "2 dozen" -> 24
    (exact; a fraction of a unit stays a decimal: "1.25 thousand" -> 1250); "a quarter million" -> 250000."""
    def value(match):
        number = Fraction(match.group(1).replace(",", "")) * _SCALES[match.group(3).lower()]
        return str(number.numerator) if number.denominator == 1 else str(float(number))
    s = _PART_OF_SCALE.sub(_part_of_scale, s) if re.search(r"\b(?:half|quarter|third)", s, re.I) else s
    if re.search(r"\bgross\b", s, re.I):  # "a gross" is 144 (only with a count: "gross income" is no number)
        s = re.sub(rf"\b(an?|one|two|three|four|five|\d+)\s+gross\b", lambda m: str(144 * (_SMALL_NUMBERS.get(m.group(1).lower())
                   or (int(m.group(1)) if m.group(1).isdigit() else 1))), s, flags=re.I)
    return _SCALED.sub(value, s)


def repeating_decimals(s, wrap=""):
    """Repeating decimals as exact fractions, put between `wrap` marks (`$` in prose): a period marked by `\\overline{}`
    (`0.\\overline{285714}`), by dots (`0.\\dot{3}`, `0.\\dot{2}8571\\dot{4}`), by combining overlines (`0.2̅8̅5̅7̅1̅4̅`),
    in parentheses (`0.(3)`), or repeated before an ellipsis (`0.333...`, `1.2666\\ldots`). A decimal that trails off
    into an ellipsis without a period shown twice is a truncated expansion, `0.285714\\ldots` (answer_compare)."""
    if "\\overline" in s:
        s = re.sub(r"(?<![\d.])(\d*)\.(\d*)\s*\\overline\s*\{(\d+)\}", lambda m: wrap + _repeating_decimal(m) + wrap, s)
    if "\\dot" in s:
        s = re.sub(r"(?<![\d.])(\d*)\.(\d*?)\\dot\s*\{?(\d)\}?(?:(\d*)\\dot\s*\{?(\d)\}?)?",
                   lambda m: wrap + _repeating_decimal(re.match(r"(.*)\|(.*)\|(.*)", f"{m.group(1)}|{m.group(2)}|"
                                                                 f"{m.group(3)}{(m.group(4) or '') + m.group(5) if m.group(5) else ''}"))
                   + wrap, s)
    if "\u0305" in s or "\u0304" in s:
        s = re.sub(r"(?<![\d.])(\d*)\.(\d*?)((?:\d[\u0304\u0305])+)", lambda m: wrap + _repeating_decimal(re.match(
            r"(.*)\|(.*)\|(.*)", f"{m.group(1)}|{m.group(2)}|{re.sub(r'[^0-9]', '', m.group(3))}")) + wrap, s)
    if "(" in s:
        s = re.sub(r"(?<![\d.])(\d*)\.(\d*)\((\d+)\)(?![\d(])", lambda m: wrap + _repeating_decimal(m) + wrap, s)
    if not re.search(r"\d\s*(?:\\[lc]?dots|\.\.\.|…)", s):
        return s
    return re.sub(r"(?<![\d.])(\d*)\.(\d+)\s*(?:\\[lc]?dots(?![a-z])|\.\.\.|…)", lambda m: wrap + _ellipsis_decimal(m) + wrap, s)


def _ellipsis_decimal(match):
    """`0.333...` -> 1/3: the shortest period that the decimals end with at least twice (three times for one digit),
    else the truncated expansion `0.285714\\ldots`."""
    whole, decimals = match.group(1), match.group(2)
    for size in range(1, 7):
        period = decimals[-size:]
        repeats = 3 if size == 1 else 2
        if len(decimals) >= size * repeats and decimals.endswith(period * repeats):
            fixed = decimals[:-size * repeats]
            while fixed.endswith(period):
                fixed = fixed[:-size]
            while fixed and fixed[-1] == period[-1]:  # 0.1666: fixed 1, period 6 (rotate the period into place)
                fixed, period = fixed[:-1], period[-1] + period[:-1]
            return _repeating_decimal(re.match(r"(.*)\|(.*)\|(.*)", f"{whole}|{fixed}|{period}"))
    return f"{whole}.{decimals}\\ldots"


DENOMINATORS = {"half": 2, "halves": 2, "third": 3, "thirds": 3, "quarter": 4, "quarters": 4, "fourth": 4,
                 "fourths": 4, "fifth": 5, "fifths": 5, "sixth": 6, "sixths": 6, "seventh": 7, "sevenths": 7,
                 "eighth": 8, "eighths": 8, "ninth": 9, "ninths": 9, "tenth": 10, "tenths": 10}
FRACTION_WORDS = re.compile(r"\b(?:(\d+)|an?)\s+(" + "|".join(DENOMINATORS) + r")\b", re.IGNORECASE)


# A number whose digits are grouped by commas, by the grammar of the two conventions: groups of three (1,234,567), or
# the Indian system's groups of two before the last three (12,34,567 is 1234567; lakh and crore)
GROUPED_DIGITS = r"(?!0)(?:\d{1,3}(?:,\d{3})+|\d{1,2}(?:,\d{2})+,\d{3})"
DIGIT_MARKS = re.compile(r"(?<![\d.,'’_])\d{1,3}(?:['’_]\d{3})+(?![\d'’_])")  # groups set apart by apostrophes (Swiss) or _


# Thousands separators and decimal marks. Every language: digit groups of three set apart by spaces (`32 768`, `1 234
# 567`; not in a run of numbers set apart by spaces: `1 2 100`), apostrophes or underscores (`1'234'567`, `1_000`), or by
# points twice or more (`1.234.567`: no number has two decimal points). In a text that writes decimal commas (see
# decimal_comma_text), a comma between digits is the decimal mark and a point or a space between
# groups of three a thousands separator: `0,875` is 0.875, `1.562,50` is 1562.5, `2.210 €` is 2210, `12 500` is 12500
# (English `1,250` stays a thousand; `2, 3` and `1,2,3` stay lists).
_GROUPED_POINTS = re.compile(r"(?<![\d.,])\d{1,3}(?:\.\d{3}){2,}(?![\d.]|,\d)")
_GROUPED_SPACES = re.compile(r"(?<![\d.,])\d{1,3}(?:(?:[\u2009\u202f\u00a0]|\\[,;:! ]|\{,\})\d{3})+(?![\d])|(?<![\d.,])(?<!\d )\d{1,3}(?: \d{3})+(?![\d]|[.,]\d| \d)")
_LOCAL_GROUPED = re.compile(r"(?<![\d.,])\d{1,3}(?:[. \u2009\u202f\u00a0]\d{3})+(?:,\d+)?(?![\d]|[.,]\d)")
_LOCAL_DECIMAL = re.compile(r"(?<![\d.,])(\d+),(\d+)(?![\d]|[.,]\d)")


def number_conventions(text, decimal_comma=False):
    """Numbers written with another language's separators as plain numbers (see above)."""
    text = _GROUPED_POINTS.sub(lambda m: m.group(0).replace(".", ""), text)
    text = DIGIT_MARKS.sub(lambda m: re.sub(r"['’_]", "", m.group(0)), text)  # 1'234'567 (Swiss), 1_000_000
    text = _GROUPED_SPACES.sub(lambda m: re.sub(r"[^\d]", "", m.group(0)), text)
    if decimal_comma:
        text = _LOCAL_GROUPED.sub(lambda m: re.sub(r"[.\s]", "", m.group(0)).replace(",", "."), text)
        text = _LOCAL_DECIMAL.sub(r"\1.\2", text)
    return text


# CJK numerals, read by the positional grammar of the system from the values the Unicode database gives each numeral
# character (一 1 ... 九 9, 十 10, 百 100, 千 1000, 万/萬 10^4, 亿/億 10^8, 廿 20, financial 壹 贰 佰 ...): digits multiply
# the unit after them, sections of up to 9999 multiply a large unit (三亿五千万 is 350000000), 零 holds a place; a run of
# digits alone is read digit by digit (二〇二四 2024); X分之Y is Y/X (百分之二十 20%), 点 a decimal point, 负 a minus.
# A single character is a numeral only among the common ones (什 of 什么, 参 of 参加 are words).
_COMMON_CJK = set("零〇一二两兩三四五六七八九十百千万萬亿億")


@lru_cache(maxsize=1)
def _cjk_values():
    """{character: value} of the CJK ideographs that are numerals (their numeric value in the Unicode database)."""
    table = {"两": 2}  # (the simplified 兩, to which the database gives no value)
    for code in [0x3007, *range(0x3400, 0x4DC0), *range(0x4E00, 0xA000), *range(0xF900, 0xFB00)]:
        value = unicodedata.numeric(chr(code), None)
        if value is not None and value == int(value):
            table[chr(code)] = int(value)
    return table


def _cjk_integer(run):
    """The value of a run of CJK numeral characters (一千二百 1200, 两万 20000, 二〇二四 2024), or None (二三)."""
    values = [_cjk_values()[ch] for ch in run]
    if len(values) > 1 and all(v < 10 for v in values):
        return int("".join(map(str, values)))  # digit by digit: a year, a code
    total, section, digit, last_large = 0, 0, None, None
    for value in values:
        if value == 0:
            digit = None
        elif value < 10:
            if digit is not None:
                return None
            digit = value
        elif value in (20, 30, 40):   # 廿 卅 卌: a digit and its ten in one character
            section, digit = section + value, None
        elif value < 10**4:
            section, digit = section + (1 if digit is None else digit) * value, None
        else:
            group = section + (digit or 0) or 1
            total = total + group * value if last_large is None or value < last_large else (total + group) * value
            section, digit, last_large = 0, None, value
    return total + section + (digit or 0)


def cjk_numbers(text):
    """CJK numerals as ASCII numbers (see above): `学生有三千人` -> 学生有3000人, `三分之二` -> `\\frac{2}{3}`, a scale after digits
    (`1.2 万` -> 12000). Single characters only where the text writes no number in digits (the 一 of 一共, 一起, 第一
    is no number)."""
    values = _cjk_values()
    numeral = "[" + "".join(sorted(values)) + "]+"
    text = re.sub(r"(\d+(?:\.\d+)?)\s*([万萬亿億])", lambda m: _scaled(Fraction(m.group(1)) * values[m.group(2)], m.group(0)), text)
    digits_written = re.search(r"\d", text) is not None

    def number(run, start, end):
        if len(run) == 1 and (run not in _COMMON_CJK or digits_written or run in "万萬亿億" or run == "一" and re.match(
                r"[共起样定下般些直切旦同个]", text[end:end + 1]) or re.search(r"[第统唯同]$", text[:start])):
            return None
        return _cjk_integer(run)

    def value(match):
        sign = "-" if match.group(1) else ""
        whole = number(match.group(2), match.start(2), match.end(2))
        if whole is None:
            return match.group(0)
        if match.group(3):  # 分之: the denominator first
            top = _cjk_integer(match.group(3))
            if top is None:
                return match.group(0)
            return f"{sign}{top}%" if whole == 100 else f"{sign}\\frac{{{top}}}{{{whole}}}"
        if match.group(4):  # 点: decimals, digit by digit
            decimals = [values[ch] for ch in match.group(4)]
            if any(d > 9 for d in decimals):
                return match.group(0)
            return f"{sign}{whole}." + "".join(map(str, decimals))
        return f"{sign}{whole}"
    return re.sub(rf"(负|負)?({numeral})(?:分之({numeral})|[点點]({numeral}))?", value, text)


def _scaled(number, written):
    return str(number.numerator) if number.denominator == 1 else written


# Words of the languages whose decimal mark is a comma (German, French, Spanish, Portuguese, Italian), none of them English
_COMMA_LANGUAGE_WORDS = re.compile(
    r"\b(?:der|das|ist|und|nicht|wir|sind|wird|mit|für|beträgt|lautet|ergebnis|endergebnis|antwort|gesuchte|somit|daher|"
    r"lösung|insgesamt|ergibt|gleich|"
    r"les|est|et|des|une|donc|nous|sont|avec|pour|réponse|résultat|il|el|los|las|es|una|por|respuesta|entonces|"
    r"uma|então|resposta|são|di|che|è|risposta|quindi|sono)\b", re.IGNORECASE)
_SEPARATED_DIGITS = re.compile(r"\d,\d|\d[. \u2009\u202f\u00a0]\d{3}(?!\d)")
_COMMA_ANSWER_NOUN = re.compile(r"\b(?:antwort|(?:end)?ergebnis|réponse|résultat|respuesta|resposta|risposta)\b", re.I)
_ENGLISH_WORDS = re.compile(r"\b(?:the|and|is|of|so|we|to|are|that|this|with|for|it|then)\b", re.IGNORECASE)


# The numbers of a text written with decimal commas: a comma that cannot separate thousands (one or two digits after it,
# four or more, or a zero before it: `2,5`, `3,75`, `0,375`) with no point that cannot (`3.5`, `0.375`); numbers in
# brackets (a tuple `(2,5)`) and a list `1,2,3` are no evidence
_BRACKETED = re.compile(r"[(\[][^()\[\]]*[)\]]|\{[^{}]*\}")  # (intervals: `[k + 4,5)`)
_COMMA_DECIMAL = re.compile(r"(?<![\w.,^\\])(?:\d+,(?:\d{1,2}|\d{4,})|0,\d+)(?![\w,^]|\.\d|\s*\\(?:times|cdot))")
_POINT_DECIMAL = re.compile(r"(?<![\d.,])(?:\d+\.(?:\d{1,2}|\d{4,})|0\.\d+|\d{4,}\.\d+)(?![\d.]|,\d)")
_POINT_GROUPS = re.compile(r"(?<![\d.,])[1-9]\d{0,2}(?:\.\d{3})+(?![\d.])")
_ARITHMETIC = r"(?:[+*/×·÷:≈]|\s-\s)"


def decimal_comma_text(text):
    """The response writes decimal commas: a language whose decimal mark is a comma (decimal_comma_language), or its
    numbers by their grammar (above): a comma that only a decimal mark can be, in arithmetic (`0,75 · 8`, `7,50 € : 2,5
    kg`) or beside numbers grouped by points (`12.500 € · 1,08`), and no point that only a decimal mark can be."""
    if decimal_comma_language(text):
        return True
    tail = re.sub(r"\[asy\].*?\[/asy\]|```.*?```", " ", text[-3000:], flags=re.DOTALL)  # (code: its own conventions)
    for _ in range(4):  # (numbers inside brackets are no evidence: `(2,5)`, `axes(-6,15)`, `(1,4-\sqrt{3})`)
        tail = _BRACKETED.sub(" ", tail)
    commas = list(_COMMA_DECIMAL.finditer(tail))
    if not commas or _POINT_DECIMAL.search(tail):
        return False
    in_arithmetic = any(re.search(_ARITHMETIC + r"\s*[¤]?\s*$", tail[max(0, m.start() - 4):m.start()])
                        or re.match(r"\s*(?:[¤]|[A-Za-z]{1,3}\b)?\s*" + _ARITHMETIC, tail[m.end():m.end() + 8]) for m in commas)
    return in_arithmetic or _POINT_GROUPS.search(tail) is not None


def decimal_comma_language(text):
    """The response (its last 3,000 characters) is written in a language whose decimal mark is a comma: Cyrillic
    letters, or more words of German, French, Spanish, Portuguese or Italian (or with their accented letters) than
    of English (two at least; one where no English word is)."""
    tail = text[-3000:]
    if not _SEPARATED_DIGITS.search(tail):
        return False  # (no number that the convention would read differently: nothing to decide)
    if len(re.findall(r"[\u0400-\u04ff]", tail)) >= 3 or _COMMA_ANSWER_NOUN.search(tail):
        return True
    foreign = _COMMA_LANGUAGE_WORDS.findall(tail) + re.findall(r"\w*[àâçéèêëîïôûùüÿœæäößñõã]\w*", tail, re.I)
    english = len(_ENGLISH_WORDS.findall(tail))
    if len({w.lower() for w in foreign}) < (2 if english else 1):
        return False
    return len(foreign) > english



_ROMAN = re.compile(r"M{0,3}(CM|CD|D?C{0,3})(XC|XL|L?X{0,3})(IX|IV|V?I{0,3})")
_ROMAN_VALUES = {"M": 1000, "D": 500, "C": 100, "L": 50, "X": 10, "V": 5, "I": 1}


def roman_value(word):
    """The value of a Roman numeral written by the strict grammar (all capitals or all small letters: `MCMXCIV` 1994,
    `xiv` 14; not `IIII`, `IC`, `MIm`), else None."""
    word = word.strip()
    if not word or not (word.isupper() or word.islower()) or not _ROMAN.fullmatch(word.upper()):
        return None
    values = [_ROMAN_VALUES[ch] for ch in word.upper()]
    return sum(-v if k + 1 < len(values) and v < values[k + 1] else v for k, v in enumerate(values))


_DMS = re.compile(r"(?<![\d.])(\d+(?:\.\d+)?)\s*(°|\^\s*\{?\s*\\circ\s*\}?)\s*(\d+(?:\.\d+)?)\s*(?:'|′)(?!')(?:\s*(\d+(?:\.\d+)?)\s*(?:''|″|\"))?")


def degrees_minutes_seconds(text):
    """An angle in degrees, minutes and seconds as degrees: `22°30′` -> `22.5°`, `12^\\circ 45'` -> `12.75^\\circ`,
    `10°20'` -> `\\frac{31}{3}°` (a minute is 1/60 of a degree, a second 1/3600)."""
    def degrees(match):
        value = Fraction(match.group(1)) + Fraction(match.group(3)) / 60 + Fraction(match.group(4) or 0) / 3600
        written = _terminating(value) or f"\\frac{{{value.numerator}}}{{{value.denominator}}}"
        return written + match.group(2)
    return _DMS.sub(degrees, text) if ("'" in text or "′" in text) else text


def _terminating(value):
    """The decimal text of a fraction whose expansion ends (12.75), else None."""
    q = value.denominator
    for prime in (2, 5):
        while q % prime == 0:
            q //= prime
    if q != 1:
        return None
    text = f"{float(value):.12f}".rstrip("0").rstrip(".")
    return text if Fraction(text) == value else None


_BASE_WRITTEN = re.compile(r"(?<![\w.])(?:0([xXbBoO])([0-9A-Fa-f]+)\b|([0-9A-Za-z]+)\s*(?:\(\s*base[\s-]*(\d{1,2})\s*\)|\s+in\s+base[\s-]*(\d{1,2})\b"
                           r"|_\{?\(?\s*base[\s-]*(\d{1,2})\s*\)?\}?))")


def base_numerals(text, wrap=""):
    """Numerals marked with their base as `digits_{base}` (between `wrap` marks, `$` in prose): the prefixes of programming languages (`0xFF` -> `FF_{16}`,
    `0b1010` -> `1010_{2}`, `0o17` -> `17_{8}`) and the base in words (`1000 (base 2)`, `1000 in base 2`)."""
    def marked(match):
        if match.group(1):
            base = {"x": 16, "b": 2, "o": 8}[match.group(1).lower()]
            digits = match.group(2)
        else:
            digits, base = match.group(3), int(match.group(4) or match.group(5) or match.group(6))
        try:
            int(digits, base)
        except ValueError:
            return match.group(0)
        return f"{wrap}{digits}_{{{base}}}{wrap}"
    return _BASE_WRITTEN.sub(marked, text) if re.search(r"\b0[xXbBoO][0-9A-Fa-f]|base", text) else text


# Accounting writes a negative amount in parentheses. An amount is read so when the parentheses hold only it and it is
# written as money (a currency sign inside or before them, or cents: `(70.00)`), or when it is the result of a
# computation whose value is its negative (`41 - 48 = (7)`); `f(7)`, `x = (3)` or a point `(2, 5)` are not
_AMOUNT = r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?"
_MONEY_NEGATIVE = re.compile(r"(?<![\w)])(?:[$¤€£]\s*\(\s*(" + _AMOUNT + r")\s*\)|\(\s*[$¤€£]\s*(" + _AMOUNT + r")\s*\)"
                             r"|\(\s*(\d{1,3}(?:,\d{3})*\.\d\d)\s*\))")
_RESULT_IN_PARENS = re.compile(r"([\d.,\s+\-−×*/÷()]{3,80})=\s*\(\s*(" + _AMOUNT + r")\s*\)")
_ACCOUNTING_HINT = re.compile(r"[$¤€£]\s*\(|\(\s*[$¤€£]|\.\d\d\s*\)|=\s*\(\s*\d")
_OPERATORS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul, ast.Div: operator.truediv}


def _arithmetic(text):
    """The exact value of a computation on numbers (+ - × / and parentheses), or None; nothing else is evaluated."""
    try:
        tree = ast.parse(text.replace(",", "").replace("−", "-").replace("×", "*").replace("÷", "/").strip(), mode="eval")
    except (SyntaxError, ValueError):
        return None

    def value(node):
        if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)) and not isinstance(node.value, bool):
            return Fraction(str(node.value))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -value(node.operand)
        if isinstance(node, ast.BinOp) and type(node.op) in _OPERATORS:
            return _OPERATORS[type(node.op)](value(node.left), value(node.right))
        raise ValueError
    try:
        return value(tree.body)
    except (ValueError, ZeroDivisionError, RecursionError):
        return None


def accounting_negatives(text):
    """Amounts in parentheses written for negative ones, as negative numbers (see above)."""
    if "(" not in text or not _ACCOUNTING_HINT.search(text):
        return text
    money = re.search(r"[$¤€£]|\|", text)  # (cents in parentheses are money only in a text about money, or a table's cell)
    text = _MONEY_NEGATIVE.sub(lambda m: "-" + (m.group(1) or m.group(2) or m.group(3)) if money or not m.group(3) else m.group(0), text)

    def result(m):
        left = m.group(1).split("=")[-1]
        value = _arithmetic(left) if re.search(r"\d\s*[-−+×*/÷]\s*\(?\d", left) else None
        return f"{m.group(1)}= -{m.group(2)}" if value is not None and value == -Fraction(m.group(2).replace(",", "")) else m.group(0)
    return _RESULT_IN_PARENS.sub(result, text)
