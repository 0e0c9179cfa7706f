"""The seed tables' sets that live on the Hugging Face hub: GPQA-Diamond and LiveCodeBench (evaluation) and
DeepCoder's competitive-programming problems (code RL). None is shipped; each is loaded from the hub and turned
into our problem schema (data.py), prompted and graded as the number it stands for was (README.md, "Evaluation:
the seed table", names each source):

    data.load_dataset("gpqa_diamond")               198 questions (gated: an HF token whose owner accepted the terms)
    data.load_dataset("livecodebench")              AceReason's "v5" column: release_v5, 2024-08-01 <= date < 2025-02-01
    data.load_dataset("livecodebench:v6")           a window: v5, v6 (the 175 problems release_v6 added), pre_v5,
                                                    or START..END (YYYY-MM-DD, END excluded; release_v6's files)
    data.load_dataset("deepcoder")                  DeepCoder's training problems (configs lcbv5, primeintellect, taco)
    data.load_dataset("deepcoder:lcbv5")            one config
    data.load_dataset("rows.jsonl")                 a local file in LiveCodeBench's, DeepCoder's or GPQA's column
                                                    layout is recognised and converted the same way (convert_rows)
    load_report(spec)                               what loading a named set found: rows in the window, problems
                                                    kept, malformed rows skipped, the published column's count

Hub access (hub_rows, hub_file) fails with one line naming the set and what is missing (the `datasets` package,
a token, the network), as HubUnavailable: eval.py skips such a benchmark with that line and goes on. A malformed
row of a named set (a field missing or unreadable, private tests that do not decode, a testtype or starter code
that contradicts metadata.func_name, tests its protocol cannot read, two GPQA options with one text) is skipped
and counted, as upstream grades such a problem 0; a set whose every row is malformed is refused. In a local file
the same row is refused, naming file, line and field.

GPQA-Diamond (Idavidrein/gpqa): simple-evals' prompt ('Answer: $LETTER'), the options shuffled per question and
sample, seeded by (question id, sample); with GPQA_BALANCED the right option's letter rotates with the sample
from a seeded offset, so over k = 4, 8, ... samples no letter bias is left. Its authors ask that examples never
appear in plain text on the web: none is shipped, tests use invented rows. eval.py grades it by simple-evals'
rule (protocols.py) and reports reward.py's multiple-choice rules beside it.

LiveCodeBench (livecodebench/code_generation_lite, JSONL files test.jsonl .. test6.jsonl, one per release, read
directly: `datasets` 4+ no longer runs the repository's loading script): AceReason's code instruction with the
function header for LeetCode problems (template chat_raw); public then private tests, private ones decoded by an
unpickler that refuses every global (a hostile pickle cannot run code); graded by a published protocol
(protocols.py: AceReason's verifier unless asked otherwise, which pays no response without `</think>`).

DeepCoder-Preview-Dataset (agentica-org): tests as rllm builds and grades them: TACO's {inputs, outputs} zipped
(the shorter wins), TACO and PrimeIntellect rows at most TRAIN_MAX_TESTS (the longest inputs) of
TRAIN_TIME_LIMIT_S each in our own runner; lcbv5 rows (LiveCodeBench's layout, dated before the v5 window) every
test under lcb_runner's protocol. TACO's and PrimeIntellect's function-call tests are skipped and counted.
"""
import base64
import binascii
import contextlib
import io
import json
import logging
import os
import pickle
import random
import zlib
from datetime import datetime

import protocols  # below this file: it imports nothing of ours


DATASETS_REQUIREMENT = "datasets==5.2.0"   # requirements-common.txt


class DatasetError(ValueError):
    """Bad input data; the message names the file and line (or hub dataset and row). data.py re-exports it: this
    file is below data.py and imports nothing of the project's."""


class HubUnavailable(DatasetError):
    """A hub set that cannot be loaded here (no `datasets`/`huggingface_hub`, no token for a gated set, no network
    or not in the offline cache): one line, naming the set and what is missing."""


# ------------------------------------------------------------------------------------------------------------
# Hub access
# ------------------------------------------------------------------------------------------------------------
def hf_token():
    """The Hugging Face token this process would use (HF_TOKEN, or the one `hf auth login` saved), or None."""
    try:
        from huggingface_hub import get_token
    except ImportError:
        return os.environ.get("HF_TOKEN") or None
    return get_token()


def _one_line(exc):
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0].split('. ')[0][:200] if text else ''}"


@contextlib.contextmanager
def _quiet_hub():
    """The hub clients' own retry warnings off: a failure is reported once, as HubUnavailable's line."""
    loggers = [logging.getLogger(name) for name in ("huggingface_hub", "datasets", "fsspec")]
    levels = [logger.level for logger in loggers]
    for logger in loggers:
        logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        for logger, level in zip(loggers, levels):
            logger.setLevel(level)


