"""Stage 1 of the grader: find the span of a response that states its final answer (a Span for answer_value.py).

Entry points: final_text(response, think_prefilled) and find_span(text, strict); last_boxed (also read by sft.py).

final_text: only the text after the last `</think>` / `<|end_of_thought|>` is read (inside `<|begin_of_solution|>`
only that block); a reasoning block opened and never closed has NO final answer; an invented next chat turn ("User:",
`</s>` -- not the close of a struck-out `<s>36</s>`) ends the response. find_span first reads the text as written:
  - markup layers peeled (answer_markup.py: HTML entities, a LaTeX document's body, frames as boxes, code spans, ...);
  - any script's digits, separators and punctuation as ASCII (latex.plain_unicode: the Unicode database);
  - chat marks (_chat_marks): struck-out text (`~~36~~`, `<del>`, `\\sout{}`, `\\cancel{}`, 3̶6̶) is taken back, a value
    with a cross mark after it (`36 ❌`) is rejected, other pictographs (✅ 🎉 keycaps) are dropped or end a sentence;
  - a made-up next problem after a stated answer (a base model running on through its few-shot prompt) is cut off,
    and an instruction of the prompt echoed by the model ("put your final answer within \\boxed{}") is dropped;
  - a LAST box that never closes is an answer cut off (no answer; `$\\boxed{100$.` is 100); a last EMPTY box after
    other words is no answer.
Then the first kind found wins, and within a kind the LAST occurrence:
  1. a JSON object's "answer" field (a JSON array is an ordered tuple);
  2. <answer>...</answer> (inside a field or a tag, a box or an answer phrase is the span, else all of it);
  3. \\boxed{} / \\fbox{}: boxes joined only by "and", ",", "or" or part labels are ONE list answer (`\\boxed{3} or
     \\boxed{5}` is a hedge); boxes under conditions or numbered cases are no answer; a percent sign after a box is
     part of its value; a later "final answer" phrase with a plain value or one assignment wins over the box;
  4. `#### 18` (GSM8K);
  5. an answer phrase ("the final answer is", "Answer:", "A:", "Ans.", "**Final Answer:**", a heading "### Final
     Answer" with the block below it, and the phrases of the languages models switch to: "答案是", "Ответ:", "Die
     Antwort lautet", "La respuesta es", ...); a counterfactual phrase ("the answer would be ...") leaves an earlier
     one. A later correction ("Correction: ...", "Wait -- no, ...", "Oops", "scratch that") states the answer.
  6. (default mode only; strict=True stops at 5) a whole response that is one formula without words; a verdict it
     opens with ("Yes, it is possible. For example ..."); the last row of a closing markdown table; else the
     conclusion: the whole text, whose last statement answer_value.conclusion_value reads.
The span says whether the response writes decimal commas (decimal_comma_language: Cyrillic, or more German, French,
Spanish, Portuguese or Italian words than English ones): answer_value then reads `0,875` as 0.875.
"""
import re
import unicodedata

from answer_compare import equivalent
from answer_markup import entities, peel
from syntaxes import code_output, lean_answer, roots, transcript
from answer_value import OTHER_SCRIPT_LETTER, LEADING_VALUE, SHORT_WORDS, Span, conclusion_value, reduce_span, sentence_value
from latex import MAX_ANSWER_CHARS, ROUNDING_NOTE, braced, clean, code_forms, is_english, parse_math, split_unit
from numerals import accounting_negatives, decimal_comma_text, plain_unicode

MAX_RESPONSE_CHARS = 200_000  # only the last this many characters of a response are searched for its answer


_CHAT_TURN = re.compile(r"<\|im_start\|>|<\|im_end\|>|<\|endoftext\|>|<\|eot_id\|>|<\|eom_id\|>|<\|start_header_id\|>|</s>"
                        r"|<\|end\|>|<end_of_turn>|<start_of_turn>|<｜end▁of▁sentence｜>|<｜User｜>|<\|user\|>"
                        r"|\n\s*(?:User|Human|Question)\s*:")  # an invented next turn of a base model


def final_text(response, think_prefilled=False):
    """The part of a response that can state its final answer (after_reasoning), an interpreter session in it read
    as its outputs (syntaxes.transcript), or None when the response was cut off inside a reasoning block."""
    text = after_reasoning(response, think_prefilled)
    return None if text is None else transcript(code_output(lean_answer(text)))


def after_reasoning(response, think_prefilled=False):
    """The text after a response's reasoning (what the code reward runs the last program of), or None when the
    response was cut off inside a reasoning block. think_prefilled: the prompt itself opened a `<think>` block (R1-Zero
    style templates)."""
    if not response:
        return None
    text = response[-MAX_RESPONSE_CHARS:]
    for turn in _CHAT_TURN.finditer(text):  # a new chat turn after the answer is not the answer
        if turn.group(0) != "</s>" or not re.search(r"<s>[^<\n]{0,200}$", text[max(0, turn.start() - 210):turn.start()]):
            text = text[:turn.start()]  # (`<s>36</s>` is struck-out text, not the end of a turn)
            break
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


