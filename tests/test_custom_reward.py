"""Your task, your reward (issue 44): `--reward` specs, user functions in the grading workers, each failure kind,
the stop when every call of a step fails, the refusal at start (dry runs too), `--template` files, the metrics keys,
and the Countdown example trained end to end for a few steps."""
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

import data
import eval as evaluation
import reward
import train
from tiny_model import TOY_FLAGS  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "countdown"

USER_FILE = '''
import math
import time


def length_over_ten(response, row):
    return len(response) / 10


def bonus(response, row):               # every column of the row arrives: here an extra one
    return float(row["bonus"])


def whole_row(response, row):
    return 1.0 if (row["problem"], row["answer"], row["numbers"]) == ("p", "7", [1, 2]) else 0.0


def raises(response, row):
    raise ValueError("the user's own message about " + response)


def hangs(response, row):
    time.sleep(600)


def gives_nan(response, row):
    return math.nan


def gives_inf(response, row):
    return -math.inf


def gives_text(response, row):
    return "1.0"


def gives_none(response, row):
    return None


def raises_on_odd(response, row):     # the warmed-up tiny model answers a random digit: about half fail
    if any(digit in response for digit in "13579"):
        raise KeyError("odd")
    return 1.0


def one_argument(response):
    return 1.0
'''


@pytest.fixture(scope="module")
def user_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("user") / "my_rewards.py"
    path.write_text(USER_FILE)
    return str(path)


def component(user_file, function):
    return reward.parse_reward_spec(f"{user_file}:{function}")[0]


# ------------------------------------------------------------------------------------------------------------
# The spec
# ------------------------------------------------------------------------------------------------------------
def test_spec_parser_reads_every_form(user_file):
    parsed = reward.parse_reward_spec(f"math:1.0, {user_file}:length_over_ten:0.1,pkg.mod:fn:-2,format,code:1e-1")
    assert [(c["name"], c["source"], c["function"], c["weight"]) for c in parsed] == [
        ("math", None, "math", 1.0), ("length_over_ten", user_file, "length_over_ten", 0.1),
        ("fn", "pkg.mod", "fn", -2.0), ("format", None, "format", 1.0), ("code", None, "code", 0.1)]
    relative = reward.parse_reward_spec("some/dir/r.py:f")[0]
    assert relative["source"] == os.path.abspath("some/dir/r.py") and relative["spec"] == "some/dir/r.py:f"
    assert reward.parse_reward_spec("m:inf")[0]["function"] == "inf", "a name, not an infinite weight"


@pytest.mark.parametrize("spec,message", [
    ("", "an empty component"),
    ("math,,code", "an empty component"),
    ("maths", "not a built-in reward"),
    ("mod:1x:2", "not a function name"),
    ("r.py:f:lots", "'lots' is not a weight"),
    ("r.py:f:nan", "'nan' is not a weight"),
    ("r.py:f:1e999", "finite"),
    ("r.py:2fast", "neither a weight"),
    ("not a module:f", "neither a .py file nor a module"),
    ("C:/dir/r.py:f", "a file path holding ':' is not supported"),
    ("a.py:f,b.py:f", "two components named 'f'"),
])
def test_spec_parser_says_what_is_wrong(spec, message):
    with pytest.raises(ValueError, match=message):
        reward.parse_reward_spec(spec)


# ------------------------------------------------------------------------------------------------------------
# The call in the grading workers, and each failure kind
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("workers", [2, 0])
def test_user_function_runs_in_the_workers_with_the_whole_row(user_file, workers):
    rows = [{"id": "a", "problem": "p", "answer": "7", "numbers": [1, 2], "bonus": 0.25},
            {"id": "b", "problem": "q", "answer": "7", "numbers": [1, 2], "bonus": 2}]
    scores, failures = reward.score_custom_batch(component(user_file, "length_over_ten"), ["abc", "abcdefghij"], rows,
                                                 workers=workers)
    assert scores == [0.3, 1.0] and failures == [None, None]
    assert reward.score_custom_batch(component(user_file, "bonus"), ["", ""], rows, workers=workers)[0] == [0.25, 2.0]
    assert reward.score_custom_batch(component(user_file, "whole_row"), ["", ""], rows, workers=workers)[0] == [1.0, 0.0]