def hub_rows(spec, path, config=None, split="train", gated=False):
    """Rows (dicts) of a hub dataset through datasets.load_dataset, or HubUnavailable in one line."""
    try:
        import datasets
    except ImportError:
        raise HubUnavailable(f"{spec}: loading {path} needs the `datasets` package (pip install "
                             f"{DATASETS_REQUIREMENT})") from None
    if gated and not hf_token() and os.environ.get("HF_HUB_OFFLINE", "0") in ("0", ""):
        raise HubUnavailable(f"{spec}: {path} is gated: accept its terms on huggingface.co/datasets/{path} and set "
                             f"HF_TOKEN (or run `hf auth login`)")
    try:
        with _quiet_hub():
            table = datasets.load_dataset(path, config, split=split)
    except Exception as exc:  # noqa: BLE001 -- network, auth, offline cache miss, a renamed config: all one line
        raise HubUnavailable(f"{spec}: could not load {path}" + (f" ({config})" if config else "") +
                             f" from the hub: {_one_line(exc)}") from None
    return [dict(row) for row in table]


def hub_file(spec, repo, filename):
    """Local path of one file of a hub dataset repository (downloaded once, then cached), or HubUnavailable."""
    try:
        from huggingface_hub import hf_hub_download
    except ImportError:
        raise HubUnavailable(f"{spec}: loading {repo} needs the `huggingface_hub` package (pip install "
                             f"{DATASETS_REQUIREMENT})") from None
    try:
        with _quiet_hub():
            return hf_hub_download(repo, filename, repo_type="dataset")
    except Exception as exc:  # noqa: BLE001
        raise HubUnavailable(f"{spec}: could not fetch {repo}/{filename} from the hub: {_one_line(exc)}") from None


def _json_field(value, where, field):
    """A column that is JSON text (or already parsed) -> its value; DatasetError naming the row and field."""
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{where}: field '{field}': not JSON ({exc.msg} at column {exc.colno})") from None
    return value


def _text_field(row, where, field):
    value = row.get(field)
    if not isinstance(value, str) or not value.strip():
        raise DatasetError(f"{where}: field '{field}': missing or empty")
    return value


# ------------------------------------------------------------------------------------------------------------
# GPQA
# ------------------------------------------------------------------------------------------------------------
GPQA_HUB = "Idavidrein/gpqa"
GPQA_CONFIGS = ("gpqa_diamond", "gpqa_main", "gpqa_extended")   # each a name for data.load_dataset
GPQA_SPLIT = "train"                                            # the hub set's only split
GPQA_COLUMNS = ("Question", "Correct Answer", "Incorrect Answer 1", "Incorrect Answer 2", "Incorrect Answer 3")
GPQA_ID_COLUMN = "Record ID"
GPQA_SEED = 0                 # the shuffles' seed (with the question id and the sample index)
GPQA_BALANCED = True          # False: an independent uniform permutation per sample, as simple-evals draws
LETTERS = "ABCD"
# openai/simple-evals common.py QUERY_TEMPLATE_MULTICHOICE, verbatim
GPQA_PROMPT = ("Answer the following multiple choice question. The last line of your response should be of the "
               "following format: 'Answer: $LETTER' (without quotes) where LETTER is one of ABCD. Think step by "
               "step before answering.\n\n{Question}\n\nA) {A}\nB) {B}\nC) {C}\nD) {D}")


def choice_order(question_id, sample, seed=GPQA_SEED, balanced=GPQA_BALANCED):
    """The options' order for one sample of one question: order[position] = index into [right, wrong 1, wrong 2,
    wrong 3]. Deterministic in (seed, question id, sample) (string seeds: the same in every process). balanced:
    the right option's position is (offset + sample) mod 4 with a per-question seeded offset, the wrong ones
    shuffled into the other positions per sample."""
    rng = random.Random(f"gpqa/{seed}/{question_id}/{sample}")
    if not balanced:
        return rng.sample(range(4), 4)
    right = (random.Random(f"gpqa/{seed}/{question_id}").randrange(4) + sample) % 4
    wrong = rng.sample([1, 2, 3], 3)
    return wrong[:right] + [0] + wrong[right:]


def multiple_choice_sample(problem, sample):
    """A multiple-choice row (with `choices` = [right, wrong...], `question`) as sample `sample` sees it: the
    options in that sample's order (`options`: letter -> text), the prompt, and the right letter (`answer`)."""
    order = choice_order(problem["id"], sample)
    options = dict(zip(LETTERS, (problem["choices"][i] for i in order)))
    return {**problem, "problem": GPQA_PROMPT.format(Question=problem["question"], **options),
            "answer": LETTERS[order.index(0)], "options": options, "options_order": order}