# Chat styles around a value. Struck-out text is taken back: `~~36~~`, `<s>36</s>`, `<del>`, `<strike>`, `\\sout{36}`,
# `\\cancel{36}`, characters under a combining stroke overlay (3̶6̶). A cross mark right after a value rejects it
# (`36 ❌`). Other pictographs (check marks, emoji, keycaps, read through the Unicode database: categories So, Sk, Me)
# are no part of a value: dropped, or a sentence end where a new sentence follows them ("42 ✅ Let me check").
_STRUCK = re.compile(r"~~[^~\n]{1,200}?~~|<(s|del|strike)>[^<]{0,200}?</\1>", re.IGNORECASE)
_STRUCK_COMMAND = re.compile(r"\\(?:sout|st|xout|cancel|xcancel|bcancel)\s*(?=\{)")
_MARKED_VALUE = r"(?:\*\*)?(?:[$¤]?-?\d[\d,]*(?:\.\d+)?(?:/\d+)?|\$[^$\n]{1,80}\$)(?:\*\*)?"
_SYMBOLS = {}


def _symbol(ch):
    """'cross' (a cross mark), 'times' (a multiplication x), 'symbol' (another pictograph), 'strike' (a stroke
    overlay), or None for a character that is part of the text."""
    if ch not in _SYMBOLS:
        name, category = unicodedata.name(ch, ""), unicodedata.category(ch)
        _SYMBOLS[ch] = ("strike" if "STROKE OVERLAY" in name else "cross" if "CROSS MARK" in name or "BALLOT X" in name
                        else "arrow" if re.search(r"RIGHTWARDS|RIGHT ARROW|ARROW RIGHT", name) and category == "So"
                        else "times" if "MULTIPLICATION X" in name
                        else "symbol" if category in ("Sk", "Me") or category == "So" and not unicodedata.decomposition(ch)
                        and "DEGREE" not in name and "SIGN" not in name else None)
    return _SYMBOLS[ch]


def _chat_marks(text):
    """The text with struck-out values taken back and pictographs read (see above)."""
    if "~~" in text or "</" in text:
        text = _STRUCK.sub("", text)
    if "\\" in text and _STRUCK_COMMAND.search(text):
        for match in reversed(list(_STRUCK_COMMAND.finditer(text))[-20:]):
            group = braced(text, match.end())
            if group is not None:
                text = text[:match.start()] + text[group[1]:]
    if text.isascii():
        return text
    kinds = {ch: _symbol(ch) for ch in set(re.findall(r"[^\x00-\x7f]", text))}
    if not any(kinds.values()):
        return text
    of = {kind: "".join(re.escape(ch) for ch, k in kinds.items() if k == kind) for kind in ("strike", "cross", "times", "symbol", "arrow")}
    if of["arrow"]:
        text = re.sub(f"[{of['arrow']}]", " → ", text)  # ➡️ between two statements: "gives"
    if of["strike"]:
        text = re.sub(rf"(?:[^\s{of['strike']}][{of['strike']}]+)+", "", text)
    if of["times"]:
        text = re.sub(f"[{of['times']}]", "×", text)
    if of["cross"]:
        text = re.sub(rf"{_MARKED_VALUE}[ \t]*[{of['cross']}]+", "", text)  # `36 ❌`: a value marked wrong
        of["symbol"] += of["cross"]
    if of["symbol"]:
        text = re.sub(rf"(?<=[\w*$)])[ \t]*[{of['symbol']}]+[ \t]*(?=[A-Z])", ". ", text)  # "42 ✅ Let me check"
        text = re.sub(rf"[ \t]*[{of['symbol']}]+", "", text)
    return text


# Markup that is no part of what a text states: tags (`<details>`, `<summary>`, `<b>`, `<final>`: their content stays;
# not <think>, <answer> and the struck-out <s>, which delimit), spoiler marks (`>!42!<`, `||x = -4||`), calculator
# annotations (`<<20+5=25>>`), end-of-proof marks (∎ \blacksquare \Box \qed, Q.E.D.), equation numbers and labels
# (\tag{2}, \label{eq:1}, \nonumber), equation environments (equation, align, gather: display math, `&=` is `=`), LaTeX
# escaped twice in prose (`\\(x = 1\\)`), misspelt boxes (`\box{18}`, `\Boxed{42}`).
_TAG_PAIR = re.compile(r"<(?!(?:think|answer|s|del|strike)\b)([A-Za-z][\w-]*)((?:\s+[\w-]+(?:=(?:\"[^\"]*\"|'[^']*'|[^\s>]+))?)*)\s*>"
                       r"(.*?)</\1\s*>", re.DOTALL)
_INLINE_TAGS = {"b", "i", "u", "em", "strong", "span", "code", "tt", "mark", "font", "small", "big"}
_ENVIRONMENT = re.compile(r"\\begin\{(equation|align|gather|multline|eqnarray|flalign)(\*?)\}(.*?)\\end\{\1\2\}", re.DOTALL)