FAILURES = {   # function -> what its failure says
    "raises": "ValueError: the user's own message about x",
    "gives_nan": "returned nan",
    "gives_inf": "returned -inf",
    "gives_text": "returned str '1.0', not a number",
    "gives_none": "returned NoneType None, not a number",
    "hangs": "timed out: still running after 1 s",
}


@pytest.mark.parametrize("function", sorted(FAILURES))
def test_each_failure_kind_scores_zero_and_says_why(user_file, function):
    """An exception, a hang past the timeout (the worker is killed), NaN, infinity, a non-number: the item scores 0,
    and the failure says what happened; the workers keep serving (a good call right after still scores)."""
    rows = [{"id": "a", "problem": "p", "answer": "7"}] * 2
    scores, failures = reward.score_custom_batch(component(user_file, function), ["x", "x"], rows, workers=2,
                                                 timeout_s=1.0)
    assert scores == [0.0, 0.0] and all(FAILURES[function] in why for why in failures), failures
    if function == "raises":   # the user's own traceback: its file, line and code
        assert f'File "{user_file}", line' in failures[0] and 'raise ValueError("the user' in failures[0]
        assert "reward.py" not in failures[0], "the traceback shows the user's frames, not ours"
    assert reward.score_custom_batch(component(user_file, "length_over_ten"), ["abcde"], rows[:1])[0] == [0.5]


def test_score_components_weights_counts_and_skips(user_file):
    components = reward.parse_reward_spec(f"math:2,{user_file}:raises_on_odd:0.5,format")
    rows = [{"id": "a", "problem": "1+1", "answer": "2"}] * 4
    responses = ["\\boxed{2}", "\\boxed{3}", "so \\boxed{2}", "\\boxed{2}!"]
    stats = {}
    scores = reward.score_components(responses, rows, components, stats=stats, skip=[False, False, False, True])
    assert scores == {"math": [1.0, 0.0, 1.0, 0.0], "raises_on_odd": [1.0, 0.0, 1.0, 0.0], "format": [0.0] * 4}
    assert reward.combine(scores, components) == [2.5, 0.0, 2.5, 0.0]
    assert stats["reward/raises_on_odd/calls"] == 3 and stats["reward/raises_on_odd/errors"] == 1
    assert "KeyError: 'odd'" in stats["reward/raises_on_odd/error"]
    assert reward.component_metrics(stats, components) == {
        "reward/math/mean": 0.5, "reward/raises_on_odd/mean": 0.5, "reward/raises_on_odd/errors": 1,
        "reward/format/mean": 0.0}
    assert reward.all_failed(stats, stats, components, "here") is None
    stats["reward/raises_on_odd/errors"] = 3
    assert "every call of the reward function raises_on_odd" in reward.all_failed(stats, stats, components, "here")


def test_train_refuses_rows_its_builtin_graders_cannot_grade_before_loading_a_model(warm_model_path, toy_with_bonus,
                                                                                    tmp_path):
    with pytest.raises(SystemExit, match="--train_data .*rows have no tests, which --reward code cannot grade"):
        train.main(run_args(warm_model_path, toy_with_bonus, tmp_path / "a", reward="code"))
    with pytest.raises(SystemExit, match="--eval_data humaneval: .*rows are code problems .*--reward math cannot"):
        train.main(run_args(warm_model_path, toy_with_bonus, tmp_path / "b", reward="math", eval_data="humaneval"))


def test_builtin_graders_refuse_rows_they_cannot_grade():
    math_rows = [{"id": "a", "problem": "p", "answer": "1"}]
    code_rows = [{"id": "b", "problem": "p", "tests": {"kind": "stdio", "cases": [{"input": "", "output": ""}]}}]
    assert "--reward math cannot grade" in reward.check_rows(reward.parse_reward_spec("math"), math_rows + code_rows)
    assert "--reward code cannot grade" in reward.check_rows(reward.parse_reward_spec("code"), math_rows + code_rows)
    assert reward.check_rows(reward.parse_reward_spec("math,code"), math_rows + code_rows) is None
    assert reward.needs_gold(None) and reward.needs_gold(reward.parse_reward_spec("math,format"))
    assert not reward.needs_gold(reward.parse_reward_spec("format,x.py:f"))