def gpqa_problems(rows, where, source="gpqa_diamond"):
    """rows: (location, dict) in GPQA's hub layout -> multiple-choice problems (sample 0's order in `problem` and
    `answer`; eval.py re-draws the order per sample: multiple_choice_sample)."""
    problems = []
    for location, row in rows:
        at = f"{where}:{location}"
        texts = [_text_field(row, at, column).strip() for column in GPQA_COLUMNS]
        if len(set(texts[1:])) < 4:
            raise DatasetError(f"{at}: two options have the same text (fields {', '.join(GPQA_COLUMNS[1:])}): the "
                               f"right letter would be ambiguous")
        pid = row.get(GPQA_ID_COLUMN)
        problem = {"id": str(pid) if pid not in (None, "") else f"{source}-{location}", "question": texts[0],
                   "choices": texts[1:], "source": source}
        for column, key in (("Subdomain", "subdomain"), ("High-level domain", "domain")):
            if isinstance(row.get(column), str):
                problem[key] = row[column]
        problems.append((location, multiple_choice_sample(problem, 0)))
    return problems


# ------------------------------------------------------------------------------------------------------------
# LiveCodeBench
# ------------------------------------------------------------------------------------------------------------
LCB_HUB = "livecodebench/code_generation_lite"
LCB_RELEASE_FILES = {f"release_v{n}": ["test.jsonl"] + [f"test{k}.jsonl" for k in range(2, n + 1)] for n in range(1, 7)}
# A named window: (the release files read, first contest date, end date excluded; None: no filter), and the
# problem count the published column has. "v5": release_v5 within 2024-08-01 .. 2025-02-01 (NeMo-Skills
# dataset/livecodebench/prepare.py test_v5_2408_2502: 279; NVIDIA's AceReason split file lists the same 279).
# "v6": the 175 problems release_v6 added (test6.jsonl, contests of 2025-01 .. 2025-04: AceReason's split file's
# "v6" list, January's included, though its model card labels the column 2025/02/01 - 2025/05/01).
LCB_WINDOWS = {"v5": (LCB_RELEASE_FILES["release_v5"], "2024-08-01", "2025-02-01"),
               "v6": (["test6.jsonl"], None, None),
               "pre_v5": (LCB_RELEASE_FILES["release_v6"], "2023-05-01", "2024-08-01")}   # DeepCoder's training range
LCB_EXPECTED_PROBLEMS = {"v5": 279, "v6": 175}
LCB_DEFAULT_WINDOW = "v5"
LCB_TIME_LIMIT_S = 6          # per test (lcb_runner/runner/parser.py --timeout, default 6)
LCB_COLUMNS = ("question_content", "public_test_cases", "private_test_cases", "metadata")
MAX_PRIVATE_TESTS_BYTES = 1 << 30   # a private-tests field inflating beyond this is refused (a zip bomb)
# lcb_runner/evaluation/testing_util.py import_string: before a training stdin program (TACO, PrimeIntellect)
LCB_IMPORTS = protocols.LCB_IMPORTS
# AceReason's code instructions (nvidia/AceReason-Nemotron-14B model card, "Usage Recommendations" 3), verbatim
CODE_INSTRUCTION_STDIN = ("Write Python code to solve the problem. Please place the solution code in the following "
                          "format:\n```python\n# Your solution code here\n```")
CODE_INSTRUCTION_STARTER = "Please place the solution code in the following format:\n```python\n# Your solution code here\n```"


def code_prompt(question, starter_code=""):
    """AceReason's user turn for a code problem: the question, the function header when there is one, the
    instruction."""
    text = question.strip()
    if starter_code:
        return (text + "\n\nSolve the problem starting with the provided function header.\n\nFunction header:\n```\n"
                + starter_code + "\n```\n\n" + CODE_INSTRUCTION_STARTER)
    return text + "\n\n" + CODE_INSTRUCTION_STDIN


class _PlainUnpickler(pickle.Unpickler):
    """Unpickles plain data only: every opcode that would reach a class, function or module (GLOBAL, STACK_GLOBAL,
    INST, OBJ, REDUCE's callables, copyreg extensions) goes through find_class, which refuses all of them."""

    def find_class(self, module, name):
        raise pickle.UnpicklingError(f"refused to load {module}.{name}: private tests may hold plain data only")

    def persistent_load(self, pid):
        raise pickle.UnpicklingError("refused a persistent id: private tests may hold plain data only")


_PLAIN = (str, int, float, bool, bytes, type(None))


def _check_plain(value, depth=0):
    if depth > 50:
        raise pickle.UnpicklingError("nested too deeply")
    if isinstance(value, (list, tuple)):
        for item in value:
            _check_plain(item, depth + 1)
    elif isinstance(value, dict):
        for key, item in value.items():
            _check_plain(key, depth + 1)
            _check_plain(item, depth + 1)
    elif type(value) not in _PLAIN:
        raise pickle.UnpicklingError(f"a {type(value).__name__} is not plain data")