def _display_rows(match):
    """An equation environment as display math, a row each (`&` dropped; a row that goes on with `&= ...` joins the one
    above); environments nested in it (matrices, cases) are kept as written."""
    nested = []
    body = re.sub(r"\\begin\{([a-zA-Z*]+)\}.*?\\end\{\1\}", lambda m: nested.append(m.group(0)) or f"\x00{len(nested) - 1}\x00",
                  match.group(3), flags=re.DOTALL)
    body = re.sub(r"\\\\\s*(?=&?\s*=)", " ", body).replace("&", "")
    rows = "\\]\n\\[".join(body.split("\\\\"))
    return "\\[" + re.sub(r"\x00(\d+)\x00", lambda m: nested[int(m.group(1))], rows) + "\\]"


def _markup(text):
    """The text without markup (see above)."""
    if "<" in text:
        for _ in range(6):  # (nested tags: innermost pairs first)
            changed = _TAG_PAIR.sub(lambda m: m.group(3) if m.group(1).lower() in _INLINE_TAGS else "\n" + m.group(3) + "\n"
                                    if m.group(1).lower() not in ("sup", "sub") else ("^{" if m.group(1).lower() == "sup" else "_{")
                                    + m.group(3) + "}", text)
            if changed == text:
                break
            text = changed
        text = re.sub(r"<br\s*/?>|<hr\s*/?>", "\n", text)
        text = re.sub(r"<<[^<>\n]{0,200}>>", "", text)  # GSM8K's calculator annotations
    if "#" in text:  # a comment after code on its line: `x = math.log(5)   # natural log` (not GSM8K's `#### 18`)
        text = re.sub(r"(?<=[\w)\]])[ \t]+#(?!#)[ \t]+[^\n]*", "", text)
    if ">!" in text:
        text = re.sub(r">!(.{1,300}?)!<", r"\1", text)
    if "||" in text:
        text = re.sub(r"(?:(?<=^)|(?<=[\s:]))\|\|([^|\n$]{1,200})\|\|(?=\s*$|\s*[.!])", r"\1", text, flags=re.MULTILINE)
    if "\\" in text:
        text = re.sub(r"\\(?:tag\*?|label)\s*\{[^{}]*(?:\{[^{}]*\}[^{}]*)*\}|\\(?:nonumber|notag)(?![a-zA-Z])", " ", text)
        text = _ENVIRONMENT.sub(_display_rows, text)
        text = re.sub(r"\\(?:blacksquare|square|Box|qed|QED)(?![a-zA-Z])|\\hfill(?![a-zA-Z])", " ", text)
        text = re.sub(r"\\\\\((.{1,300}?)\\\\\)", lambda m: "\\(" + m.group(1).replace("\\\\", "\\") + "\\)", text)
        text = re.sub(r"\\(?:box|Boxed|BOXED)\s*(?=\{)", r"\\boxed", text)
    if "```" in text and re.search(r"```(?:ya?ml|json)\b", text):  # a YAML or JSON block: its keys label values, an array is a list
        text = re.sub(r"```(?:ya?ml|json)[ \t]*\n(.*?)```", lambda m: re.sub(r"^([ \t]*[\w ]+:[ \t]*)\[([^\[\]\n]*)\][ \t]*$", r"\1\2",
                                                                        m.group(1), flags=re.MULTILINE), text, flags=re.DOTALL)
    if "∎" in text or "Q.E.D" in text:
        text = re.sub(r"∎|\bQ\.E\.D\.?", " ", text)
    return re.sub(r"(?<!\$)\$\s+\$(?!\$)", " ", text) if "$" in text else text  # (an empty `$ $` left by a removed mark)


# Where a response turns to its reader after its conclusion (a sign-off: "I hope this helps! Let me know if ...", "Want
# to try a similar one? Solve 2x + 3 = 13 (answer: x = 5).", "Feel free to send more ...", "(Tip: ...)"): what follows
# is no part of its answer
_SIGNOFF = re.compile(r"(?:^|\n|(?<=[.!?])[ \t]+)[ \t]*[(*_]*(?:(?:tip|hint|p\.?s\.?)\s*:|(?:i\s+)?hope\s+(?:this|that|it)\s+helps|"
                      r"let\s+me\s+know\b|feel\s+free\b|thanks?\s+(?:for|again)\b|thank\s+you\b|(?:i'?m|i\s+am)\s+happy\s+to\s+help|"
                      r"happy\s+\w+ing\b|good\s+luck\b|(?:do\s+you\s+)?want\s+to\s+try\b|would\s+you\s+like\b|if\s+you'?d\s+like\b|"
                      r"if\s+you\s+want\b|does\s+(?:that|this)\s+make\s+sense\b|try\s+(?:it|this|plugging|another|a\s+similar)\b)",
                      re.IGNORECASE)


def _without_signoff(text):
    """The text up to a sign-off (above) that follows a statement with a value, in its last 800 characters."""
    start = max(0, len(text) - 800)
    for match in _SIGNOFF.finditer(text, start):
        if re.search(r"\d", text[:match.start()]) and not _BOX.search(text, match.end()):
            return text[:match.start()]
    return text