# ------------------------------------------------------------------------------------------------------------
# Refused at start, by the dry run too
# ------------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("case,message", [
    ("missing_file", "ImportError: no such file"),
    ("syntax_error", "SyntaxError"),
    ("import_error", "ModuleNotFoundError: No module named 'no_such_module_here'"),
    ("no_function", "has no function 'nope' (it defines: bonus, gives_inf"),
    ("one_argument", "one_argument(response) cannot be called as one_argument(response, row)"),
    ("no_module", "ModuleNotFoundError"),
])
def test_a_function_that_cannot_be_used_is_refused_naming_the_file(tmp_path, user_file, case, message):
    spec = {"missing_file": f"{tmp_path}/absent.py:f", "no_function": f"{user_file}:nope",
            "one_argument": f"{user_file}:one_argument", "no_module": "no_such_package.rewards:f"}.get(case)
    if spec is None:
        bad = tmp_path / f"{case}.py"
        bad.write_text("def f(response, row)\n    return 1\n" if case == "syntax_error" else
                       "import no_such_module_here\n\ndef f(response, row):\n    return 1\n")
        spec = f"{bad}:f"
    error = reward.check_reward_functions(reward.parse_reward_spec(spec))
    assert error and message in error and spec.split(":")[0] in error, error


def test_dry_runs_refuse_a_bad_reward_and_a_bad_template(tmp_path, tiny_model_path, user_file, capsys):
    """train.py and eval.py, dry runs (the checks every start makes first): a function that cannot be used, a bad
    template file, --format_reward beside --reward are refused, naming the file and what is wrong."""
    bad_template = tmp_path / "prompt.txt"
    bad_template.write_text("no placeholder here\n")
    common = ["--device", "cpu", "--dry_run", "--model", tiny_model_path, "--eval_data", "", "--max_response_len", "64"]
    for flags, message in [(["--reward", f"{user_file}:nope"], f"cannot use nope from {user_file}"),
                           (["--template", str(bad_template)], f"template {bad_template}: a plain-text template "
                                                               "needs the placeholder {problem}"),
                           (["--reward", f"{user_file}:length_over_ten", "--format_reward", "strict"],
                            "--format_reward with --reward")]:
        with pytest.raises(SystemExit):
            train.main(common + flags)
        assert message in capsys.readouterr().err
    assert train.main(common + ["--reward", f"math,{user_file}:bonus:0.5"]) is None
    assert "dry run ok" in capsys.readouterr().out
    with pytest.raises(SystemExit, match=f"cannot use nope from {user_file}"):
        evaluation.main(["--model", tiny_model_path, "--dry_run", "--reward", f"{user_file}:nope"])
    with pytest.raises(SystemExit, match="template .*prompt.txt: a plain-text template needs"):
        evaluation.main(["--model", tiny_model_path, "--dry_run", "--template", str(bad_template)])


# ------------------------------------------------------------------------------------------------------------
# Template files
# ------------------------------------------------------------------------------------------------------------
def test_template_files_text_and_chat(tmp_path, tokenizer):
    text = tmp_path / "prompt.txt"
    text.write_text("Solve: {problem}\nAnswer:")
    ids = data.render_prompt("2+2", tokenizer, str(text))
    assert tokenizer.decode(ids) == "Solve: 2+2\nAnswer:" and ids == tokenizer.encode("Solve: 2+2\nAnswer:",
                                                                                       add_special_tokens=False)
    chat = tmp_path / "chat.json"
    chat.write_text(json.dumps([{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "Question: {problem}"}]))
    rendered = tokenizer.decode(data.render_prompt("2+2", tokenizer, str(chat)))
    assert rendered == ("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nQuestion: 2+2<|im_end|>\n"
                        "<|im_start|>assistant\n"), rendered
    prefill = tmp_path / "prefill.json"
    prefill.write_text(json.dumps([{"role": "user", "content": "{problem}"}, {"role": "assistant", "content": "Let"}]))
    assert tokenizer.decode(data.render_prompt("2+2", tokenizer, str(prefill))).endswith(
        "<|im_start|>assistant\nLet"), "a last assistant message is continued, not closed"
    # the built-in formats are entries of the one table: a file holding one renders the same
    same = tmp_path / "same_as_chat.json"
    same.write_text(json.dumps(data.TEMPLATES["chat"]))
    assert data.render_prompt("2+2", tokenizer, str(same)) == data.render_prompt("2+2", tokenizer, "chat")
    assert data.template_error(str(text)) is None and data.template_error("chat") is None


