"""Math answer checking: the reward GRPO learns from and the judge of every eval number. It is built to agree with a
careful human grader on what real models write, and to fail closed:

    math_reward(response, gold) = 1.0  iff  is_equiv(extract_answer(response), gold)

The grader is a pipeline of three stages, each in a file of one concern (data flows one way, down this list):
  1. answer_span.py     find the span the response commits to: a JSON "answer" field, <answer>, \\boxed{}, `####`,
                        an answer phrase (also in other languages), a table's last row, a verdict, a conclusion.
  2. answer_value.py    reduce that span to ONE value or to no answer, the same way whatever found it: sentences,
                        hedges and bounds (each attached to the value it qualifies), cases, rejected values, units,
                        restatements, numbers in words, Unicode mathematics.
  3. answer_compare.py  compare two values (with latex.py: cleaning, units, and a parser that builds sympy trees).
extract_answer runs stages 1-2; is_equiv runs stage 3; math_reward all three. This file keeps the scoring surface:
math_reward, is_equiv, extract_answer, score_batch (worker processes), score_problems (math or code by the row),
format_reward, gold_is_valid, and the command line (`python reward.py --response ... --gold ...`).

Rewards of the user's own (train.py / eval.py `--reward math:1.0,my_rewards.py:brevity:0.1`): parse_reward_spec
reads the flag, check_reward_functions imports each FUNCTION(response: str, row: dict) -> float in a grading worker
(refused at start when it cannot be used), score_components runs every component (a user's function in the same
killable workers as the grader; a failure scores 0 and is counted), combine weighs them, component_metrics and
all_failed feed train.py's log and its stop when every call of a step failed.

Training uses strict=True (train.py `--strict_answers 1`, its default: only explicit answers are rewarded: stage 1
skips the free-text fallbacks); eval.py uses the default mode (`--strict_answers 0`). score_problems passes each
problem's text: an expression the question asks to compute, given back unevaluated, is not paid; a decimal for an
exact gold is paid when the question asks for that rounding; a value is the option it equals; a yes-or-no question's
verdict is read from the last statement (answer_compare.rounded_equal, option_letter; answer_value.question_verdict).

Safety: untrusted text is never evaluated. latex.py's parser builds the sympy tree itself (no `eval`, `sympify` or
`parse_expr`, which run Python), and refuses numbers too large to compute (power towers, huge factorials,
`\\sin(e^{e^{e^5}})`). Every check is bounded in time: `score_batch` grades in worker processes killed at a hard
timeout (SIGKILL also stops C-level big-integer work); in-process calls (`math_reward`, `is_equiv`) run under an
alarm in the main thread and in a worker process elsewhere.
Measured agreement with real model outputs: README "Grader accuracy" (`python bench.py grader`).
"""
import argparse
import importlib
import importlib.util
import inspect
import json
import math
import numbers
import os
import re
import signal
import sys
import threading
import time
import traceback

from answer_compare import equivalent, gold_is_valid
from answer_question import (asked_letter, asked_value, decision, family_equal, form_violated, intercept_equal, new_value, other_unit,
                             option_letter, option_value, question_choice, question_options, response_options,
                             question_verdict, restates_question, rounded_equal, rounding_asked, same_span, without_restated_side)
from answer_span import after_reasoning, final_text, find_span, last_boxed  # noqa: F401  (last_boxed: sft.py)
from answer_value import CURRENCY, reduce_span, signed_decrease
from code_reward import DEFAULT_TIMEOUT_S as CODE_TIMEOUT_S
from code_reward import score_code_batch
from latex import MAX_ANSWER_CHARS
from workers import close_pools, get_pool

DEFAULT_TIMEOUT_S = 5.0      # hard limit per graded item (worker processes and in-process alarm)


def extract_answer(response, strict=False, think_prefilled=False):
    """The final answer a response commits to (a string), or None: the grader's first two stages.
    strict=True: only explicit answers (JSON field, <answer>, box, ####, answer phrase), no free-text fallback;
    think_prefilled: the prompt itself opened a `<think>` block (see final_text)."""
    return _extract(response, strict, think_prefilled)[0]