def _later_statement(text, box):
    """A statement after the last box whose value differs from the box's: the response's last word, a Span of it (the
    box was a step: "$r = \\boxed{5}$, hence the area is $25\\pi$", "Sum = \\boxed{60} / Fifth = 60 - 48 = 12"; or the
    closing sentence contradicts it: "\\boxed{7} such integers. / In total, 8 numbers ..."); None when the box stands (no
    later value, the same value, a verification, or more than one value)."""
    rest = text[box.end:box.end + 2000]
    if not re.search(r"\d", rest) or box.start < len(text) - 6000:
        return None
    going_on = re.match(r"[\s$)\]\\]*[,;]\s*(?:and\s+)?(?:so|hence|therefore|thus|then|giving|which\s+gives)\b", rest, re.I)
    if going_on:
        statement = rest[going_on.start():].lstrip(" \t$)],;\\")
    else:
        end = re.search(r"[.!?](?=\s|$)|\n", rest)
        statement = rest[end.end():] if end else ""
    statement = statement.strip()
    if not statement or not re.search(r"\d", statement) or len(statement) > 300 or len(re.findall(r"[.!?](?:\s|$)", statement)) > 2 \
            or not (going_on or _CONCLUDES.search(statement)):
        return None  # (a longer text after the box is a discussion, not a last word)
    later = _find_span(statement)
    value, boxed = reduce_span(later) if later else None, reduce_span(box)
    if value is None or boxed is None or re.search(r"\\text\s*\{\s*or\s*\}|,", value):
        return None
    plain = parse_math(split_unit(clean(value.split("=")[-1]) or "")[0])
    if (plain is None or plain.free_symbols) and not re.fullmatch(r"\\text\{[^{}]*\}", value):
        return None  # ("So, for all n ..., $3^n$ is a factor": a remark in letters, not a value)
    value = re.sub(r"^\\approx\s*", "", value)  # ("approximately 22 more euros" restates \boxed{22})
    return None if any(equivalent(v, boxed) or equivalent(boxed, v) for v in (value, value.split("=")[-1])) else later


def _alternative_after(text, span):
    """The sentence after the one that states the answer offers another value ("Alternatively 16.", "Or maybe 9.")."""
    if not span.end:
        return False
    end = re.search(r"[.!?](?=\s|$)|\n", text[span.end:span.end + 400])
    following = text[span.end + end.end():span.end + 600].lstrip() if end else ""
    offered = re.match(r"[*_]*(?:alternatively|or(?:\s+(?:maybe|perhaps|possibly|else))?)\b[,:]?\s*(?:(?:it|the\s+answer)(?:'s|\s+is|"
                       r"\s+(?:could|might)\s+be)\s+)?([$¤]?-?\d[^.!?\n]{0,60}|\$[^$\n]{1,60}\$)", following, re.I)  # (a value first)
    if offered is None or not re.search(r"\d", offered.group(1)):
        return False
    stated, other = reduce_span(span), sentence_value(offered.group(1))
    return bool(stated and other and not equivalent(other, stated))


# A statement that concludes: a sentence opening with a conclusion word ("So ...", "In total, ..."), or a labelled line
# that computes its value ("Perimeter: 6 + 8 + 10 = 24", "Fifth = 60 - 48 = 12")
_CONCLUDES = re.compile(r"(?:^|\n|(?<=[.!?])\s)\s*(?:\d+[.)]\s*)?[*_]*(?:(?:so|hence|therefore|thus|in\s+total|altogether|finally|"
                        r"in\s+conclusion|that'?s|that\s+is|the\s+(?:final\s+)?answer\s+is)\b|[A-Za-z][\w '-]{0,30}[*_]*\s*[:=][^\n=]*\d\s*[-+×*/÷·]\s*[\d(][^\n]*=)",
                        re.IGNORECASE)


def _without_loop_tail(text):
    """A response caught in a loop, cut off while repeating one statement (`\\boxed{7}` ... `\\boxed{7}` `\\boxed{`, "The answer
    is 12." three times and more, then "The answer is"): the unfinished copy is dropped. A loop of different statements
    ("... is 6. ... is 12. ... is 6.") is left as it is."""
    tail = text[-3000:].rstrip()
    units = [u for u in re.split(r"\n\s*|(?<=[.!?])\s+", tail) if u.strip()]
    if len(units) < 4 or not units[-1].strip() or units[-1].strip() == units[-2].strip():
        return text
    last, unit = units[-1].strip(), units[-2].strip()
    if unit.startswith(last) and all(u.strip() == unit for u in units[-4:-1]):
        return text.rstrip()[:len(text.rstrip()) - len(last)].rstrip()
    return text


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


_BOX = re.compile(r"\\(?:boxed|fbox|framebox)(?![a-zA-Z])(\s*)")


def _boxes(text):
    """[(start, end, content)] of every closed \\boxed{...} / \\fbox{...} (nested braces), and `\\boxed 5`."""
    found = []
    for match in _BOX.finditer(text):
        pos = match.end()
        if text.startswith("{", pos):
            group = braced(text, pos)
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


# The last box's own clause names a case: "... and case 2 gives \\boxed{10}", "in the second case, \\boxed{9}", "for n odd
# it is \\boxed{3}" (a case named in an earlier sentence, before "Total: \\boxed{7}", is not the last box's)
_CASE_LABEL = re.compile(r"\bcase\s*(?:\d|[ivx]+\b|[a-d]\b|\()|\b(?:first|second|third|other|last|latter|former)\s+case\b|"
                         r"\bfor\s+(?:all\s+|every\s+)?\$?[a-z]\$?\s*(?:(?:is\s+)?(?:even|odd|positive|negative)\b|[<>=≤≥]|\\[lg]e)", re.I)