@pytest.mark.parametrize("name,content,message", [
    ("a.txt", "no placeholder", "a plain-text template needs the placeholder {problem}"),
    ("b.json", '[{"role": "user",\n  "content": "{problem}"', "b.json:2: unreadable JSON"),
    ("c.json", '{"role": "user", "content": "{problem}"}', "non-empty JSON list of messages"),
    ("d.json", '[{"role": "user", "text": "{problem}"}]', "message 0 must be an object with exactly"),
    ("e.json", '[{"role": "user", "content": "hello"}]', "no message holds the placeholder {problem}"),
    ("f.json", '[]', "non-empty JSON list of messages"),
    (None, None, "not one of chat, code, chat_raw, think_answer, boxed and not a file"),
])
def test_bad_template_files_are_named_with_what_is_wrong(tmp_path, name, content, message):
    path = tmp_path / (name or "absent.txt")
    if content is not None:
        path.write_text(content)
    error = data.template_error(str(path))
    assert error and message in error and str(path.name) in error, error


# ------------------------------------------------------------------------------------------------------------
# train.py: metrics, partial failures, the all-fail stop
# ------------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def toy_with_bonus(tmp_path_factory):
    from tiny_model import synthetic_task
    path = tmp_path_factory.mktemp("toyb") / "task.jsonl"
    path.write_text("".join(json.dumps({**r, "bonus": k % 2}) + "\n" for k, r in enumerate(synthetic_task(64))))
    return str(path)


def run_args(model, task, out_dir, **flags):
    args = [*TOY_FLAGS, "--model", model, "--train_data", task, "--out_dir", str(out_dir)]
    for key, value in {"max_steps": 2, "batch_size": 4, "group_size": 4, **flags}.items():
        args += [f"--{key}", str(value)]
    return args


def read_metrics(out_dir):
    return [json.loads(line) for line in Path(out_dir, "metrics.jsonl").read_text().splitlines()]


def test_train_logs_each_component_and_counts_failures(vllm_engine, warm_model_path, toy_with_bonus, user_file,
                                                       tmp_path, capsys):
    """--reward math + two functions of the user's: reward/mean is the weighted sum, each component's mean is
    logged, a function failing on some responses has its failures counted and the run goes on; the rows' extra
    column reaches the function."""
    spec = f"math,{user_file}:bonus:0.5,{user_file}:raises_on_odd:0.25"
    train.main(run_args(warm_model_path, toy_with_bonus, tmp_path / "run", reward=spec), engine=vllm_engine)
    rows = read_metrics(tmp_path / "run")
    assert [m["step"] for m in rows] == [1, 2]
    for m in rows:
        assert {"reward/math/mean", "reward/bonus/mean", "reward/raises_on_odd/mean", "reward/bonus/errors",
                "reward/raises_on_odd/errors"} <= set(m) and "reward/math/errors" not in m
        assert m["reward/bonus/errors"] == 0 and 0 <= m["reward/bonus/mean"] <= 1
        combined = m["reward/math/mean"] + 0.5 * m["reward/bonus/mean"] + 0.25 * m["reward/raises_on_odd/mean"]
        assert math.isclose(m["reward/mean"], combined, rel_tol=1e-6), m
        assert m["reward/accuracy"] == m["reward/math/mean"], "the first component decides what is correct"
    assert sum(m["reward/raises_on_odd/errors"] for m in rows) > 0, "odd-length responses fail (and score 0)"
    assert "raises_on_odd failed on" in capsys.readouterr().out