def decode_private_tests(value, where, field="private_test_cases"):
    """LiveCodeBench's private tests -> list of test dicts. The field is JSON, or (as lcb_runner reads it when
    json.loads fails) base64 of zlib of a pickle of the JSON text. The pickle is read by _PlainUnpickler: a
    pickle naming any callable is refused (DatasetError) before anything runs."""
    if not isinstance(value, str):
        return _json_field(value, where, field)
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        pass
    try:
        packed = base64.b64decode(value.encode("ascii"), validate=True)
        inflater = zlib.decompressobj()
        raw = inflater.decompress(packed, MAX_PRIVATE_TESTS_BYTES)
        if inflater.unconsumed_tail:
            raise DatasetError(f"{where}: field '{field}': inflates beyond {MAX_PRIVATE_TESTS_BYTES} bytes")
        decoded = _PlainUnpickler(io.BytesIO(raw)).load()
        _check_plain(decoded)
    except DatasetError:
        raise
    except (binascii.Error, UnicodeEncodeError, ValueError, zlib.error) as exc:
        raise DatasetError(f"{where}: field '{field}': neither JSON nor base64+zlib+pickle ({_one_line(exc)})") from None
    except (pickle.UnpicklingError, EOFError, RecursionError, MemoryError) as exc:
        raise DatasetError(f"{where}: field '{field}': pickle refused ({_one_line(exc)})") from None
    return _json_field(decoded, where, field) if isinstance(decoded, (str, bytes)) else decoded


def _lcb_cases(tests, where, field):
    """A list of LiveCodeBench tests {input, output, testtype} -> [(input, output, testtype, field)]."""
    if not isinstance(tests, list):
        raise DatasetError(f"{where}: field '{field}': expected a list of tests, got {type(tests).__name__}")
    cases = []
    for k, test in enumerate(tests):
        if not isinstance(test, dict) or not isinstance(test.get("input"), str) or not isinstance(test.get("output"), str):
            raise DatasetError(f"{where}: field '{field}[{k}]': expected {{input: str, output: str, testtype}}")
        cases.append((test["input"], test["output"], test.get("testtype"), f"{field}[{k}]"))
    return cases


def stdin_tests(cases, time_limit_s=LCB_TIME_LIMIT_S):
    """Stdin tests run as a script in our own runner (DeepCoder's TACO and PrimeIntellect rows): LiveCodeBench's
    imports and recursion limit before the program, LiveCodeBench's output comparison, a time limit per test."""
    return {"kind": "stdio", "cases": [{"input": i, "output": o} for i, o, _, _ in cases],
            "prelude": LCB_IMPORTS, "compare": "lcb", "time_limit_s": time_limit_s}


def protocol_tests(cases, func_name, starter_code, where, protocol):
    """LiveCodeBench-layout tests graded by a published protocol (protocols.py); DatasetError naming the row when
    that protocol cannot read them."""
    kind = "functional" if func_name else "stdio"
    try:
        return protocols.code_tests(kind, [{"input": i, "output": o} for i, o, _, _ in cases], protocol,
                                    func_name=func_name, starter_code=starter_code)
    except protocols.Unreadable as exc:
        field = "test cases" if exc.case is None else cases[exc.case][3]
        raise DatasetError(f"{where}: field '{field}': {exc.why} (protocol {protocol})") from None


def _lcb_kind(cases, func_name, where, starter_code=None):
    """'functional' when the metadata names a function (as lcb_runner's run_test decides), else 'stdin'. A test
    whose testtype says otherwise, or (LiveCodeBench rows) a starter code present without a function name or
    absent with one (AceReason's verifier decides by the starter code), is refused."""
    kind = "functional" if func_name else "stdin"
    for _, _, testtype, field in cases:
        if testtype not in (None, kind):
            raise DatasetError(f"{where}: field '{field}.testtype': {testtype!r}, but the problem is {kind} "
                               f"(metadata.func_name {'given' if func_name else 'absent'})")
    if starter_code is not None and bool(starter_code.strip()) != bool(func_name):
        raise DatasetError(f"{where}: field 'starter_code': {'present' if starter_code.strip() else 'empty'}, but "
                           f"metadata.func_name is {'absent' if not func_name else repr(func_name)}")
    return kind


def _longest(cases, max_tests):
    if max_tests is None or len(cases) <= max_tests:
        return cases
    keep = sorted(sorted(range(len(cases)), key=lambda k: len(cases[k][0]), reverse=True)[:max_tests])
    return [cases[k] for k in keep]