def last_boxed(text):
    """The last non-empty box; boxes joined to it only by and/or/commas are one list answer (deduplicated)."""
    boxes = [(start, end, content) for start, end, content in _boxes(text) if content]
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
                and (re.search(r"\b(?:if|unless|otherwise|else|whereas|when)\b", between, re.I)
                     or _CASE_LABEL.search(re.split(r"[.!?]\s|\n", between)[-1])) \
                and content != boxes[k - 1][2]:
            return None  # "if order matters it is \boxed{10}; if not, \boxed{5}": answers under conditions
        kind = _connective(between) if k else None
        if kind is None:
            break
        if kind == "or":
            joiner = " \\text{ or } "
    return joiner.join(reversed(answers))


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
    """The span of the last `"answer": ...` field's value (see _inner_span); None if there is none."""
    keys = list(_JSON_ANSWER_KEY.finditer(text))
    if not keys or _BOX.search(text, keys[-1].end()):
        return None
    pos = keys[-1].end()
    if text.startswith('"', pos):
        value = _json_string(text, pos)
        return _inner_span(value) if value is not None else None
    if text.startswith("[", pos):
        close = text.find("]", pos)
        if close < 0:
            return None
        items = [item.strip().strip('"') for item in text[pos + 1:close].split(",") if item.strip()]
        if not items:
            return None
        return Span("field", items[0] if len(items) == 1 else "(" + ", ".join(items) + ")")  # a JSON array is ordered
    literal = re.match(r"[-+]?(?:\d[\d,]*\.?\d*(?:[eE][-+]?\d+)?|\.\d+)", text[pos:pos + 100])
    return Span("field", literal.group(0)) if literal else None


_PHRASE = re.compile(
    r"(?:\bfinal\s+answer\b(?:\s+is\b)?|\bthe\s+(?:final\s+|correct\s+)?answer(?:\s*\([^()\n]{0,40}\))?\s*(?:is\b|would\s+be\b"
    r"|will\s+be\b|=|:)|^[ \t>#*_-]*(?:(?:short|final|my)\s+)?(?:answer|a|ans\.?)\s*(?:\*\*|__)?\s*:|^[ \t>#*_-]*answer\s*(?=\$|\\\[|\\\())"
    r"|^[ \t>#*_-]*ans\.(?=[ \t]*[-$¤\d\\(])|(?<=[.!?][ \t])[*_]*(?:final\s+)?answer[*_]*\s*:",  # (". Answer: 12" in a line)
    re.IGNORECASE | re.MULTILINE)
# the same phrases in the languages models switch to (their decimal commas are read by answer_compare); searched only
# in a text that names an answer in one of them (one scan for the nouns, then the phrases)
_FOREIGN_NOUN = re.compile(r"答|ответ|antwort|ergebnis|respuesta|réponse|résultat|resposta|risposta", re.IGNORECASE)
_FOREIGN_PHRASE = re.compile(r"(?:最终|最後|最后)?答案\s*(?:应该?|應)?(?:是|为|為|：|:)|^[ \t>#*_-]*(?:解|回)?答え?\s*[:：]|\bответ\s*(?:равен|будет|—|:)"
                             r"|\bantwort\s*(?:lautet|ist|:)|\b(?:das\s+)?(?:end)?ergebnis\s*(?:lautet|ist|:)|\brésultat\s*(?:final\s+)?(?:est|:)"
                             r"|\brespuesta\s*(?:final\s+)?(?:es|:)|\bréponse\s*(?:finale\s+)?(?:est|:)|\bresposta\s*(?:final\s+)?(?:é|:)"
                             r"|\brisposta\s*(?:finale\s+)?(?:è|:)", re.IGNORECASE | re.MULTILINE)


_A_LINE = re.compile(r"^[ \t>#*_-]*(?:a|ans\.?)\s*(?:\*\*|__)?\s*:|^[ \t>#*_-]*ans\.(?=[ \t]*[-$¤\d\\(])", re.IGNORECASE | re.MULTILINE)


def _phrases(text):
    """The answer phrases of a text, in order (see _PHRASE, _FOREIGN_PHRASE). Each English phrase names an answer or
    starts a line with "A:", so the search starts shortly before the first of those (a long reasoning before it costs
    one fast scan)."""
    first = text.lower().find("answer")
    a_line = _A_LINE.search(text, 0, first if first >= 0 else len(text))
    starts = [k for k in (first, a_line.start() if a_line else -1) if k >= 0]
    found = list(_PHRASE.finditer(text, max(0, min(starts) - 100))) if starts else []
    if _FOREIGN_NOUN.search(text):
        found = sorted(found + list(_FOREIGN_PHRASE.finditer(text)), key=lambda m: m.start())
    return found