@pytest.mark.parametrize("function,message", [("raises", "ValueError: the user's own message about"),
                                              ("hangs", "timed out")])
def test_a_step_where_every_call_fails_stops_the_run(vllm_engine, warm_model_path, toy_with_bonus, user_file, tmp_path,
                                                     function, message):
    """Never trains on zeros: the run stops at step 1 with the function's own error (and traceback), before any
    update, checkpoint or metrics row."""
    with pytest.raises(reward.RewardFunctionError) as caught:
        train.main(run_args(warm_model_path, toy_with_bonus, tmp_path / "run", reward=f"{user_file}:{function}",
                            reward_timeout_s=1, batch_size=2, group_size=2), engine=vllm_engine)
    text = str(caught.value)
    assert text.startswith("train.py: step 1: every call of the reward function") and message in text, text
    if function == "raises":
        assert "Traceback (most recent call last)" in text and f'File "{user_file}"' in text
    assert not (tmp_path / "run" / "metrics.jsonl").exists() or not read_metrics(tmp_path / "run")
    assert not list((tmp_path / "run").glob("ckpt-*"))


def test_periodic_eval_uses_the_reward(vllm_engine, warm_model_path, tmp_path, user_file):
    """eval.py scores with --reward's first component (here rows without any gold answer), and writes each
    sample's components."""
    rows = [{"id": f"q{k}", "problem": "What number comes after six?", "bonus": 1} for k in range(3)]
    task = tmp_path / "no_gold.jsonl"
    task.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(data.DatasetError, match="missing or empty 'answer'"):
        data.load_dataset(str(task))
    results = evaluation.evaluate(vllm_engine, vllm_engine.tokenizer, [str(task)], k=2, out_dir=tmp_path / "eval",
                                  max_tokens=8, template="chat", rewards=reward.parse_reward_spec(
                                      f"{user_file}:bonus,{user_file}:length_over_ten:0"))
    assert results[str(task)]["avg@2"] == 1.0
    samples = [json.loads(line) for line in (tmp_path / "eval" / "no_gold" / "samples.jsonl").read_text().splitlines()]
    assert len(samples) == 6 and all(s["reward"] == 1.0 and s["rewards"]["bonus"] == 1.0 for s in samples)


# ------------------------------------------------------------------------------------------------------------
# The example, end to end for a few steps
# ------------------------------------------------------------------------------------------------------------
def test_countdown_reward_file():
    sys.path.insert(0, str(EXAMPLE))
    try:
        from countdown_reward import countdown
    finally:
        sys.path.remove(str(EXAMPLE))
    row = {"numbers": [3, 5, 7], "target": 16}
    for response, paid in [("7*3-5", 1.0), ("7*3=21,21-5=16", 1.0), ("(7+5)+3", 0.0), ("7*3=20,20-4=16", 0.0),
                           ("7*3", 0.0), ("7*3-5=17", 0.0), ("__import__('os').system('true')", 0.0),
                           ("7/0+3-5", 0.0), ("3**3-11", 0.0), ("7*3-5-0", 0.0), ("", 0.0), ("1" * 500, 0.0)]:
        assert countdown(response, row) == paid, response


def test_countdown_example_trains_end_to_end(tmp_path):
    """The example's own command, shortened (its data, reward file, template, SFT then GRPO with --reward, the
    evaluations before and after): it runs, and its summary holds both numbers."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run([sys.executable, str(EXAMPLE / "run.py"), "--seeds", "0", "--out_dir", str(tmp_path),
                           "--set", "sft.max_steps=30", "--set", "grpo.max_steps=2", "--set", "grpo.eval_limit=50"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    summary = json.loads((tmp_path / "seed0" / "summary.json").read_text())
    assert 0 <= summary["after_sft"] <= 1 and 0 <= summary["after_grpo"] <= 1
    rows = read_metrics(tmp_path / "seed0" / "grpo")
    assert [m["step"] for m in rows if "reward/countdown/mean" in m] == [1, 2]
    assert all(m["reward/countdown/errors"] == 0 for m in rows if "reward/countdown/errors" in m)
    assert "| 0 |" in (tmp_path / "summary.md").read_text()
