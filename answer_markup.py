"""Markup layers around an answer, peeled before the grader looks for its span (answer_span._find_span calls them).

Entry points: entities(text) (HTML character references, read first: `&minus;12`, `&frac34;`, `&radic;3`, `<br>`), and
peel(text), the layers of the document around the statements, each by one rule for its whole kind:
  - a LaTeX document (`\\documentclass ... \\begin{document} ... \\end{document}`) is its body; a macro it defines
    without arguments (`\\newcommand{\\ans}{42}`, `\\def\\ans{42}`) is replaced by its text; sectioning commands are
    headings (`\\section*{Answer}` is `### Answer`), theorem-like environments are paragraphs;
  - text-mode fonts outside math are markdown (`\\textbf{Answer:}` is `**Answer:**`; `\\emph`, `\\textit` are plain);
  - every framing macro is a box (`\\fbox`, `\\framebox[..]`, `\\colorbox{yellow}{..}`, `\\fcolorbox{r}{y}{..}`,
    `\\bbox[..]{..}`, `\\boxed*`, `\\tcbox`, a doubly underlined value); LaTeX's invisible boxes (`\\mbox`, `\\hbox`,
    `\\makebox`, `\\parbox`, ...) are text;
  - an alignment inside display math (aligned, split, gathered, array) is its rows (`&=&` is `=`, `\\hline` dropped),
    each row display math (so the last row is the last statement; a row `&= 630` continues the one above);
  - HTML comments; inline code spans (`` `x = -2` ``), markdown emphasis by underscores (`_x = 5_`), blockquote marks at line starts
    (not in an R session, whose prompt is `>`);
  - footnote marks: a mark (`²`, `[1]`, `[^1]`, `†`, `[†]`) after a value at the end of a line whose footnote (a line
    opening with the same mark) follows: the mark and the footnote are dropped;
  - tool calls (tool_calls): a call of a tool that submits the answer (its name holds "answer", "submit" or "final":
    `final_answer`, `functions.submit({"value": 18})`, OpenAI's `"tool_calls"` with arguments as a JSON string) is
    the statement "The answer is <its one argument>."; other calls and their responses (`<tool_call>`,
    `<tool_response>`) are the tool's work, not the response's statements, and are dropped;
  - an illustration after the answer: a closing fenced block without a language that holds a diagram (several
    lines of numbers or line-drawing characters, no `=`), after text that states a value, is no part of the answer.
"""
import html
import json
import re

from answer_words import outside_math
from latex import braced

_ENTITY = re.compile(r"&(?:#\d{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")


def entities(text):
    """HTML character references read (`&minus;` is a minus sign, `&frac34;` three quarters), `<br>` a line break."""
    if "&" in text and _ENTITY.search(text):
        text = _ENTITY.sub(lambda m: html.unescape(m.group(0)), text)
    return text


_INVISIBLE_BOXES = {"mbox", "hbox", "vbox", "vtop", "makebox", "parbox", "raisebox", "savebox", "sbox", "usebox", "llap", "rlap"}
_FRAME = re.compile(r"\\([A-Za-z]*box(?:ed)?)(\*?)(?![a-zA-Z])")
_COLOR = re.compile(r"[\w!.,:#\s-]{0,40}")


def _frames(text):
    """Every framing macro as `\\boxed{content}` (the last of its brace groups; the ones before it name colours)."""
    for match in reversed(list(_FRAME.finditer(text))[-30:]):
        name = match.group(1)
        if name in _INVISIBLE_BOXES or name == "boxed" and not match.group(2):
            continue
        pos, groups = match.end(), []
        while True:
            option = re.match(r"\s*\[[^\[\]{}]{0,80}\]", text[pos:])
            if option is None:
                break
            pos += option.end()
        while True:
            space = len(text[pos:]) - len(text[pos:].lstrip(" \t"))
            if not text.startswith("{", pos + space):
                break
            group = braced(text, pos + space)
            if group is None:
                break
            groups.append(group[0])
            pos = group[1]
        if groups and all(_COLOR.fullmatch(g) for g in groups[:-1]):
            text = text[:match.start()] + "\\boxed{" + groups[-1] + "}" + text[pos:]
    for match in reversed(list(re.finditer(r"\\underline\s*\{\s*\\underline\s*(?=\{)", text))[-10:]):
        inner = braced(text, match.end())
        outer_end = inner and re.match(r"\s*\}", text[inner[1]:])
        if outer_end:  # a doubly underlined value: the final answer
            text = text[:match.start()] + "\\boxed{" + inner[0] + "}" + text[inner[1] + outer_end.end():]
    return text