def lcb_problem(row, where, max_tests=None, protocol=protocols.DEFAULT):
    """One row in LiveCodeBench's layout -> a problem (id = question_id, AceReason's prompt, the tests public then
    private, graded by `protocol`: AceReason's verifier unless asked otherwise)."""
    question = _text_field(row, where, "question_content")
    metadata = _json_field(row.get("metadata") or {}, where, "metadata")
    if not isinstance(metadata, dict):
        raise DatasetError(f"{where}: field 'metadata': expected an object")
    cases = _lcb_cases(_json_field(row.get("public_test_cases") or [], where, "public_test_cases"), where,
                       "public_test_cases")
    cases += _lcb_cases(decode_private_tests(row.get("private_test_cases") or [], where), where, "private_test_cases")
    if not cases:
        raise DatasetError(f"{where}: no tests (fields 'public_test_cases', 'private_test_cases')")
    func_name = metadata.get("func_name")
    starter = row.get("starter_code") or ""
    _lcb_kind(cases, func_name, where, starter)
    tests = protocol_tests(_longest(cases, max_tests), func_name, starter, where, protocol)
    problem = {"id": str(row.get("question_id") or ""), "problem": code_prompt(question, starter), "tests": tests,
               "source": "livecodebench"}
    for key in ("question_title", "platform", "contest_id", "contest_date", "difficulty"):
        if row.get(key) not in (None, ""):
            problem[key] = row[key]
    if starter:
        problem["starter_code"] = starter
    return problem


def lcb_window(name):
    """A window name (LCB_WINDOWS) or 'YYYY-MM-DD..YYYY-MM-DD' -> (files, start, end): the release files read and
    the contest dates kept (start <= date < end; None: every problem of those files). ValueError saying what is
    accepted."""
    if name in LCB_WINDOWS:
        files, start, end = LCB_WINDOWS[name]
        if start is None:
            return files, None, None
    else:
        files, (start, _, end) = LCB_RELEASE_FILES["release_v6"], name.partition("..")
    try:
        window = datetime.strptime(start, "%Y-%m-%d"), datetime.strptime(end, "%Y-%m-%d")
    except ValueError:
        raise ValueError(f"livecodebench:{name}: the window must be one of {', '.join(LCB_WINDOWS)} or "
                         f"START..END (YYYY-MM-DD, END excluded)") from None
    if window[0] >= window[1]:
        raise ValueError(f"livecodebench:{name}: the window's start must come before its end")
    return (files, *window)


def _contest_date(row, where):
    try:
        return datetime.fromisoformat(str(row["contest_date"]))
    except (KeyError, ValueError):
        raise DatasetError(f"{where}: field 'contest_date': missing or not an ISO date "
                           f"({str(row.get('contest_date'))[:40]!r})") from None


def livecodebench_rows(spec, window, malformed=None):
    """(location, row) of the window's release files whose contest_date lies in it (read line by line: the
    private tests of other problems are never decoded). A line that is not JSON, or has no readable date, goes
    to `malformed` as (location, why) when that is a list; else it is refused (DatasetError)."""
    files, start, end = lcb_window(window)
    rows = []
    for filename in files:
        path = hub_file(spec, LCB_HUB, filename)
        with open(path, encoding="utf-8") as f:
            for line_no, line in enumerate(f, 1):
                if not line.strip():
                    continue
                at = f"{LCB_HUB}/{filename}:{line_no}"
                try:
                    try:
                        row = json.loads(line)
                    except json.JSONDecodeError as exc:
                        raise DatasetError(f"{at}: unreadable JSON ({exc.msg})") from None
                    if start is None or start <= _contest_date(row, at) < end:
                        rows.append((f"{filename}:{line_no}", row))
                except DatasetError as exc:
                    if malformed is None:
                        raise
                    malformed.append((f"{filename}:{line_no}", str(exc).removeprefix(f"{at}: ")))
    return rows


# ------------------------------------------------------------------------------------------------------------
# DeepCoder's training set
# ------------------------------------------------------------------------------------------------------------
DEEPCODER_HUB = "agentica-org/DeepCoder-Preview-Dataset"
DEEPCODER_CONFIGS = ("lcbv5", "primeintellect", "taco")   # `deepcoder` alone: all three (their train splits)
DEEPCODER_SPLIT = "train"
# rllm rewards/code_reward.py: TACO and PrimeIntellect rows at most 15 tests (the longest inputs), 12 s each;
# LiveCodeBench rows every test, 6 s each (its lcb_check_correctness_v2)
TRAIN_MAX_TESTS = 15
TRAIN_TIME_LIMIT_S = 12
DEEPCODER_LCB_PROTOCOL = "lcb"      # rllm grades LiveCodeBench rows with its copy of lcb_runner's testing_util
DEEPCODER_SKIP_UNSUPPORTED = True   # rows with TACO/PrimeIntellect function-call tests: skip and count (else refuse)