# A made-up next problem after the response's answer (a base model continuing its few-shot prompt)
_NEXT_PROBLEM = re.compile(r"\n\s*(?:#{1,4}\s*)?(?:\*\*)?(?:problem|question|exercise|example|Q)\s*\d*\s*(?:\*\*)?\s*[:.]"
                           r"|\n[ \t]*#{1,4}[ \t]*(?:problem|question|exercise)[ \t]*\d*[ \t]*(?=\n)", re.IGNORECASE)  # "## Problem 7"
# A correction of a stated answer ("Correction: I forgot the 3 chairs, so it is 18."): what follows it is the answer
_CORRECTION = re.compile(r"(?:^|\n|[.!]\s)\s*(?:\*\*)?(?:correction\b|corrected\b|oops\b|on\s+second\s+thought\b|scratch\s+that\b|"
                         r"(?:edit|update|erratum)\s*:|I\s+(?:mistakenly|wrongly|incorrectly)\b|"
                         r"(?:hmm\s*,?\s*)?(?:no\s*,?\s*)?wait\s*(?:[,—–-]\s*)?no\b|"
                         r"(?:wait|actually|hmm)\b[^.\n]{0,60}?\b(?:mistake|error|wrong|incorrect|forgot|miscounted|"
                         r"miscalculated)\b|I\s+(?:made\s+(?:a|an)\s+(?:mistake|error)|forgot|miscounted|miscalculated)\b|"
                         r"let\s+me\s+re(?:compute|calculate|do|count)\b)",
                         re.IGNORECASE)


_TEXT_GROUP = re.compile(r"\\(?:text|mbox|mathrm|textrm|operatorname|mathbb|mathcal|begin|end)\s*\{([^{}]*)\}")


def _bare_formula(text):
    """The whole text is one formula written without delimiters: one line (a matrix may span lines), no words
    outside commands, at most a few words in `\\text{}` (`x^2 + 2 \\text{ for } x \\ge 0`), nor short English ones."""
    text = ROUNDING_NOTE.sub(" ", text)
    if re.search(OTHER_SCRIPT_LETTER, _TEXT_GROUP.sub(" ", text)):
        return False  # words of another script: 因此，所求的面积为 $24$ 平方厘米
    if re.search(r"(?<![\\A-Za-z])(?:" + "|".join(w for w in SHORT_WORDS if len(w) > 1) + r")(?![A-Za-z])",
                 _TEXT_GROUP.sub(" ", text), re.I):
        return False
    text = re.sub(r"\\begin\{([a-zA-Z]*matrix|array)\}.*?\\end\{\1\}", lambda m: m.group(0).replace("\n", " "), text,
                  flags=re.DOTALL) if "\\begin" in text else text
    if "\n" in text or len(text) > 300 or not re.search(r"[A-Za-z0-9]", text):
        return False
    if re.match(r"\s*[$¤]?-?\d[\d,.]*\s+\(", text):
        return False  # "60 (15 × 4).": a value and the working after it, prose (a product is written `60(15 \times 4)`)
    if len(text) <= 200 and parse_math(split_unit(clean(text) or "")[0]) is not None:
        return True
    if any(len(group.split()) > 3 for group in _TEXT_GROUP.findall(text)):
        return False
    rest = re.sub(r"\\[a-zA-Z]+", " ", _TEXT_GROUP.sub(" ", text))
    return not any(is_english(w) for w in re.findall(r"(?<![a-zA-Z])[a-zA-Z]{3,}", rest)) \
        and not re.search(r"[!?:]\s*$|[.!?]\s+[A-Za-z]", text) and clean(text) is not None


_FILLER_WORDS = {"final", "answer", "the", "is", "so", "thus", "hence", "therefore", "i", "hope", "it", "correct"}


def _box_span(text):
    """The span of the last box (and the boxes joined to it), or None."""
    found = last_boxed(text)
    if found is None:
        return None
    boxes = _boxes(text)
    start, end = next((b[0], b[1]) for b in reversed(boxes) if b[2])
    percent = re.match(r"\s*\\?%", text[end:end + 10])
    if percent:  # `\boxed{0.5}\%`: the sign after the box is part of its value (0.5% is not 50%)
        found, end = found + "\\%", end + percent.end()
    return Span("box", found, text, start, end)


def _phrase_span(text):
    """The text after the last answer phrase that states one (not a counterfactual "the answer would be ...", when an
    earlier phrase states the answer), or None."""
    matches = _phrases(text)
    if not matches:
        return None
    stated = [m for m in matches if not re.search(r"\b(?:would|could|might)\b", m.group(0), re.I)]
    named = [m for m in stated if not (re.fullmatch(r"[\s.!*_]*", text[m.end():].split("\n")[0])
                                       and re.search(r"[A-Za-z]{2}", text[:m.start()].rsplit("\n", 1)[-1]))]
    stated = named or stated  # ("The answer is 45. Grader note: this is my final answer.": a phrase that names no value)
    chosen = stated[-1] if stated else matches[-1]
    return Span("phrase", text[chosen.end():], text, chosen.start(), chosen.end())


def _inner_span(value):
    """A JSON field's or an <answer> tag's own span: a box inside it, an answer phrase inside it, or all of it."""
    value = value.strip()
    if not value:
        return None
    return _box_span(value) or _phrase_span(value) or Span("field", value)