def _extract(response, strict=False, think_prefilled=False):
    """(the answer or None, the kind of span it was found in or None): see extract_answer."""
    span = find_span(final_text(response, think_prefilled), strict)   # 1. the span the response commits to
    found = reduce_span(span) if span is not None else None           # 2. its one value, or no answer
    if found is None or not found.strip() or len(found) > MAX_ANSWER_CHARS:
        return None, span and span.kind
    found = found.strip()
    inline = re.fullmatch(r"\$([^$]+)\$|\\\((.+)\\\)", found, flags=re.DOTALL)  # "$42$" -> "42"
    found = (inline.group(1) or inline.group(2)).strip() if inline else found
    return found.replace(CURRENCY, "\\$"), span.kind  # a dollar sign found in the text is shown as one


def _is_equiv_unbounded(pred, gold):
    return equivalent(pred, gold)  # (cleans both; never raises: unsure means not equal)


def _plain_text(text):
    return " ".join(text.strip().rstrip(".").split()).lower()


def _choice_reward_unbounded(response, gold, options, strict=False, think_prefilled=False):
    """A multiple-choice question (a row with `options`: letter -> option text; gold: the right letter, as
    hub_sets.multiple_choice_sample writes it): 1.0 if the response commits to the right letter by the grader's
    choice rules (`C`, `(C)`, `C) text`; two letters are a hedge, 0), or, committing to no letter, to the text of
    the right option and of no other (the text alike, or an equal value)."""
    span = find_span(final_text(response, think_prefilled), strict)
    candidates = [a for a in (extract_answer(response, strict, think_prefilled), span and span.text.strip()) if a]
    for answer in candidates:   # the reduced answer, then the span as written (`B) carbon dioxide` reduces to none)
        letters = [letter for letter in options if _is_equiv_unbounded(answer, letter)]
        if letters:
            return 1.0 if letters == [gold] else 0.0
    for answer in candidates:
        texts = [letter for letter, text in options.items()
                 if _plain_text(answer) == _plain_text(text) or _is_equiv_unbounded(answer, text)]
        if texts:
            return 1.0 if texts == [gold] else 0.0
    return 0.0


def _math_reward_unbounded(response, gold, strict=False, think_prefilled=False, question=None):
    paid = _paid(response, gold, strict, think_prefilled, question)
    if paid and question and other_unit(final_text(response, think_prefilled), gold, question):
        return 0.0  # "Convert 77°F to degrees Celsius." -> "25 °F": the gold's number, in a unit the question does not ask for
    return paid