class Unsupported(DatasetError):
    """A row whose tests we cannot grade faithfully (TACO's and PrimeIntellect's function-call layouts)."""


def _io_text(value, where, field):
    """A stdin test's input or output: a string, or (TACO) a list of lines."""
    if isinstance(value, list) and all(isinstance(x, str) for x in value):
        return "\n".join(value)
    if not isinstance(value, str):
        raise DatasetError(f"{where}: field '{field}': expected a string, got {type(value).__name__}")
    return value


def deepcoder_problem(row, where, max_tests=TRAIN_MAX_TESTS):
    """One row in DeepCoder's layout -> a problem, its tests as rllm builds and grades them; Unsupported for
    function-call tests outside LiveCodeBench's layout. max_tests: TACO / PrimeIntellect rows only."""
    question = _text_field(row, where, "problem")
    tests = _json_field(row.get("tests"), where, "tests")
    metadata = _json_field(row.get("metadata") or {}, where, "metadata")
    metadata = metadata if isinstance(metadata, dict) else {}
    starter = row.get("starter_code") or ""
    if isinstance(tests, dict) and "inputs" in tests and "outputs" in tests:   # TACO
        if tests.get("fn_name"):
            raise Unsupported(f"{where}: TACO function-call tests (fn_name {tests['fn_name']!r}) are not supported")
        if not isinstance(tests["inputs"], list) or not isinstance(tests["outputs"], list):
            raise DatasetError(f"{where}: field 'tests': inputs and outputs must be lists")
        # rllm cookbooks/deepcoder/prepare_deepcoder_data.py _normalize_tests: zip(inputs, outputs): the shorter wins
        cases = [(_io_text(i, where, f"tests.inputs[{k}]"), _io_text(o, where, f"tests.outputs[{k}]"), None,
                  f"tests[{k}]") for k, (i, o) in enumerate(zip(tests["inputs"], tests["outputs"]))]
        lcb_layout = False
    elif isinstance(tests, list) and tests and all(isinstance(t, dict) for t in tests):
        if any(t.get("type") == "function_call" or t.get("fn_name") for t in tests):   # PrimeIntellect
            raise Unsupported(f"{where}: PrimeIntellect function-call tests are not supported")
        lcb_layout = any("testtype" in t for t in tests)   # LiveCodeBench's layout (config lcbv5)
        if lcb_layout:
            cases = _lcb_cases(tests, where, "tests")
        else:
            cases = [(_io_text(t.get("input"), where, f"tests[{k}].input"),
                      _io_text(t.get("output"), where, f"tests[{k}].output"), None, f"tests[{k}]")
                     for k, t in enumerate(tests)]
    else:
        raise DatasetError(f"{where}: field 'tests': expected a list of tests or {{inputs, outputs}}")
    if not cases:
        raise DatasetError(f"{where}: field 'tests': no tests")
    if lcb_layout:
        func_name = metadata.get("func_name") or next(
            (t["metadata"].get("func_name") for t in tests if isinstance(t.get("metadata"), dict)), None)
        _lcb_kind(cases, func_name, where)
        problem_tests = protocol_tests(cases, func_name, starter, where, DEEPCODER_LCB_PROTOCOL)
    else:
        problem_tests = stdin_tests(_longest(cases, max_tests), time_limit_s=TRAIN_TIME_LIMIT_S)
    problem = {"problem": code_prompt(question, starter), "source": "deepcoder", "tests": problem_tests}
    if starter:
        problem["starter_code"] = starter
    return problem


# ------------------------------------------------------------------------------------------------------------
# Layouts: recognised in any file or hub set, converted to our schema
# ------------------------------------------------------------------------------------------------------------
def layout(row):
    """'livecodebench', 'deepcoder', 'gpqa' or None (our own schema, or unknown) for one raw row."""
    if not isinstance(row, dict):
        return None
    if all(column in row for column in LCB_COLUMNS):
        return "livecodebench"
    if all(column in row for column in GPQA_COLUMNS):
        return "gpqa"
    tests = row.get("tests")
    if "problem" in row and tests is not None:
        if isinstance(tests, str):
            try:
                tests = json.loads(tests)
            except json.JSONDecodeError:
                return None   # data.validate_tests says what is wrong with it
        if isinstance(tests, list) or (isinstance(tests, dict) and "kind" not in tests):
            return "deepcoder"
    return None


_LAYOUT_COLUMNS = {"livecodebench": LCB_COLUMNS, "gpqa": GPQA_COLUMNS, "deepcoder": ("problem", "tests")}


