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
import json
import os
import re
import signal
import sys
import threading
import time

from answer_compare import equivalent, gold_is_valid
from answer_question import (asked_letter, asked_value, family_equal, form_violated, new_value, option_letter, option_value, question_options,
                             question_verdict, restates_question, rounded_equal, rounding_asked)
from answer_span import final_text, find_span, last_boxed  # noqa: F401  (last_boxed: sft.py reads a solution's box)
from answer_value import CURRENCY, reduce_span
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
    answer, kind = _extract(response, strict, think_prefilled)
    if answer is not None and question and (restates_question(answer, question, gold) or form_violated(answer, question)):
        return 0.0  # the expression the question asks to compute, given back unevaluated; a fraction not in lowest terms
    free = not strict and kind in (None, "conclusion", "formula")  # (the free text is read only where no answer is marked)
    lettered = asked_letter(final_text(response, think_prefilled), question) if question and free else None
    if lettered is not None:  # "At what value of x ...?": the value given to x, whatever else the sentence states
        return 1.0 if _is_equiv_unbounded(lettered, gold) else 0.0
    if answer is not None and _is_equiv_unbounded(answer, gold):
        return 1.0
    if not question:
        return 0.0
    # with the question (answer_question.py): a rounding it asks for (`0.6931` for ln 2), the option a value is (`29` is
    # (C)) or a letter stands for, an object defined up to a factor or a parameter, the value it asks about
    options = question_options(question)
    if answer is not None and (rounded_equal(answer, gold, rounding_asked(question))
                               or _is_equiv_unbounded(option_letter(answer, options) or "", gold)
                               or _is_equiv_unbounded(option_value(answer, options) or "", gold)
                               or family_equal(answer, gold, question)):
        return 1.0
    text = final_text(response, think_prefilled)
    readings = [asked_value(text, answer, question, strict=not free)] + ([new_value(text, answer, question)] if free else [])
    if any(r is not None and _is_equiv_unbounded(r, gold) for r in readings):
        return 1.0
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


def math_reward(response, gold, strict=False, think_prefilled=False, timeout_s=DEFAULT_TIMEOUT_S, question=None):
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
              "_choice_reward_unbounded": _choice_reward_unbounded}


def _run_pool(op, arg_lists, workers, timeout_s, memory_limit_gb, counts):
    """Results of op(*args) for each args in arg_lists (None when late or crashed), `workers` processes at a time."""
    results = []
    for kind, value in get_pool(WORKER_MODULE, memory_limit_gb * 2**30).run(op, arg_lists, workers, timeout_s):
        if kind != "ok":
            counts["timeouts" if kind == "timeout" else "errors"] += 1
        results.append(value if kind == "ok" else None)
    return results


def _pool_call(op_name, args, timeout_s):
    return _run_pool(op_name, [args], 1, timeout_s, 4.0, {"timeouts": 0, "errors": 0})[0]


def close_pool():
    """Stop the math grading workers (the next batch starts new ones)."""
    close_pools(WORKER_MODULE)


def score_batch(responses, golds, workers=2, timeout_s=DEFAULT_TIMEOUT_S, ids=None, stats=None,
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
                                    questions[k] if questions else None)
    else:
        results = _run_pool("_math_reward_unbounded", [(responses[k], golds[k], strict, think_prefilled,
                                                        questions[k] if questions else None) for k in todo],
                            workers, timeout_s, memory_limit_gb, counts)
        for k, result in zip(todo, results):
            scores[k] = float(result or 0.0)
    if stats is not None:
        for key, value in counts.items():
            stats[key] = stats.get(key, 0) + value
    return scores


def score_choice_batch(responses, golds, options, workers=2, timeout_s=DEFAULT_TIMEOUT_S, stats=None,
                       memory_limit_gb=4.0, strict=False, think_prefilled=False):
    """_choice_reward_unbounded for each (response, gold letter, options) in worker processes (score_batch's
    pool and deadline; workers=0 grades here under the alarm). Returns a list of floats."""
    counts = {"timeouts": 0, "errors": 0}
    items = [(r, g, o, strict, think_prefilled) for r, g, o in zip(responses, golds, options)]
    if workers <= 0:
        scores = [_bounded(_choice_reward_unbounded, item, timeout_s) or 0.0 for item in items]
    else:
        scores = [float(r or 0.0) for r in _run_pool("_choice_reward_unbounded", items, workers, timeout_s,
                                                     memory_limit_gb, counts)]
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
    code_reward.DEFAULT_TIMEOUT_S), a row with `answer` the math grader (score_batch, timeout_s), a row with `options`
    too the multiple-choice rules (score_choice_batch: GPQA, hub_sets.py). Returns floats in
    [0, 1]; `stats` receives both graders' counts (timeouts, invalid_gold, code_timeouts, sandbox_refusals, ...).
    strict: see extract_answer (math rows only). think_prefilled, and a <think> the response opens itself: one
    rule for math and code (answer_span.final_text): only the text after the reasoning is graded, and a response
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
        part = score_code_batch([final_text(responses[i], think_prefilled) or "" for i in code_rows],
                                [problems[i]["tests"] for i in code_rows],
                                workers=workers, timeout_s=code_timeout_s or CODE_TIMEOUT_S, stats=stats)
        for i, s in zip(code_rows, part):
            scores[i] = s
    return scores


if __name__ == "__main__":
    main()