def _paid(response, gold, strict, think_prefilled, question):
    if re.search(r"\bH_?\{?[0₀o]|\bnull\b|hypothes", gold, re.I) and decision(gold):  # "Fail to reject $H_0$": the
        return 1.0 if decision(final_text(response, think_prefilled)) == decision(gold) else 0.0  # decision, in any words
    answer, kind = _extract(response, strict, think_prefilled)
    if answer is not None and question and (restates_question(answer, question, gold) or form_violated(answer, question, gold)):
        return 0.0  # the expression the question asks to compute, given back unevaluated; not the form it asks for
    answer = without_restated_side(answer, question) or answer  # `\frac{2}{\sqrt2} \approx 1.41`: the question, then 1.41
    free = not strict and kind in (None, "conclusion", "formula")  # (the free text is read only where no answer is marked)
    lettered = asked_letter(final_text(response, think_prefilled), question) if question and free else None
    if lettered is not None:  # "At what value of x ...?": the value given to x, whatever else the sentence states
        return 1.0 if _is_equiv_unbounded(lettered, gold) else 0.0
    if answer is not None and _is_equiv_unbounded(answer, gold):
        return 1.0
    text = final_text(response, think_prefilled)
    if answer is not None and re.fullmatch(r"\s*\(?[A-E]\)?\s*", answer) and not (question and question_options(question)) \
            and _is_equiv_unbounded(option_value(answer, response_options(text)) or "", gold):
        return 1.0  # "A. 5  B. 6  C. 7  D. 30 ... Answer: C": the value of the option the response lists and picks
    if answer is not None and "%" in answer and _is_equiv_unbounded(signed_decrease(text) or "", gold):
        return 1.0  # "i.e. a 25% decrease" for the percent change -25%
    if not question:
        return 0.0
    # with the question (answer_question.py): a rounding it asks for (`0.6931` for ln 2), the option a value is (`29` is
    # (C)) or a letter stands for, an object defined up to a factor or a parameter, the value it asks about
    options = question_options(question)
    if answer is not None and (rounded_equal(answer, gold, rounding_asked(question))
                               or _is_equiv_unbounded(option_letter(answer, options) or "", gold)
                               or _is_equiv_unbounded(option_value(answer, options) or "", gold)
                               or family_equal(answer, gold, question) or same_span(answer, gold, question)
                               or intercept_equal(answer, gold, question)):
        return 1.0
    readings = [asked_value(text, answer, question, strict=not free)] + ([new_value(text, answer, question)] if free else [])
    readings = [without_restated_side(r, question) or r for r in readings if r is not None]  # (never the question's own side)
    if any(_is_equiv_unbounded(r, gold) for r in readings):
        return 1.0
    choice = question_choice(text, question) if free else None
    if choice is not None and _is_equiv_unbounded(choice, gold):
        return 1.0  # "Which is larger, $2^{30}$ or $3^{20}$?" -> "so $3^{20} > 2^{30}$"; "... so it is unlikely."
    verdict = question_verdict(text, question) if not strict else None  # (strict: no free text)
    return 1.0 if verdict and _is_equiv_unbounded(verdict, gold) else 0.0


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


def math_reward(response, gold, strict=False, think_prefilled=False, timeout_s=DEFAULT_TIMEOUT_S, *, question=None):
    """1.0 if the answer extracted from `response` equals `gold`, else 0.0 (also when the check runs past
    timeout_s). strict / think_prefilled: see extract_answer. question: the problem's text, when known: an answer
    that gives back the expression it asks to compute or simplify is not paid (answer_compare.restates_question); a
    rounding, the options and a yes-or-no verdict it asks for are read (see the module docstring)."""
    return _bounded(_math_reward_unbounded, (response, gold, strict, think_prefilled, question), timeout_s) or 0.0


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
WORKER_MODULE = "reward"   # the module whose WORKER_OPS the grading workers import and serve (workers.py)
WORKER_OPS = {"_math_reward_unbounded": _math_reward_unbounded, "_is_equiv_unbounded": _is_equiv_unbounded,
              "_choice_reward_unbounded": _choice_reward_unbounded}   # and --reward's two ops (added below)


def _run_pool(op, arg_lists, workers, timeout_s, memory_limit_gb, *, counts):
    """Results of op(*args) for each args in arg_lists (None when late or crashed), `workers` processes at a time."""
    results = []
    for kind, value in get_pool(WORKER_MODULE, memory_limit_gb * 2**30).run(op, arg_lists, workers, timeout_s):
        if kind != "ok":
            counts["timeouts" if kind == "timeout" else "errors"] += 1
        results.append(value if kind == "ok" else None)
    return results


def _pool_call(op_name, args, timeout_s):
    return _run_pool(op_name, [args], 1, timeout_s, 4.0, counts={"timeouts": 0, "errors": 0})[0]


def close_pool():
    """Stop the math grading workers (the next batch starts new ones)."""
    close_pools(WORKER_MODULE)