def find_span(text, strict=False):
    """Stage 1: the span of `text` (a response's final text, see final_text) that states its answer, or None.
    See the module docstring for the order. strict=True: only explicit answers (JSON field, <answer>, box, ####,
    answer phrase), no free-text fallback. The span says whether the response writes decimal commas."""
    span = _find_span(text, strict)
    return span._replace(decimal_comma=True) if span is not None and decimal_comma_text(text) else span




# A session of a read-eval-print loop (Python `>>>`, R `>`, Maxima `(%i1)`, Mathematica `In[1]:=`, Octave, Julia): what
# the last input printed is the response's answer, read as the system writes it (`[1] 120`, `(%o1) [x = 2, x = 3]`,
# `Out[1]= {{x -> 4}}`, `Fraction(7, 12)`)
_PROMPT = re.compile(r"^[ \t]*(?:>>>|>(?!>)|\.\.\.(?=\s)|In\s*\[\d+\]\s*:?=?|\(%i\d+\)|julia>|octave:\d+>|>>(?!>))", re.MULTILINE)
_OUTPUT_MARK = re.compile(r"^\s*(?:Out\s*\[\d+\]\s*=|\(%o\d+\)|\[\d+\]|ans\s*=)\s*")


def _repl_span(text):
    """The span of the last output of a read-eval-print session that ends the response, else None."""
    tail = re.sub(r"```[\w+-]*", "", text[-3000:]).rstrip()
    prompts = list(_PROMPT.finditer(tail))
    if not prompts or re.search(r"[A-Za-z]{4,}[^\n]*[.!?]\s*$", tail[prompts[-1].end():]):
        return None  # (no session, or prose after it)
    lines = [line for line in tail[prompts[-1].end():].split("\n")[1:] if line.strip()]
    if not lines or len(lines) > 12:
        return None
    output = _OUTPUT_MARK.sub("", " ".join(line.strip() for line in lines))
    output = re.sub(r"\b(?:Fraction|Rational)\(\s*(-?\d+)\s*,\s*(\d+)\s*\)", r"\\frac{\1}{\2}", output)
    output = re.sub(r"\{\{\s*([a-z])\s*->\s*([^{}]+)\}\}", r"\1 = \2", output)  # Mathematica's rule {{x -> 4}}
    output = re.sub(r"^\[\s*([a-z]\s*=[^\[\]]+)\]$", r"\1", output.strip())   # Maxima's list of solutions [x = 2, x = 3]
    return Span("formula", output) if output else None


def _unclosed_box(text, start):
    """(content, end) of a box whose last brace was left out before the closing `$` on its line (`$\\boxed{100$`,
    `$\\boxed{\\frac{2}{3}$`: the content's own braces balance), else None."""
    depth = 0
    for pos in range(start, min(len(text), start + 300)):
        ch = text[pos]
        depth += (ch == "{") - (ch == "}")
        if ch == "\n" or depth < 1 and pos > start:
            return None
        if ch == "$":
            content = text[start + 1:pos].strip()
            return (content, pos + 1) if depth == 1 and content and text[pos - 1] != "\\" else None
    return None


def _find_span(text, strict=False):
    if text is None or not text.strip():
        return None
    text = _drop_echoed_instructions(_without_next_problem(_without_signoff(_without_loop_tail(_markup(peel(_chat_marks(
        accounting_negatives(roots(plain_unicode(entities(text)))))))))))
    last_box = text.rfind("\\boxed{")
    if last_box >= 0 and braced(text, last_box + len("\\boxed")) is None:
        typo = _unclosed_box(text, last_box + len("\\boxed"))
        if typo:  # `$\boxed{\frac{2}{3}$.`: a brace left out before the closing `$`, not an answer cut off
            return Span("box", typo[0], text, last_box, typo[1])
        return None  # the last box never closes: the answer was cut off while being written
    boxes = _boxes(text)
    if boxes and not boxes[-1][2] and text.count('"answer"') == 0:
        filled = [b for b in boxes if b[2]]
        between = text[filled[-1][1]:boxes[-1][0]] if filled else ""
        words = re.sub(r"\\[\[\]()]|\\boxed\s*\{\s*\}|[$*#_.,:;!\s]+", " ", between).lower().split()
        if not filled or len(words) > 8 or not set(words) <= _FILLER_WORDS:
            return None  # the last box is empty after other words (`\boxed{5}. Wait, that is wrong: \boxed{}`): no answer
        # else an empty box right after the answer (`\boxed{5}\n\n**Final Answer** \boxed{}`) adds nothing
    field = _json_answer(text)
    if field is not None:
        return field
    if re.match(r"\s*(?:```(?:json)?\s*)?\{\s*\"", text) and not re.search(r"\}\s*(?:```)?\s*$", text):
        return None  # a JSON object opened and never closed: cut off before its answer field
    if "<answer>" in text:
        return _inner_span(re.findall(r"<answer>(.*?)(?:</answer>|$)", text, flags=re.DOTALL)[-1])
    explicit = _explicit_span(text, boxes)
    if explicit is None and any(b[2] for b in boxes):
        return None  # boxes that state answers under conditions or cases ("case 1 gives \boxed{6} and case 2 ...")
    if explicit is not None:
        corrected = _CORRECTION.search(text, explicit.end) if explicit.end else None
        if corrected and conclusion_value(text[corrected.start():]) is not None:
            return Span("conclusion", text[corrected.start():])  # the later correction is the answer
        if _alternative_after(text, explicit):
            return None  # "Answer: 12 (confidence 60%). Alternatively 16 (40%).": a hedge between two values
        return (_later_statement(text, explicit) if explicit.kind == "box" and not strict else None) or explicit
    if strict:
        return None
    repl = _repl_span(text) if ">" in text or "(%" in text or "In[" in text else None
    if repl is not None:
        return repl
    bare = text.strip()
    if _bare_formula(code_forms(bare) if re.search(r"\w\(|\*\*", bare) else bare):  # (`Matrix([[1, 2], [0, 1]])` is one formula)
        return Span("formula", re.sub(r"(?<!\\)\.$", "", bare))  # the whole response is a formula: `\frac{10}{9}`
    return _verdict_span(text) or _table_span(text) or Span("conclusion", text)