def convert_rows(rows, where, source=None, log=print, max_tests=None, *, report=None, kind=None):
    """(location, row) -> (location, row in our schema) when the first row is in a known hub layout; other rows
    are returned unchanged for data.py to validate. Rows with unsupported tests are skipped and counted
    (DEEPCODER_SKIP_UNSUPPORTED) or refused. report: None refuses a malformed row (DatasetError naming it: a
    local file); a dict skips it and counts it there (report["malformed"]: [(location, why)], a hub set, as
    upstream grades such a problem 0), refusing only when no row is left. kind: the layout (a named set's), else
    the first row's."""
    kind = kind or (layout(rows[0][1]) if rows else None)
    if kind is None:
        return rows
    converted, skipped, malformed = [], [], [] if report is None else report.setdefault("malformed", [])
    for location, row in rows:
        at = f"{where}:{location}"
        try:
            missing = [c for c in _LAYOUT_COLUMNS[kind] if not isinstance(row, dict) or c not in row]
            if missing:
                raise DatasetError(f"{at}: field '{missing[0]}' missing (the first row is in {kind}'s column layout)")
            if kind == "gpqa":
                converted += gpqa_problems([(location, row)], where, source=source or "gpqa")
            elif kind == "livecodebench":
                converted.append((location, lcb_problem(row, at, max_tests)))
            else:
                converted.append((location, deepcoder_problem(row, at, TRAIN_MAX_TESTS if max_tests is None
                                                              else max_tests)))
        except Unsupported as exc:
            if not DEEPCODER_SKIP_UNSUPPORTED:
                raise
            skipped.append(str(exc))
        except DatasetError as exc:
            if report is None:
                raise
            malformed.append((location, str(exc).removeprefix(f"{at}: ")))
    if skipped:
        log(f"{where}: skipped {len(skipped)} of {len(rows)} rows whose tests are not supported "
            f"(e.g. {skipped[0][len(where) + 1:]})")
    if malformed:
        log(f"{where}: skipped {len(malformed)} of {len(rows)} malformed rows (e.g. {': '.join(malformed[-1])})")
    if not converted:
        raise DatasetError(f"{where}: no row with supported, well-formed tests" +
                           (f" (all {len(rows)} skipped; e.g. {': '.join(malformed[-1])})" if malformed else ""))
    return converted


# ------------------------------------------------------------------------------------------------------------
# The names data.load_dataset knows
# ------------------------------------------------------------------------------------------------------------
NAMES = GPQA_CONFIGS + ("livecodebench", "deepcoder")
CODE_NAMES = ("livecodebench", "deepcoder")
TEMPLATE = "chat_raw"         # the loaders write the whole user turn (instruction included): data.TEMPLATES
_CACHE = {}                   # spec -> (where, rows, report), or the HubUnavailable it raised: eval and training
                              # try a hub set once per process (periodic evals do not wait on the network again)


def base_name(spec):
    return spec.split(":", 1)[0]


def is_named(spec):
    return base_name(spec) in NAMES


def spec_error(spec):
    """None for a well-formed named spec, else what is wrong (no hub access: a dry run checks specs with it)."""
    name, _, arg = spec.partition(":")
    if name in GPQA_CONFIGS:
        return f"{spec}: {name} takes no argument" if arg else None
    if name == "livecodebench":
        try:
            lcb_window(arg or LCB_DEFAULT_WINDOW)
        except ValueError as exc:
            return str(exc)
        return None
    if name == "deepcoder":
        bad = [c for c in arg.split("+") if c not in DEEPCODER_CONFIGS] if arg else []
        return f"{spec}: unknown DeepCoder config {bad[0]!r} (choose from {', '.join(DEEPCODER_CONFIGS)}, joined " \
               f"with +)" if bad else None
    return f"{spec}: not a hub set ({', '.join(NAMES)})"


def expected_problems(spec):
    """The problem count of the published column a named set stands for (LCB_EXPECTED_PROBLEMS), or None."""
    name, _, arg = spec.partition(":")
    return LCB_EXPECTED_PROBLEMS.get(arg or LCB_DEFAULT_WINDOW) if name == "livecodebench" else None