def score_batch(responses, golds, workers=2, timeout_s=DEFAULT_TIMEOUT_S, ids=None, *, stats=None,
                memory_limit_gb=4.0, strict=False, think_prefilled=False, questions=None):
    """math_reward for each (response, gold) in parallel worker processes, each item with a hard timeout;
    questions[k] (optional) is the problem text of item k (see math_reward).

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
            scores[k] = math_reward(responses[k], golds[k], strict, think_prefilled, timeout_s,
                                    question=questions[k] if questions else None)
    else:
        results = _run_pool("_math_reward_unbounded", [(responses[k], golds[k], strict, think_prefilled,
                                                        questions[k] if questions else None) for k in todo],
                            workers, timeout_s, memory_limit_gb, counts=counts)
        for k, result in zip(todo, results):
            scores[k] = float(result or 0.0)
    if stats is not None:
        for key, value in counts.items():
            stats[key] = stats.get(key, 0) + value
    return scores


def score_choice_batch(responses, golds, options, workers=2, timeout_s=DEFAULT_TIMEOUT_S, *, stats=None,
                       memory_limit_gb=4.0, strict=False, think_prefilled=False):
    """_choice_reward_unbounded for each (response, gold letter, options) in worker processes (score_batch's
    pool and deadline; workers=0 grades here under the alarm). Returns a list of floats."""
    counts = {"timeouts": 0, "errors": 0}
    items = [(r, g, o, strict, think_prefilled) for r, g, o in zip(responses, golds, options)]
    if workers <= 0:
        scores = [_bounded(_choice_reward_unbounded, item, timeout_s) or 0.0 for item in items]
    else:
        scores = [float(r or 0.0) for r in _run_pool("_choice_reward_unbounded", items, workers, timeout_s,
                                                     memory_limit_gb, counts=counts)]
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


def score_problems(responses, problems, workers=2, timeout_s=DEFAULT_TIMEOUT_S, code_timeout_s=None, *, stats=None,
                   strict=False, think_prefilled=False):
    """Grade responses[i] against problems[i] by the problem's data: a row with `tests` gets the code reward (its
    program run against the tests in a sandbox, hard limit code_timeout_s seconds per item, default
    code_reward.DEFAULT_TIMEOUT_S), a row with `answer` the math grader (score_batch, timeout_s), a row with `options`
    too the multiple-choice rules (score_choice_batch: GPQA, hub_sets.py). Returns floats in
    [0, 1]; `stats` receives both graders' counts (timeouts, invalid_gold, code_timeouts, sandbox_refusals, ...).
    strict: see extract_answer (math rows only). think_prefilled, and a <think> the response opens itself: one
    rule for math and code (answer_span.after_reasoning): only the text after the reasoning is graded, and a response
    that never closes its reasoning has no answer -- for code, no program (a draft code block written while
    thinking is not the answer), counted in stats as `code_no_program`."""
    if len(responses) != len(problems):
        raise ValueError(f"{len(responses)} responses but {len(problems)} problems")
    scores = [0.0] * len(responses)
    is_code = [p.get("tests") is not None for p in problems]
    choice_rows = [i for i, c in enumerate(is_code) if not c and problems[i].get("options")]  # multiple choice
    math_rows = [i for i, c in enumerate(is_code) if not c and not problems[i].get("options")]
    code_rows = [i for i, c in enumerate(is_code) if c]
    if choice_rows:
        part = score_choice_batch([responses[i] for i in choice_rows], [problems[i]["answer"] for i in choice_rows],
                                  [problems[i]["options"] for i in choice_rows], workers=workers, timeout_s=timeout_s,
                                  stats=stats, strict=strict, think_prefilled=think_prefilled)
        for i, s in zip(choice_rows, part):
            scores[i] = s
    if math_rows:
        part = score_batch([responses[i] for i in math_rows], [problems[i]["answer"] for i in math_rows], workers=workers,
                           timeout_s=timeout_s, ids=[problems[i]["id"] for i in math_rows], stats=stats,
                           strict=strict, think_prefilled=think_prefilled,
                           questions=[problems[i].get("problem") for i in math_rows])
        for i, s in zip(math_rows, part):
            scores[i] = s
    if code_rows:
        # tests under a published protocol read the whole response by its own rule (protocols.extract_program)
        part = score_code_batch([responses[i] if isinstance(problems[i]["tests"], dict) and problems[i]["tests"].get(
                                 "protocol") else after_reasoning(responses[i], think_prefilled) or "" for i in code_rows],
                                [problems[i]["tests"] for i in code_rows],
                                workers=workers, timeout_s=code_timeout_s or CODE_TIMEOUT_S, stats=stats)
        for i, s in zip(code_rows, part):
            scores[i] = s
    return scores


def zero_truncated(scores, truncated):
    """The truncation rule of training: a response cut off at the length limit (truncated[i] True: vLLM's
    finish_reason "length") scores 0, even with an early \\boxed{} (DeepScaleR, DAPO): an unfinished response has
    not committed to an answer. train.py applies it to every term of the default reward (correctness, format);
    with --reward, score_components(skip=truncated) gives the same 0 without calling the components.
    scores, truncated: equal-length sequences. Returns a new list of floats."""
    if len(scores) != len(truncated):
        raise ValueError(f"{len(scores)} scores but {len(truncated)} truncation flags")
    return [0.0 if cut else float(score) for score, cut in zip(scores, truncated)]


# ------------------------------------------------------------------------------------------------------------
# --reward: the rewards a run trains on, named on the command line (train.py, eval.py)
# ------------------------------------------------------------------------------------------------------------
BUILTIN_REWARDS = {   # name -> what it pays; any other component is FUNCTION(response: str, row: dict) -> float
    "math": "1 for a correct final answer, the math grader (rows with an answer; multiple choice: rows with options)",
    "code": "1 when the program passes every test in the sandbox (rows with tests: code_reward.py)",
    "format": "1 for the <think>...</think> <answer>...</answer> format, strict (format_reward)",
    "format_loose": "1 for at least one <think> block and one <answer> block, in that order (format_reward)",
}
LOAD_TIMEOUT_S = 120.0   # a grading worker's import of a reward file (its items' clocks start after it)
MAX_ERROR_CHARS = 4000   # of a failure's traceback kept for the message that stops a run (its end: the error)


class RewardFunctionError(RuntimeError):
    """Every call of a reward function failed in one step: the run stops rather than train on zeros."""


def parse_reward_spec(spec):
    """--reward text -> components [{"name", "spec", "source", "function", "weight"}], comma-separated:
        math, code, format, format_loose    a built-in (BUILTIN_REWARDS); source None
        path/to/file.py:FUNCTION            a function in a Python file, imported by its path (source: absolute path)
        package.module:FUNCTION             a function in a module importable from the trainer's sys.path
    each optionally followed by :WEIGHT (a number; default 1): 'math:1.0,my_rewards.py:brevity:0.1'. A component
    is named after its function (metrics reward/<name>/mean, reward/<name>/errors): two of one name are refused.
    A file path holding ':' or ',' cannot be written here (link the file elsewhere). ValueError says what is wrong."""
    components = []
    for item in (part.strip() for part in spec.split(",")):
        if not item:
            raise ValueError(f"--reward {spec!r}: an empty component (two commas, or one at an end)")
        parts = item.split(":")
        weight = 1.0
        if len(parts) > 1 and not parts[-1].isidentifier():   # a trailing number is the weight ('inf' is a name)
            try:
                weight = float(parts.pop())
            except ValueError:
                raise ValueError(f"--reward {item!r}: {item.rsplit(':', 1)[1]!r} is neither a weight (a number) nor "
                                 f"a function name") from None
            if not math.isfinite(weight):
                raise ValueError(f"--reward {item!r}: the weight must be a finite number")
        if len(parts) == 1:
            if parts[0] not in BUILTIN_REWARDS:
                raise ValueError(f"--reward {item!r}: not a built-in reward ({', '.join(BUILTIN_REWARDS)}); a function "
                                 f"of your own is FILE.py:FUNCTION or module:FUNCTION")
            source, function = None, parts[0]
        elif len(parts) == 2:
            source, function = parts
            if not function.isidentifier():
                raise ValueError(f"--reward {item!r}: {function!r} is not a function name")
            if source.endswith(".py"):
                source = os.path.abspath(source)
            elif not all(name.isidentifier() for name in source.split(".")):
                raise ValueError(f"--reward {item!r}: {source!r} is neither a .py file nor a module name")
        else:
            raise ValueError(f"--reward {item!r}: expected NAME[:WEIGHT], FILE.py:FUNCTION[:WEIGHT] or "
                             f"module:FUNCTION[:WEIGHT]: {parts[-1]!r} is not a weight (a number), and a file path "
                             f"holding ':' is not supported")
        if any(c["name"] == function for c in components):
            raise ValueError(f"--reward {spec!r}: two components named {function!r} (each is logged under its name: "
                             f"rename one function)")
        components.append({"name": function, "spec": item, "source": source, "function": function, "weight": weight})
    return components


def needs_gold(components):
    """Do the rows need a gold answer or tests (data.load_dataset's require_answer)? Only the built-in graders
    read them: rows of a task scored only by the user's functions need just a problem."""
    return components is None or any(c["name"] in ("math", "code") for c in components)


def check_reward_functions(components, memory_limit_gb=4.0):
    """Import every user's function where it will run, in a grading worker: None, or an error naming the component,
    the file and the error (its traceback: a file that cannot be imported, a missing function, one that cannot be
    called as FUNCTION(response, row))."""
    user = [c for c in components if c["source"] is not None]
    if not user:
        return None
    outcomes = get_pool(WORKER_MODULE, memory_limit_gb * 2**30).run(
        "_load_reward_function", [(c["source"], c["function"]) for c in user], 1, LOAD_TIMEOUT_S)
    for c, (kind, value) in zip(user, outcomes):
        why = value if kind == "ok" else f"importing it took more than {LOAD_TIMEOUT_S:g} s" if kind == "timeout" \
            else f"the grading worker failed ({value})"
        if why:
            return f"--reward {c['spec']}: cannot use {c['function']} from {c['source']}:\n{why}"
    return None


def check_rows(components, problems, where="the data"):
    """None, or why these rows cannot be graded by the built-in graders asked for: `math` grades rows with an answer,
    `code` rows with tests; a set holding rows of a kind no component of the spec grades is refused (its rows would
    all score 0)."""
    names = {c["name"] for c in components}
    code = sum(p.get("tests") is not None for p in problems)
    if "math" in names and "code" not in names and code:
        return f"{where}: {code} rows are code problems (tests), which --reward math cannot grade: add `code`"
    if "code" in names and "math" not in names and code < len(problems):
        return f"{where}: {len(problems) - code} rows have no tests, which --reward code cannot grade: add `math`"
    return None


_LOADED = {}   # in the process that calls them (a grading worker): source or (source, function) -> object or error


def _traceback_text(exc):
    """The error as Python prints it, without the frames of this file or of importlib (the user's own frames)."""
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if f.filename != __file__ and not f.filename.startswith("<frozen importlib")]
    text = "".join(["Traceback (most recent call last):\n"] * bool(frames) + traceback.format_list(frames) +
                   traceback.format_exception_only(type(exc), exc))
    return text if len(text) <= MAX_ERROR_CHARS else "...\n" + text[-MAX_ERROR_CHARS:]