# A verdict that opens a response (after the question, when it is restated): "Yes, it is possible. For example ...",
# "False. The polynomial ...", "Is the sum of two primes always odd? No: ...", "Not necessarily — take x = 5 ..."
_VERDICT = re.compile(r"\s*(?:[^?\n]{1,300}\?\s*)?[*_]*(yes|no|true|false|not\s+necessarily)\b[*_]*\s*(?:[,.:;!—–]|\s-\s)",
                      re.IGNORECASE)


def _verdict_span(text):
    """The verdict a free-text response opens with (its reasons and examples follow), or None."""
    verdict = _VERDICT.match(text)
    if verdict is None:
        return None
    word = verdict.group(1).lower()
    if word in ("yes", "no") and conclusion_value(text) is not None and not _EXAMPLE.search(text, verdict.end()):
        return None  # "No, it is not 8 -- it is 9.": the value the response goes on to state is its answer
    return Span("field", "No" if word.startswith("not") else word.capitalize())


_EXAMPLE = re.compile(r"\b(?:for\s+example|for\s+instance|e\.g\.|such\s+as|counterexample|take|consider)\b", re.IGNORECASE)


def _explicit_span(text, boxes):
    """A box, a `####` line or an answer phrase (see find_span)."""
    box = _box_span(text)
    if box is not None:
        phrase = _phrase_span(text)  # "... \boxed{200} ... Final Answer: The final answer is $10,455$": the last word wins
        if phrase and phrase.start > max(b[1] for b in boxes) and "final" in text[phrase.start:phrase.end].lower():
            later = reduce_span(phrase)  # ("... the final answer is clearly highlighted" is no answer)
            if later and (LEADING_VALUE.fullmatch(later.strip()) or re.fullmatch(
                    r"\s*\$?\s*[A-Za-z](?:_\{?\w+\}?)?\s*=\s*[^=<>$]+\$?\s*", later) and not re.search(r"(?<![\\A-Za-z])[A-Za-z]{3}", later)):
                return Span("field", later)  # (also `x = 3` after a box of `y = 5` that answered something else)
        return box
    hashes = list(re.finditer(r"####\s*([^\n]+)", text))
    if hashes:
        return Span("line", hashes[-1].group(1).strip(), text, hashes[-1].start(1), hashes[-1].end(1))
    return _phrase_span(text)


_ASKS = re.compile(r"[ \t*]*\n?[ \t]*(?:[^\n]{0,300}\?|(?:find|compute|solve|what|how|calculate|determine|evaluate|simplify|if)\b)",
                   re.IGNORECASE)  # the made-up problem asks something: "How many tiles ...?", "Solve 3x + 1 = 10."
_OWN_SOLUTION = re.compile(r"\n[ \t#*]*(?:solution|answer|A)[ \t*]*[:.]", re.IGNORECASE)


def _without_next_problem(text):
    """The text up to a made-up next problem ("Problem: ...", "Q: ...", "### Question 2.") that starts after an
    answer was stated (a box, an answer phrase, `####`): only the first answer is the response's."""
    for match in _NEXT_PROBLEM.finditer(text):
        head = text[:match.start()]
        if _BOX.search(head) or "####" in head or _phrases(head):
            return head
        if _ASKS.match(text, match.end()) and _OWN_SOLUTION.search(text, match.end()) and conclusion_value(head) is not None:
            return head  # "x = 4.\n\nProblem 2. Solve ...\nSolution. ...": a few-shot block after a stated value
    return text


def _table_span(text):
    """A response that ends with a markdown table: the value in its last row (`| **Total** | **$48** |`,
    `| Result | 84 |`), the cell furthest right that holds a number."""
    lines = [line.strip() for line in text.strip().splitlines()[-60:]]
    if len(lines) < 2 or not (lines[-1].startswith("|") and lines[-1].endswith("|") and lines[-2].startswith("|")):
        return None
    cells = [c.strip() for c in lines[-1].strip("|").split("|")]
    valued = [c for c in cells if re.search(r"\d", c)]
    return Span("line", valued[-1].replace("**", "")) if valued else None