def _text_fonts(piece):
    for _ in range(10):
        match = re.search(r"\\(textbf|textit|emph|textsl|textup|underline)\s*(?=\{)", piece)
        group = match and braced(piece, match.end())
        if not group:
            break
        mark = "**" if match.group(1) == "textbf" else ""
        piece = piece[:match.start()] + mark + group[0].strip() + mark + piece[group[1]:]
    return piece


_DEFINITION = re.compile(r"\\(?:newcommand|renewcommand|providecommand)\*?\s*\{?\s*\\([A-Za-z]+)\s*\}?\s*\{([^{}]*)\}"
                         r"|\\def\s*\\([A-Za-z]+)\s*\{([^{}]*)\}")


def _document(text):
    """A LaTeX document's body, its argument-free macros replaced, sections as headings, environments as paragraphs."""
    preamble, _, body = text.partition("\\begin{document}")
    body = body.split("\\end{document}")[0]
    macros = [(a or c, b or d) for a, b, c, d in _DEFINITION.findall(preamble + body)[:20]]
    body = _DEFINITION.sub("", body)
    for name, value in macros:
        body = re.sub(r"\\" + name + r"(?![A-Za-z])\s?", lambda m: value, body)
    body = re.sub(r"\\(?:sub)*section\*?\s*\{([^{}]*)\}|\\paragraph\*?\s*\{([^{}]*)\}", lambda m: "\n### " + (m.group(1) or m.group(2) or "")
                  + "\n", body)
    body = re.sub(r"\\(?:begin|end)\{(?!(?:equation|align|gather|multline|eqnarray|flalign|[pbvBV]?matrix|cases|array|aligned|split)"
                  r"\*?\})[A-Za-z*]+\}(?:\[[^\]]*\])?", "\n", body)
    return re.sub(r"\\(?:maketitle|noindent|par|medskip|bigskip|smallskip|newline)(?![A-Za-z])|(?<=\.)\\ ", " ", body)


_INNER_ALIGNMENT = re.compile(r"(\$\$|\\\[)\s*\\begin\{(aligned|alignedat|split|gathered|array)\}(?:\{[^{}]*\})?(.*?)\\end\{\2\}\s*"
                              r"(?:\.\s*)?(\$\$|\\\])", re.DOTALL)


def _alignment_rows(match):
    body = re.sub(r"\\hline|\\cline\s*\{[^{}]*\}", " ", match.group(3))
    body = re.sub(r"\\\\\s*(?=&?\s*=)", " ", body).replace("&", "")
    return "\n".join("\\[" + row.strip() + "\\]" for row in body.split("\\\\") if row.strip())


_FOOTNOTE_MARK = r"(?:\[\^?[\w†‡*]{1,3}\]|[†‡§]+|[¹²³⁴⁵⁶⁷⁸⁹⁰]+)"
_FOOTNOTE = re.compile(r"^[ \t]*(" + _FOOTNOTE_MARK + r")[ \t]*:?[ \t]+\S[^\n]*$", re.MULTILINE)
_DIAGRAM_BLOCK = re.compile(r"\n```[ \t]*\n((?:[^`\n]*\n){2,60}?)```[ \t]*(?:\n[^\n`]{0,200})?\s*$")


def _is_diagram(block):
    """Lines of numbers set out in space or drawn with line characters (no `=`, at most a word a line in 4)."""
    lines = [line for line in block.split("\n") if line.strip()]
    drawn = [bool(re.search(r"[|/\\^<>_+]|-{2,}", line)) or not re.search(r"[A-Za-z]{3,}", line) for line in lines]
    return "=" not in block and len(lines) >= 2 and sum(drawn) >= 0.75 * len(lines)


_SUBMIT_NAME = re.compile(r"(?:functions\.)?(?:submit|final|give|provide|return)?_?(?:submit|answer|final_answer|respond|finish)(?:_answer)?", re.I)
_TOOL_BLOCK = re.compile(r"<(tool_call|tool_response|function_call|function_response)>(.*?)</\1>", re.S)
_CALL = re.compile(r"(?:<\|python_tag\|>)?(?:functions\.)?([A-Za-z_]\w*)\s*\(\s*(\{.*\}|[^()]*)\s*\)(?:<\|eom_id\|>)?", re.S)