def _import_source(source):
    """A .py file imported by its path (its folder is NOT put on sys.path), else a module from sys.path."""
    if not source.endswith(".py"):
        return importlib.import_module(source)
    if not os.path.isfile(source):
        raise ImportError(f"no such file: {source}")
    name = f"user_reward_{len(_LOADED)}_{os.path.basename(source)[:-3]}"
    spec = importlib.util.spec_from_file_location(name, source)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module   # what dataclasses and pickle look up while it runs
    spec.loader.exec_module(module)
    return module


def _reward_function(source, function):
    """The user's function, its file imported once per process; or, when it cannot be used, the text of the error
    (a traceback; a missing function lists those the file defines; a signature that cannot take (response, row))."""
    if (source, function) in _LOADED:
        return _LOADED[source, function]
    try:
        if source not in _LOADED:
            _LOADED[source] = _import_source(source)
        module = _LOADED[source]
        if isinstance(module, str):
            return module
        fn = getattr(module, function, None)
        if not callable(fn):
            defined = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_") and
                             getattr(v, "__module__", None) == module.__name__)
            raise AttributeError(f"{source} has no function {function!r} (it defines: "
                                 f"{', '.join(defined) or 'no function'})")
        try:
            inspect.signature(fn).bind("response", {})
        except TypeError:
            raise TypeError(f"{function}{inspect.signature(fn)} cannot be called as {function}(response, row)") \
                from None
        except ValueError:   # no signature to read (a builtin): its calls will say
            pass
        _LOADED[source, function] = fn
    except (Exception, SystemExit) as exc:  # noqa: BLE001 -- any error of the user's file is its message
        _LOADED.setdefault(source, _traceback_text(exc))   # a file that cannot be imported: every call says so
        _LOADED[source, function] = _traceback_text(exc)
    return _LOADED[source, function]