def describe(spec, code_protocol=protocols.DEFAULT, gpqa_protocol=protocols.GPQA_DEFAULT):
    """One line: where a named set comes from and how it is prompted and graded (eval.py --dry_run)."""
    name, _, arg = spec.partition(":")
    if name in GPQA_CONFIGS:
        return (f"hub {GPQA_HUB} ({name}, gated: HF token); simple-evals prompt ('Answer: $LETTER'), options "
                f"shuffled per question and sample ({'balanced over letters' if GPQA_BALANCED else 'uniform'}, "
                f"seed {GPQA_SEED}); graded by {gpqa_protocol}"
                + (" (first 'Answer: X' anywhere; ours beside it)" if gpqa_protocol == "simple-evals" else
                   " (reward.py's multiple-choice rules; simple-evals beside it)"))
    if name == "livecodebench":
        window = arg or LCB_DEFAULT_WINDOW
        files, start, end = lcb_window(window)
        rules = protocols.rules(code_protocol)
        dates = f"contest dates {start:%Y-%m-%d} <= d < {end:%Y-%m-%d}" if start else "every problem"
        expected = expected_problems(spec)
        return (f"hub {LCB_HUB} ({'+'.join(files)}), {dates} ({window}"
                + (f": expected {expected} problems" if expected else "") + "); AceReason's code prompt; "
                f"protocol {code_protocol}: public + private tests, {rules['time_limit_s']} s per test, "
                f"{rules['memory_mb']} MB, modules {', '.join(rules['modules']) or 'none'}")
    if name == "deepcoder":
        return (f"hub {DEEPCODER_HUB} ({arg or '+'.join(DEEPCODER_CONFIGS)}, {DEEPCODER_SPLIT}); AceReason's code "
                f"prompt; TACO/PrimeIntellect: at most {TRAIN_MAX_TESTS} tests, {TRAIN_TIME_LIMIT_S} s each; "
                f"LiveCodeBench rows: every test, protocol {DEEPCODER_LCB_PROTOCOL}")
    return spec


def availability(spec):
    """Why a named set would be skipped here, judged without the network (None: it may load; a dry run says
    so without fetching anything)."""
    name = base_name(spec)
    module = "huggingface_hub" if name == "livecodebench" else "datasets"
    try:
        __import__(module)
    except ImportError:
        return f"needs the `{module}` package (pip install {DATASETS_REQUIREMENT})"
    if name in GPQA_CONFIGS and not hf_token():
        return (f"{GPQA_HUB} is gated: no Hugging Face token here (accept its terms on huggingface.co, then set "
                f"HF_TOKEN or run `hf auth login`)")
    return None


def named_rows(spec, log=print):
    """(where, [(location, row in our schema)]) of a named hub set; DatasetError (HubUnavailable when the hub,
    a package or a token is missing). Malformed rows are skipped and counted: load_report(spec)."""
    error = spec_error(spec)
    if error:
        raise DatasetError(error)
    if isinstance(_CACHE.get(spec), HubUnavailable):
        raise _CACHE[spec]
    if spec not in _CACHE:
        try:
            _CACHE[spec] = _load_named(spec, log)
        except HubUnavailable as exc:
            _CACHE[spec] = exc
            raise
    where, rows, _ = _CACHE[spec]
    return where, [(location, dict(row)) for location, row in rows]


def load_report(spec):
    """What loading a named set found, once it is loaded (else None): {"rows": rows read (in the window),
    "problems": problems kept, "malformed": [(location, why)], "expected": the published column's count or None}."""
    loaded = _CACHE.get(spec)
    if not isinstance(loaded, tuple):
        return None
    return dict(loaded[2])


def _load_named(spec, log):
    """A named set from the hub: (where, [(location, row in our schema)], report)."""
    name, _, arg = spec.partition(":")
    report, unreadable = {"malformed": [], "expected": expected_problems(spec)}, 0
    if name in GPQA_CONFIGS:
        where = f"{GPQA_HUB}:{name}"
        raw = [(f"row {k}", r) for k, r in enumerate(hub_rows(spec, GPQA_HUB, name, GPQA_SPLIT, gated=True))]
        rows = convert_rows(raw, where, name, log, report=report, kind="gpqa") if raw else []
    elif name == "livecodebench":
        where = f"{LCB_HUB}:{arg or LCB_DEFAULT_WINDOW}"
        raw = livecodebench_rows(spec, arg or LCB_DEFAULT_WINDOW, malformed=report["malformed"])
        unreadable = len(report["malformed"])   # lines without JSON or a date: counted with the window's rows
        rows = convert_rows(raw, LCB_HUB, "livecodebench", log, report=report, kind="livecodebench") if raw else []
    else:
        where, rows, raw = f"{DEEPCODER_HUB}:{arg or '+'.join(DEEPCODER_CONFIGS)}", [], []
        for config in (arg.split("+") if arg else DEEPCODER_CONFIGS):
            part = [(f"row {k}", r) for k, r in enumerate(hub_rows(spec, DEEPCODER_HUB, config, DEEPCODER_SPLIT))]
            raw += part
            for location, row in convert_rows(part, f"{DEEPCODER_HUB}:{config}", "deepcoder", log, report=report,
                                              kind="deepcoder"):
                rows.append((location, {**row, "id": f"{config}-{location.split()[-1]}"}))
    if not rows:
        raise DatasetError(f"{spec}: no problems (window or config empty?)")
    report.update(rows=len(raw) + unreadable, problems=len(rows))
    return where, rows, report


def is_code(spec):
    return base_name(spec) in CODE_NAMES