def _argument(arguments):
    """The one value a submitting call passes: its "answer" argument or its only one (a dict, a JSON object text, or
    `answer=18`), as text; None when it passes several."""
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            keyword = re.fullmatch(r"\s*(?:\w+\s*=\s*)?(.+?)\s*", arguments, re.S)
            return keyword.group(1).strip("\"'") if keyword and "," not in keyword.group(1) else None
    if isinstance(arguments, dict):
        arguments = arguments.get("answer", next(iter(arguments.values())) if len(arguments) == 1 else None)
    return None if arguments is None or isinstance(arguments, (dict, list)) else str(arguments)


def _submitted(call):
    """The answer a tool call (a JSON object or its text) submits, else None."""
    try:
        call = json.loads(call) if isinstance(call, str) else call
    except ValueError:
        return None
    if isinstance(call, dict) and "tool_calls" in call and call["tool_calls"]:
        call = call["tool_calls"][-1]
    if isinstance(call, dict) and isinstance(call.get("function"), dict):
        call = call["function"]
    if not isinstance(call, dict) or not _SUBMIT_NAME.fullmatch(str(call.get("name", ""))):
        return None
    return _argument(call.get("arguments", call.get("parameters", call.get("args"))))


def tool_calls(text):
    """Tool calls read as the module docstring says."""
    stripped = text.strip()
    if stripped.startswith("{") and '"name"' in stripped:
        answer = _submitted(stripped)
        if answer is not None:
            return f"The answer is {answer}."
    last_line = stripped.rsplit("\n", 1)[-1].strip()
    call = _CALL.fullmatch(last_line) if last_line.endswith(")") else None
    if call and _SUBMIT_NAME.fullmatch(call.group(1)):
        answer = _argument(call.group(2))
        if answer is not None:
            return stripped[:len(stripped) - len(last_line)] + f"The answer is {answer}."
    elif call and "_" in call.group(1) and re.search(r"[\"'{=]|\d", call.group(2)):
        return stripped[:len(stripped) - len(last_line)]  # `check_answer(55)`: a tool's call, not the response's statement
    if "<" in text and _TOOL_BLOCK.search(text):
        def block(m):
            answer = _submitted(m.group(2).strip()) if m.group(1).endswith("call") else None
            return f"The answer is {answer}." if answer is not None else " "
        text = _TOOL_BLOCK.sub(block, text)
    return text


def peel(text):
    """The text with the markup layers of the module docstring peeled."""
    text = tool_calls(text) if '"name"' in text or "<tool_" in text or "<function_" in text or text.rstrip().endswith(")") else text
    if "\\begin{document}" in text:
        text = _document(text)
    if "\\" in text:
        text = _frames(text) if "box" in text or "\\underline" in text else text
        text = _INNER_ALIGNMENT.sub(_alignment_rows, text) if "\\begin{" in text else text
        if re.search(r"\\(?:textbf|textit|emph|textsl|textup|underline)\s*\{", text):
            text = outside_math(text, _text_fonts)
    if "<!--" in text:
        text = re.sub(r"<!--.*?-->", " ", text, flags=re.DOTALL)  # an HTML comment
    if "`" in text:
        text = re.sub(r"(?<![`\w])`([^`\n]{1,200})`(?![`\w])", r"\1", text)
    if "_" in text:
        text = outside_math(text, lambda t: re.sub(r"(?<![\w\\_])(__?)(?=[^\s_])([^_\n]{1,200}?)(?<=[^\s_])\1(?![\w_])", r"\2", t))
    if ">" in text and not re.search(r"^[ \t]*\[\d+\]", text, re.MULTILINE) and re.search(r"^[ \t]*>[ \t]", text, re.MULTILINE):
        text = re.sub(r"^[ \t]*>[ \t]?", "", text, flags=re.MULTILINE)  # (`> 12`; not an R session's prompt)
    for note in list(_FOOTNOTE.finditer(text))[-5:][::-1]:
        mark = re.escape(note.group(1))
        before = text[:note.start()]
        marked = re.sub(r"(?<=[\w$*)}.])" + mark + r"(?=[ \t]*(?:\*\*)?[ \t]*[.!]?[ \t]*(?:\*\*)?[ \t]*(?:\n|$))", "", before)
        if marked != before:
            text = marked + text[note.end():]
    if "```" in text:
        block = _DIAGRAM_BLOCK.search(text)
        if block and _is_diagram(block.group(1)) and re.search(r"\d", text[:block.start()]):
            text = re.sub(r"(?:^|(?<=[.!?\n]))[^.!?\n]*:\s*$", "", text[:block.start()])  # (and the sentence introducing it)
    return text