def _load_reward_function(source, function):
    """Worker op: import the user's function; None, or the error text."""
    fn = _reward_function(source, function)
    return fn if isinstance(fn, str) else None


def _checked_reward(value):
    """[float, None] for a finite real number (bool, int, float, numpy scalars), else [None, what it returned]."""
    if not isinstance(value, numbers.Real):
        return [None, f"returned {type(value).__name__} {repr(value)[:80]}, not a number (return a float)"]
    try:
        value = float(value)
    except (OverflowError, ValueError) as exc:
        return [None, f"returned a number that is not a float ({exc})"]
    return [value, None] if math.isfinite(value) else [None, f"returned {value} (a reward must be finite)"]


def _custom_reward_unbounded(source, function, response, row):
    """Worker op: [reward, None] from the user's function(response, row), or [None, why it failed]."""
    fn = _reward_function(source, function)
    if isinstance(fn, str):
        return [None, fn]
    try:
        value = fn(response, row)
    except (Exception, SystemExit) as exc:  # noqa: BLE001 -- the user's error fails its item, never the batch
        return [None, _traceback_text(exc)]
    return _checked_reward(value)


WORKER_OPS.update(_load_reward_function=_load_reward_function, _custom_reward_unbounded=_custom_reward_unbounded)


def score_custom_batch(component, responses, rows, workers=2, timeout_s=DEFAULT_TIMEOUT_S, *, memory_limit_gb=4.0):
    """A user's FUNCTION(responses[k], rows[k]) for each k in the grading workers, under score_batch's hard
    per-item timeout (a late item's worker is SIGKILLed). rows: the dataset rows (dicts; values JSON cannot carry
    arrive as their str). Returns (scores, failures): a failed call -- an exception, a timeout, a dead worker, a
    value that is NaN, infinite or not a number -- scores 0.0 and failures[k] says why (else None).
    workers=0 calls it in this process, under the alarm."""
    source, function = component["source"], component["function"]
    items = [(source, function, response, json.loads(json.dumps(row, default=str)))
             for response, row in zip(responses, rows)]
    if workers <= 0:
        outcomes = []
        for item in items:
            result = _bounded(_custom_reward_unbounded, item, timeout_s)
            outcomes.append(("ok", result) if result is not None else ("timeout", None))
    elif items:
        pool = get_pool(WORKER_MODULE, memory_limit_gb * 2**30)
        # each worker imports the file before the items' clocks start (a worker that replaces a killed one
        # imports it within its next item's time: keep a reward file's imports light)
        pool.run("_load_reward_function", [(source, function)] * min(workers, len(items)), workers, LOAD_TIMEOUT_S)
        outcomes = pool.run("_custom_reward_unbounded", items, workers, timeout_s)
    else:
        outcomes = []
    scores, failures = [], []
    for kind, value in outcomes:
        if kind == "ok" and value[1] is None:
            scores.append(float(value[0]))
            failures.append(None)
            continue
        scores.append(0.0)
        failures.append(value[1] if kind == "ok" else
                        f"timed out: still running after {timeout_s:g} s (--reward_timeout_s); its worker was killed"
                        if kind == "timeout" else f"the grading worker failed: {value}")
    return scores, failures


def score_components(responses, problems, components, workers=2, timeout_s=DEFAULT_TIMEOUT_S, *,
                     code_timeout_s=None, stats=None, strict=False, think_prefilled=False, skip=None):
    """Each component of a --reward spec on responses[i] against problems[i] (the dataset row, every column):
    {name: [float per response]}, unweighted. math grades the rows with an answer and code the rows with tests
    (score_problems), each 0 on the other kind; a user's function scores every row (score_custom_batch). skip[i]
    True: response i scores 0 from every component, uncalled (train.py: a truncated response).
    stats (a dict) receives, per component: reward/<name>/sum, /responses, /calls, /errors (failed calls of a
    user's function), and /error: the first failure's text (its traceback), plus the built-in graders' counts."""
    n = len(responses)
    if len(problems) != n:
        raise ValueError(f"{n} responses but {len(problems)} problems")
    todo = [i for i in range(n) if not (skip and skip[i])]
    is_code = [p.get("tests") is not None for p in problems]
    stats = {} if stats is None else stats
    scores = {}
    for c in components:
        name, values, failures = c["name"], [0.0] * n, []
        if name in ("math", "code"):
            rows = [i for i in todo if is_code[i] == (name == "code")]
            part = score_problems([responses[i] for i in rows], [problems[i] for i in rows], workers=workers,
                                  timeout_s=timeout_s, code_timeout_s=code_timeout_s, stats=stats, strict=strict,
                                  think_prefilled=think_prefilled) if rows else []
        elif name in ("format", "format_loose"):
            rows = todo
            part = [format_reward(responses[i], "strict" if name == "format" else "loose") for i in rows]
        else:
            rows = todo
            part, failures = score_custom_batch(c, [responses[i] for i in rows], [problems[i] for i in rows],
                                                workers=workers, timeout_s=timeout_s)
        for i, value in zip(rows, part):
            values[i] = float(value)
        scores[name] = values
        errors = [why for why in failures if why is not None]
        for key, value in (("sum", sum(values)), ("responses", n), ("calls", len(rows) if c["source"] else 0),
                           ("errors", len(errors))):
            stats[f"reward/{name}/{key}"] = stats.get(f"reward/{name}/{key}", 0) + value
        if errors and f"reward/{name}/error" not in stats:
            stats[f"reward/{name}/error"] = errors[0]
    return scores


def combine(scores, components):
    """The reward of each response: sum over components of weight x score (unweighted scores: score_components)."""
    n = len(next(iter(scores.values()))) if scores else 0
    return [sum(c["weight"] * scores[c["name"]][i] for c in components) for i in range(n)]


def component_metrics(totals, components):
    """reward/<name>/mean per component (unweighted, over every response of the step) and reward/<name>/errors
    per user's function (its failed calls), from stats summed over the step's calls and ranks (score_components)."""
    metrics = {}
    for c in components:
        name = c["name"]
        metrics[f"reward/{name}/mean"] = totals.get(f"reward/{name}/sum", 0.0) / \
            max(totals.get(f"reward/{name}/responses", 0), 1)
        if c["source"] is not None:   # a user's function (the built-in graders count theirs: reward/grader_timeouts)
            metrics[f"reward/{name}/errors"] = int(totals.get(f"reward/{name}/errors", 0))
    return metrics


def all_failed(totals, stats, components, where):
    """None, or the message that stops a run: a user's function whose every call failed (summed totals), with its
    own error (this process's first failure, when it has one)."""
    for c in components:
        name = c["name"]
        calls = totals.get(f"reward/{name}/calls", 0)
        if c["source"] and calls and totals.get(f"reward/{name}/errors", 0) >= calls:
            return (f"{where}: every call of the reward function {c['function']} ({c['spec']}) failed ({int(calls)} of "
                    f"{int(calls)}): stopping rather than train on rewards of 0. Its error"
                    + (f" (the first failing response):\n{stats[f'reward/{name}/error']}"
                       if f"reward/{name}/error" in stats else ": on another rank"))
    return None


if __name__ == "__main__":
    main()
