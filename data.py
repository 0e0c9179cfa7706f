"""The records that flow through the loop, datasets, prompt templates and batching.

A problem is a dict in one schema everywhere: {"id": str, "problem": str, "answer": str, ...optional fields}; a
code problem has "tests" (the dict code_reward.py takes; see validate_tests) instead of "answer". A response is a
Sample: what both engines return (rollout.py, hf_engine.py) and what the trainers batch (batching.collate).

    load_dataset("math500")                       a set shipped in data/ (see data/README.md)
    load_dataset("path/to/file.jsonl")            .jsonl, .jsonl.gz, .json, .parquet
    load_dataset("hub:org/name:train")            a Hugging Face hub dataset (`datasets`, which setup.sh installs)
    load_dataset("hub:openai/gsm8k:main:test")    ... with its config name (parse_hub_spec)
    load_dataset("math_train12k,gsm8k_train")     several, concatenated (ids prefixed with their set's name)
    load_dataset("gpqa_diamond")                  a set the seed tables need from the hub, converted with its
                                                  protocol: gpqa_diamond, livecodebench[:window], deepcoder[:config]
                                                  (hub_sets.py; a file in their column layouts loads the same way)

render_prompt(problem, tokenizer, template) -> prompt token ids, for a name in TEMPLATES (the one table of
formats) or a template file: plain text with {problem}, or a .json chat conversation (read_template).
PromptBatcher: seeded per-epoch shuffling, a cursor that is saved with checkpoints, sharding by rank.
"""
import functools
import gzip
import json
import random
import re
from dataclasses import dataclass
from pathlib import Path

import hub_sets  # below this file: it imports nothing of ours but protocols.py
import protocols
from sandbox import MAX_MEMORY_MB, SANDBOX_MODULES  # what a problem's tests may ask of the sandbox
from hub_sets import DatasetError  # re-exported: data.DatasetError is what callers catch

DATA_DIR = Path(__file__).resolve().parent / "data"
SHIPPED_EVAL = ("math500", "aime2024", "aime2025", "amc2023", "gsm8k_test", "minerva_math", "olympiadbench",
                "gaokao2023en", "college_math", "mbpp_test", "humaneval")
SHIPPED_TRAIN = ("math_train12k", "gsm8k_train", "aime_1983_2023", "mbpp_train", "mbpp_valid", "stdio_demo")



# ------------------------------------------------------------------------------------------------------------
# Samples: what an engine returns for a prompt (rollout.py, hf_engine.py) and what the trainers consume
# ------------------------------------------------------------------------------------------------------------
@dataclass
class Sample:
    """One generated response. Lists are plain Python (cheap to pass around and to write as JSON)."""
    prompt_ids: list          # [P] prompt token ids
    response_ids: list        # [R] generated token ids, including the EOS token when the model sampled it
    logprobs: list            # [R] sampler log-probs of response_ids (after temperature / top-p); None when not
                              # asked for (evaluation: rollout.VLLMEngine.generate(logprobs=False))
    finish_reason: str        # "stop" (EOS or stop token) or "length" (cut off at max_tokens: truncated)
    text: str                 # decoded response_ids, special tokens removed


def check_prompt_ids(prompt_token_ids):
    """What both engines take as prompts: a non-empty list of non-empty token id lists."""
    if not prompt_token_ids or not all(isinstance(p, (list, tuple)) and len(p) > 0 for p in prompt_token_ids):
        raise ValueError("prompt_token_ids must be a non-empty list of non-empty token id lists")


# ------------------------------------------------------------------------------------------------------------
# Prompt templates
# ------------------------------------------------------------------------------------------------------------
BOXED_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."

# The training prompt of Perplexity's "RL Training for Math Reasoning" (2025), verbatim (R1-Zero style, <think> /
# <answer> tags): one line ending in "Assistant: " with a trailing space and NO <think> after it -- the model opens
# the tag itself. Rendered as plain text, no chat template (no system prompt: it is itself the conversation).
THINK_ANSWER_TEMPLATE = (
    "A conversation between User and Assistant. The user asks a question, and the Assistant solves it. The "
    "assistant first thinks about the reasoning process in the mind and then provides the user with the answer. "
    "The reasoning process and answer are enclosed within <think></think> and <answer></answer> tags, "
    "respectively, i.e., <think>reasoning process here</think> <answer>answer here</answer>. User: {problem} "
    "Assistant: "
)
# Evaluation prompt of the same study's kind: plain text, final answer in \boxed{}.
BOXED_TEMPLATE = "{problem}\n" + BOXED_INSTRUCTION

# Code problems (rows with `tests`): code_reward.extract_program grades the LAST ```python block of the response.
CODE_INSTRUCTION = ("Write a complete Python program that solves the problem; put the whole program in one ```python "
                    "code block at the end of your response.")

# The one table of prompt formats: a new format is one entry. An entry is what a --template file holds: a STRING is
# plain text (no chat template), a LIST of {role, content} messages is a conversation rendered with the tokenizer's
# chat template (the model writes the next assistant turn). "{problem}" is replaced by the problem's text.
TEMPLATES = {
    # DeepSeek-R1-Distill, AceMath-RL, Qwen2.5-Math-Instruct
    "chat": [{"role": "user", "content": "{problem}\n" + BOXED_INSTRUCTION}],
    # code problems (rows with tests)
    "code": [{"role": "user", "content": "{problem}\n" + CODE_INSTRUCTION}],
    # sets whose loader writes the instruction into the problem: gpqa_diamond, livecodebench, deepcoder (hub_sets.py)
    "chat_raw": [{"role": "user", "content": "{problem}"}],
    # the R1-Zero style training prompt of the Perplexity study (no chat template)
    "think_answer": THINK_ANSWER_TEMPLATE,
    # the evaluation prompt for base models
    "boxed": BOXED_TEMPLATE,
}
TEMPLATE_HELP = ("a name in data.TEMPLATES (" + ", ".join(TEMPLATES) + "), or a file: plain text with {problem} "
                 "(no chat template), or a .json chat conversation, a list of {\"role\", \"content\"} messages with "
                 "{problem} in one (rendered with the tokenizer's chat template)")


def read_template(path):
    """A --template file -> its format (what a TEMPLATES entry holds), or ValueError naming the file and what is
    wrong. A name ending in .json is a chat conversation: a JSON list of {"role": str, "content": str} messages,
    "{problem}" in at least one content; when the last message is the assistant's, the model continues it (a
    prefill). Any other file is plain text holding "{problem}", used as written (no chat template, no strip)."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"template {path}: cannot be read ({exc})") from None
    if not str(path).lower().endswith(".json"):
        if "{problem}" not in text:
            raise ValueError(f"template {path}: a plain-text template needs the placeholder {{problem}} (where the "
                             f"problem's text goes); a chat conversation is a .json file")
        return text
    try:
        messages = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"template {path}:{exc.lineno}: unreadable JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(messages, list) or not messages:
        raise ValueError(f"template {path}: a chat template file is a non-empty JSON list of messages "
                         f"[{{\"role\": \"user\", \"content\": \"... {{problem}} ...\"}}], got "
                         f"{json.dumps(messages)[:60]}")
    for k, message in enumerate(messages):
        if not isinstance(message, dict) or set(message) != {"role", "content"} or \
                not all(isinstance(message[key], str) for key in ("role", "content")):
            raise ValueError(f"template {path}: message {k} must be an object with exactly the string fields role "
                             f"and content, got {json.dumps(message)[:120]}")
    if not any("{problem}" in message["content"] for message in messages):
        raise ValueError(f"template {path}: no message holds the placeholder {{problem}} (where the problem's text "
                         f"goes)")
    return messages


def template_format(template):
    """A template name or file -> its format: a string (plain text) or a list of messages (chat)."""
    if template in TEMPLATES:
        return TEMPLATES[template]
    if not Path(template).is_file():
        raise ValueError(f"unknown template {template!r}: not one of {', '.join(TEMPLATES)} and not a file")
    return _read_template_cached(str(Path(template).resolve()), Path(template).stat().st_mtime_ns)


@functools.lru_cache(maxsize=16)
def _read_template_cached(path, mtime_ns):   # render_prompt runs per problem: read a file once (again if edited)
    return read_template(path)


def template_error(template):
    """What is wrong with a --template value (a message naming the file), or None."""
    try:
        template_format(template)
    except ValueError as exc:
        return str(exc)
    return None


def render_prompt(problem, tokenizer, template="chat"):
    """Problem text -> prompt token ids (list[int]) for `tokenizer` under a template: a name in TEMPLATES or a
    template file (read_template). Plain text gets the tokenizer's own prefix (a BOS: text_prefix_ids); a
    conversation goes through the tokenizer's chat template, with the generation prompt after it (or, when its last
    message is the assistant's, that message continued)."""
    form = template_format(template)
    if isinstance(form, str):
        return text_prefix_ids(tokenizer) + tokenizer.encode(form.replace("{problem}", problem),
                                                             add_special_tokens=False)
    messages = [{"role": m["role"], "content": m["content"].replace("{problem}", problem)} for m in form]
    prefill = messages[-1]["role"] == "assistant"
    extra = {"continue_final_message": True} if prefill else {}   # (asked only when used: not every tokenizer has it)
    ids = tokenizer.apply_chat_template(messages, add_generation_prompt=not prefill, tokenize=True, **extra)
    if isinstance(ids, dict) or hasattr(ids, "input_ids"):  # some versions return a BatchEncoding
        ids = ids["input_ids"]
    return list(ids)


def text_prefix_ids(tokenizer):
    """The token ids the tokenizer's own post-processor puts before a text: Llama-3's [<|begin_of_text|>] (added by
    the TemplateProcessing of its tokenizer.json), [] for Qwen2.5 and others that add nothing. What it would put
    AFTER the text (an EOS, with some configs) is left out: it would end the prompt. The plain-text templates use
    this; a chat template writes its own BOS, and transformers' apply_chat_template tokenizes the rendered text
    with add_special_tokens=False (tokenization_utils_base.py), so a chat prompt never gets two.
    Not `tokenizer.add_bos_token`: transformers 5 drops that flag whenever a tokenizer.json exists
    (tokenization_utils_base.py: `init_kwargs.pop("add_bos_token", None)`), and it then reads False."""
    plain, full = tokenizer.encode("1", add_special_tokens=False), tokenizer.encode("1", add_special_tokens=True)
    for start in range(len(full) - len(plain) + 1):
        if full[start:start + len(plain)] == plain:
            return full[:start]
    return []


def prompt_opens_think(tokenizer, template):
    """Does the rendered prompt end inside an opened <think> block (DeepSeek-R1-Distill's chat template appends
    `<think>\n`)? Then a response with no `</think>` was cut off mid-thought: reward.py grades it with
    think_prefilled=True, and its tentative answers earn nothing."""
    ids = render_prompt("1 + 1 = ?", tokenizer, template)
    return tokenizer.decode(ids[-8:]).rstrip().endswith("<think>")


# ------------------------------------------------------------------------------------------------------------
# Loading and validation
# ------------------------------------------------------------------------------------------------------------
def _answer_text(value):
    """Gold answers as strings: 13.0 -> '13' (AMC golds stored as floats), 7 -> '7', and GSM8K's worked solution
    ending in '#### 72' (hub:openai/gsm8k's answer column) -> '72'."""
    if isinstance(value, str) and "####" in value:
        return value.rsplit("####", 1)[1].strip()
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, (int, float)):
        return str(value)
    return value


_TESTS_KEYS = {"functional": {"kind", "asserts", "prelude", "setup", "entry_point", "time_limit_s", "modules",
                              "memory_mb"},
               "stdio": {"kind", "cases", "prelude", "compare", "time_limit_s", "modules", "memory_mb"}}
# tests graded by a published protocol (protocols.py): the cases as the source wrote them
_PROTOCOL_KEYS = {"kind", "protocol", "cases", "func_name", "starter_code", "time_limit_s", "modules", "memory_mb"}
STDIO_COMPARE = ("exact", "lcb")   # code_reward.same_output, code_reward.same_output_lcb (LiveCodeBench's)


def validate_tests(tests, field="tests"):
    """The `tests` of a code problem -> (tests as a dict, None) or (None, "field '<field>...': what is wrong").
    A JSON string is parsed (hub datasets often store tests that way). Test code must compile.
        {"kind": "functional", "asserts": [str, ...], "prelude": str, "setup": str, "entry_point": str}
        {"kind": "stdio", "cases": [{"input": str, "output": str}, ...], "prelude": str, "compare": "exact"|"lcb"}
        {"kind": ..., "protocol": "acereason"|"lcb", "cases": [...], "func_name": str, "starter_code": str}
    Either kind may carry "time_limit_s": a limit per test (per call, per case), as LiveCodeBench runs them;
    "modules": third-party packages the program may import (each one of sandbox.SANDBOX_MODULES); "memory_mb":
    the program's memory in MB (1 .. sandbox.MAX_MEMORY_MB)."""
    if isinstance(tests, str):
        try:
            tests = json.loads(tests)
        except json.JSONDecodeError as exc:
            return None, f"field '{field}': a string that is not JSON ({exc.msg})"
    if not isinstance(tests, dict):
        return None, f"field '{field}': expected an object, got {type(tests).__name__}"
    kind = tests.get("kind")
    if kind not in _TESTS_KEYS:
        return None, f"field '{field}.kind': must be 'functional' or 'stdio', got {kind!r}"
    keys = _PROTOCOL_KEYS if "protocol" in tests else _TESTS_KEYS[kind]
    unknown = sorted(set(tests) - keys)
    if unknown:
        return None, f"field '{field}.{unknown[0]}': not a field of {kind} tests ({sorted(keys)})"
    limit = tests.get("time_limit_s")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, (int, float)) or not 0 < limit < 3600):
        return None, f"field '{field}.time_limit_s': expected seconds per test (0 < s < 3600), got {limit!r}"
    modules = tests.get("modules", [])
    if not isinstance(modules, list) or not all(isinstance(m, str) and m in SANDBOX_MODULES for m in modules):
        return None, f"field '{field}.modules': expected a list of packages among {list(SANDBOX_MODULES)}, got {modules!r}"
    memory = tests.get("memory_mb")
    if memory is not None and (type(memory) is not int or not 0 < memory <= MAX_MEMORY_MB):
        return None, f"field '{field}.memory_mb': expected megabytes (an int, 1 .. {MAX_MEMORY_MB}), got {memory!r}"
    if "protocol" in tests:
        error = protocols.check_tests(tests)
        return (None, error.replace("'tests.", f"'{field}.")) if error else (tests, None)
    if kind == "functional":
        asserts = tests.get("asserts")
        if not isinstance(asserts, list) or not asserts:
            return None, f"field '{field}.asserts': expected a non-empty list of test statements"
        code = [(f"asserts[{k}]", a) for k, a in enumerate(asserts)] + \
               [(key, tests[key]) for key in ("prelude", "setup") if key in tests]
        for name, text in code:
            if not isinstance(text, str):
                return None, f"field '{field}.{name}': expected a string, got {type(text).__name__}"
            try:
                compile(text, name, "exec")
            except (SyntaxError, ValueError) as exc:
                return None, f"field '{field}.{name}': not valid Python ({exc.msg if hasattr(exc, 'msg') else exc})"
        entry = tests.get("entry_point")
        if entry is not None and not (isinstance(entry, str) and entry.isidentifier()):
            return None, f"field '{field}.entry_point': expected a function name, got {entry!r}"
    else:
        if tests.get("compare", "exact") not in STDIO_COMPARE:
            return None, f"field '{field}.compare': expected one of {STDIO_COMPARE}, got {tests['compare']!r}"
        if "prelude" in tests:
            if not isinstance(tests["prelude"], str):
                return None, f"field '{field}.prelude': expected a string, got {type(tests['prelude']).__name__}"
            try:
                compile(tests["prelude"], "prelude", "exec")
            except (SyntaxError, ValueError) as exc:
                return None, f"field '{field}.prelude': not valid Python ({exc.msg if hasattr(exc, 'msg') else exc})"
        cases = tests.get("cases")
        if not isinstance(cases, list) or not cases:
            return None, f"field '{field}.cases': expected a non-empty list of {{input, output}}"
        for k, case in enumerate(cases):
            if not isinstance(case, dict) or set(case) != {"input", "output"}:
                return None, f"field '{field}.cases[{k}]': expected exactly the keys input and output"
            for key in ("input", "output"):
                if not isinstance(case[key], str):
                    return None, f"field '{field}.cases[{k}].{key}': expected a string, got {type(case[key]).__name__}"
    return tests, None


def _validate(rows, where, source, fields, require_answer=True):
    """rows: list of (location, raw dict). Returns problems in our schema or raises DatasetError. A row needs a
    problem and either a gold answer (math) or tests (code); with require_answer=False (rewards of the user's own,
    train.py --reward) a problem alone, the row's other columns kept as they are."""
    id_field, problem_field, answer_field, tests_field = fields
    if fields == ("id", "problem", "answer", "tests"):  # LiveCodeBench's, DeepCoder's or GPQA's layout: converted
        rows = hub_sets.convert_rows(rows, where, source)
    problems, seen = [], {}
    for location, row in rows:
        if not isinstance(row, dict):
            raise DatasetError(f"{where}:{location}: expected a JSON object, got {type(row).__name__}")
        problem = row.get(problem_field)
        if not isinstance(problem, str) or not problem.strip():
            raise DatasetError(f"{where}:{location}: missing or empty '{problem_field}'")
        tests = None
        if row.get(tests_field) is not None:
            tests, error = validate_tests(row[tests_field], tests_field)
            if error:
                raise DatasetError(f"{where}:{location}: {error}")
        else:
            answer = _answer_text(row.get(answer_field))
            answer = answer.strip() if isinstance(answer, str) and answer.strip() else None
            if answer is None and require_answer:
                raise DatasetError(f"{where}:{location}: missing or empty '{answer_field}' (or '{tests_field}' "
                                   f"for a code problem)")
        pid = row.get(id_field)
        pid = f"{source}-{location}" if pid is None or pid == "" else str(pid)
        if pid in seen:
            raise DatasetError(f"{where}:{location}: duplicate id {pid!r} (first at {seen[pid]})")
        seen[pid] = location
        out = {k: v for k, v in row.items() if k not in (id_field, problem_field, answer_field, tests_field)}
        out.update(id=pid, problem=problem)
        if tests is not None:
            out["tests"] = tests
        elif answer is not None:
            out["answer"] = answer
        elif row.get(answer_field) is not None:   # require_answer=False: the column as it is (a list, a number...)
            out["answer"] = row[answer_field]
        out.setdefault("source", source)
        problems.append(out)
    if not problems:
        raise DatasetError(f"{where}: no rows")
    return problems


def _read_json_lines(path):
    opener = gzip.open if path.suffix == ".gz" else open
    rows = []
    with opener(path, "rt", encoding="utf-8") as f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rows.append((line_no, json.loads(line)))
            except json.JSONDecodeError as exc:
                raise DatasetError(f"{path}:{line_no}: unreadable JSON ({exc.msg} at column {exc.colno})") from None
    return rows


def _read_file(path):
    name = path.name.lower()
    if name.endswith(".jsonl") or name.endswith(".jsonl.gz"):
        return _read_json_lines(path)
    if name.endswith(".json"):
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except json.JSONDecodeError as exc:
            raise DatasetError(f"{path}:{exc.lineno}: unreadable JSON ({exc.msg})") from None
        if isinstance(data, dict) and isinstance(data.get("data"), list):
            data = data["data"]
        if not isinstance(data, list):
            raise DatasetError(f"{path}: expected a JSON list of rows (or {{'data': [...]}})")
        return [(f"row {k}", row) for k, row in enumerate(data)]
    if name.endswith(".parquet"):
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise DatasetError(f"{path}: reading parquet needs pyarrow (pip install pyarrow)") from None
        return [(f"row {k}", row) for k, row in enumerate(pq.read_table(path).to_pylist())]
    raise DatasetError(f"{path}: unsupported file type (use .jsonl, .jsonl.gz, .json or .parquet)")


# ------------------------------------------------------------------------------------------------------------
# Hugging Face hub datasets: hub:org/name[:config][:split]
# ------------------------------------------------------------------------------------------------------------
HUB_SPLITS = ("train", "test", "validation", "valid", "dev")  # one field after the name is a split if it is one
HUB_DEFAULT_SPLIT = "train"


def parse_hub_spec(spec):
    """'hub:org/name[:config][:split]' -> (name, config or None, split), or DatasetError for a malformed spec.
        hub:org/name                    the default config, split train
        hub:org/name:test               one field: a split when it is one of HUB_SPLITS (sliced too: train[:1000]) ...
        hub:openai/gsm8k:main           ... else a config (split train): gsm8k has no default config
        hub:openai/gsm8k:main:test      config, then split
    `name` is whatever datasets.load_dataset takes: a hub id, or a local folder in the hub's layout."""
    fields = re.split(r":(?![^\[]*\])", spec[len("hub:"):])   # a ':' inside a slice (train[:100]) is not a field
    name, rest = fields[0], fields[1:]
    if not name or len(rest) > 2 or any(not f for f in rest):
        raise DatasetError(f"{spec}: expected hub:org/name[:config][:split]")
    if len(rest) == 2:
        return name, rest[0], rest[1]
    if rest and re.fullmatch(r"(?:%s)(?:\[[^\]]*\])?" % "|".join(HUB_SPLITS), rest[0]) is None:
        return name, rest[0], HUB_DEFAULT_SPLIT
    return name, None, rest[0] if rest else HUB_DEFAULT_SPLIT


def _import_datasets(spec):
    try:
        import datasets  # only hub: specs need the `datasets` package
    except ImportError:
        raise DatasetError(f"{spec}: loading from the hub needs the `datasets` package, which setup.sh installs "
                           f"(requirements-common.txt); or `pip install datasets`") from None
    return datasets


def check_hub_spec(spec, probe=False):
    """What can be known of a hub: spec before any data is read: (error or None, note or None). Always its syntax and
    the `datasets` package; with probe (dry runs), its config and split, from the dataset's metadata only
    (datasets.load_dataset_builder reads the card and the file list, no rows). Offline (HF_HUB_OFFLINE=1) or with
    the hub out of reach, a dataset not in the local cache is not checked: the note says so. A gated or private
    dataset needs `hf auth login` (or HF_TOKEN) first."""
    try:
        name, config, split = parse_hub_spec(spec)
        datasets = _import_datasets(spec)
    except DatasetError as exc:
        return str(exc), None
    if not probe:
        return None, None
    try:
        builder = datasets.load_dataset_builder(name, config)
    except ValueError as exc:  # "Config name is missing ... available configs", "BuilderConfig 'x' not found"
        return f"{spec}: {' '.join(str(exc).split())}".replace("Example of usage: ", "e.g. "), None
    except ConnectionError as exc:  # offline, or the hub out of reach: nothing cached to check against
        return None, f"{spec}: not checked against the hub ({' '.join(str(exc).split())[:120]})"
    except Exception as exc:  # noqa: BLE001 -- no such dataset, gated, private: datasets raises several kinds
        return f"{spec}: {type(exc).__name__}: {' '.join(str(exc).split())[:300]} (a gated or private dataset " \
               f"needs `hf auth login` or HF_TOKEN)", None
    splits = list(builder.config.data_files or {}) or list(builder.info.splits or {})
    if splits and split.split("[")[0] not in splits:
        return f"{spec}: no split {split.split('[')[0]!r} in config {builder.config.name!r} (splits: {splits})", None
    return None, None


def _load_one(spec, fields, validate=_validate):
    if hub_sets.is_named(spec):  # gpqa_diamond, livecodebench[:window], deepcoder[:config]
        if validate is _validate_sft:
            raise DatasetError(f"{spec}: a hub evaluation / RL set, not worked examples for SFT")
        where, rows = hub_sets.named_rows(spec)
        return validate(rows, where, hub_sets.base_name(spec), fields)
    if spec.startswith("hub:"):
        name, config, split = parse_hub_spec(spec)
        table = _import_datasets(spec).load_dataset(name, config, split=split)
        return validate([(f"row {k}", dict(r)) for k, r in enumerate(table)], spec, name.split("/")[-1], fields)
    if spec in SHIPPED_EVAL + SHIPPED_TRAIN:
        return validate(_read_json_lines(DATA_DIR / f"{spec}.jsonl.gz"), f"data/{spec}.jsonl.gz", spec, fields)
    path = Path(spec)
    if not path.exists():
        raise DatasetError(f"{spec}: not a shipped set ({', '.join(SHIPPED_EVAL + SHIPPED_TRAIN)}), "
                           f"not an existing file, and not hub:org/name[:config][:split]")
    source = path.name.split(".")[0]
    return validate(_read_file(path), str(path), source, fields)


def _load_specs(spec, fields, validate):
    specs = [s.strip() for s in spec.split(",") if s.strip()]
    if not specs:
        raise DatasetError("empty dataset spec")
    if len(specs) == 1:
        return _load_one(specs[0], fields, validate)
    rows = []
    for one in specs:
        tag = Path(one).name.split(".")[0] if not one.startswith("hub:") else one[4:].replace("/", "_")
        for p in _load_one(one, fields, validate):
            rows.append({**p, "id": f"{tag}/{p['id']}"})
    return rows


def is_hub_set(spec):
    """Is spec one of the named hub sets (gpqa_diamond, livecodebench[:window], deepcoder[:config]; hub_sets.py)?"""
    return hub_sets.is_named(spec)


def unknown_specs(specs, probe_hub=False, log=print):
    """For each data spec that is not a shipped set, a named hub set (hub_sets.py), an existing file or a usable
    hub:org/name[:config][:split]: (message, looks like a path). A path may be one an earlier recipe stage creates,
    so a dry run only notes it. A hub: spec is checked by check_hub_spec (probe_hub: its config and split too;
    what could not be checked is logged)."""
    shipped = SHIPPED_TRAIN + SHIPPED_EVAL
    problems = []
    for spec in specs:
        if spec.startswith("hub:"):
            error, note = check_hub_spec(spec, probe_hub)
            problems += [(f"data {error}", False)] if error else []
            if note:
                log(f"data: {note}")
        elif hub_sets.is_named(spec):
            error = hub_sets.spec_error(spec)
            problems += [(f"data {error}", False)] if error else []
        elif spec and not (spec in shipped or Path(spec).exists()):
            problems.append((f"data {spec!r}: not a shipped set ({', '.join(shipped)}), a hub set "
                             f"({', '.join(hub_sets.NAMES)}), an existing file, or hub:org/name[:config][:split]",
                             "/" in spec or "." in spec))
    return problems


def has_code_rows(spec):
    """Does a shipped set or an existing local file hold code problems (rows with tests)? Read without validating
    (a shipped set: its first row). A named hub set (hub_sets.py): by its kind. hub: sets and paths not there yet:
    False (not known before loading)."""
    if hub_sets.is_named(spec):
        return hub_sets.is_code(spec)
    if spec in SHIPPED_EVAL + SHIPPED_TRAIN:
        with gzip.open(DATA_DIR / f"{spec}.jsonl.gz", "rt", encoding="utf-8") as f:
            return json.loads(f.readline()).get("tests") is not None
    try:
        return Path(spec).is_file() and any(isinstance(r, dict) and r.get("tests") is not None
                                            for _, r in _read_file(Path(spec)))
    except DatasetError:
        return False


def load_dataset(spec, id_field="id", problem_field="problem", answer_field="answer", tests_field="tests", *,
                 require_answer=True):
    """Problems from a shipped name, a local file, or hub:org/name[:config][:split]; a comma-separated list mixes sets
    (then ids become '<set>/<id>' so they stay unique). The *_field arguments map other column names.
    require_answer=False: rows need no answer or tests (a task graded by the user's own reward: reward.py)."""
    validate = _validate if require_answer else functools.partial(_validate, require_answer=False)
    return _load_specs(spec, (id_field, problem_field, answer_field, tests_field), validate)


# ------------------------------------------------------------------------------------------------------------
# Worked examples for supervised fine-tuning (sft.py)
# ------------------------------------------------------------------------------------------------------------
def _validate_sft(rows, where, source, fields):
    """rows: list of (location, raw dict) -> worked examples, or DatasetError naming the file, line and field.
    A row is either a problem with its worked solution (answer optional) or a chat conversation."""
    id_field, problem_field, solution_field, answer_field, messages_field = fields
    examples, seen = [], {}
    for location, row in rows:
        if not isinstance(row, dict):
            raise DatasetError(f"{where}:{location}: expected a JSON object, got {type(row).__name__}")
        pid = row.get(id_field)
        pid = f"{source}-{location}" if pid is None or pid == "" else str(pid)
        if pid in seen:
            raise DatasetError(f"{where}:{location}: duplicate id {pid!r} (first at {seen[pid]})")
        seen[pid] = location
        messages = row.get(messages_field)
        if messages is not None:
            if not (isinstance(messages, list) and len(messages) >= 2
                    and all(isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str)
                            for m in messages)
                    and messages[-1]["role"] == "assistant" and messages[-1]["content"].strip()):
                raise DatasetError(f"{where}:{location}: '{messages_field}' must be a list of {{'role', 'content'}} "
                                   f"strings, at least two, ending with a non-empty assistant turn")
            examples.append({"id": pid, "messages": messages, "source": source})
            continue
        problem, solution = row.get(problem_field), row.get(solution_field)
        answer = _answer_text(row.get(answer_field))
        if not isinstance(problem, str) or not problem.strip():
            raise DatasetError(f"{where}:{location}: missing or empty '{problem_field}' (and no '{messages_field}')")
        if not isinstance(solution, str) or not solution.strip():
            raise DatasetError(f"{where}:{location}: missing or empty '{solution_field}': SFT needs a worked "
                               f"solution per problem (or a chat '{messages_field}' list)")
        if answer is not None and not isinstance(answer, str):
            raise DatasetError(f"{where}:{location}: '{answer_field}' must be a string when given")
        answer = answer if answer and answer.strip() else None   # an empty answer is no answer
        examples.append({"id": pid, "problem": problem, "solution": solution.strip(),
                         "answer": answer.strip() if answer else None, "source": source})
    if not examples:
        raise DatasetError(f"{where}: no rows")
    return examples


def load_sft_dataset(spec, *, id_field="id", problem_field="problem", solution_field="solution",
                     answer_field="answer", messages_field="messages"):
    """Worked examples from the same sources as load_dataset (shipped names, files, hub:..., comma-separated):
    {"id", "problem", "solution", "answer" (or None)} for problem/solution rows (shipped: math500, gsm8k_test,
    minerva_math, aime2024 have solutions), or {"id", "messages"} for rows holding a chat conversation."""
    return _load_specs(spec, (id_field, problem_field, solution_field, answer_field, messages_field), _validate_sft)


def normalize_problem_text(text):
    """Text key for contamination checks: lowercase, $ and whitespace runs removed."""
    return re.sub(r"\s+", " ", text.replace("$", "")).strip().lower()


def find_contamination(train_problems, eval_specs=SHIPPED_EVAL):
    """Training problems whose normalized text also appears in an evaluation set.
    Returns a list of (train_id, eval_set, eval_id)."""
    train_keys = {}
    for p in train_problems:
        train_keys.setdefault(normalize_problem_text(p["problem"]), []).append(p["id"])
    hits = []
    for spec in eval_specs:
        try:
            evaluation = load_dataset(spec)
        except hub_sets.HubUnavailable as exc:   # not checked against a hub set that cannot be loaded here
            print(f"data.py: contamination not checked against {spec}: {exc}")
            continue
        for e in evaluation:
            for train_id in train_keys.get(normalize_problem_text(e["problem"]), ()):
                hits.append((train_id, spec, e["id"]))
    return hits


# ------------------------------------------------------------------------------------------------------------
# Difficulty filtering (AceMath-RL stage 3)
# ------------------------------------------------------------------------------------------------------------
def read_pass_rates(path):
    """eval.py's pass-rate file (JSONL of id, correct, total) -> {id: (correct, total)}."""
    rates = {}
    for line_no, row in _read_json_lines(Path(path)):
        try:
            rates[str(row["id"])] = (int(row["correct"]), int(row["total"]))
        except (KeyError, TypeError, ValueError):
            raise DatasetError(f"{path}:{line_no}: need 'id', 'correct' and 'total'") from None
    return rates


def filter_by_pass_rate(problems, pass_rates, low=0.0, high=1.0):
    """Keep problems whose measured pass rate correct/total lies in [low, high] (e.g. high=6/16 keeps the hard
    ones; low=1/16 also drops those never solved). pass_rates: dict id -> (correct, total), or a file path.
    Problems without a measurement are dropped (and counted in the returned dict)."""
    if not isinstance(pass_rates, dict):
        pass_rates = read_pass_rates(pass_rates)
    kept, missing = [], 0
    for p in problems:
        if p["id"] not in pass_rates:
            missing += 1
            continue
        correct, total = pass_rates[p["id"]]
        if total > 0 and low - 1e-12 <= correct / total <= high + 1e-12:
            kept.append(p)
    return kept, {"kept": len(kept), "dropped": len(problems) - len(kept) - missing, "unmeasured": missing}


# ------------------------------------------------------------------------------------------------------------
# Batching
# ------------------------------------------------------------------------------------------------------------
class PromptBatcher:
    """Endless iterator over batches of problems: each epoch a fresh shuffle from (seed, epoch), the cursor
    saved with state_dict() so that a resumed run continues with exactly the next batch.

    batch_size is the GLOBAL number of prompts per step; with world_size > 1 each rank gets its slice
    (rank::world_size) of the same global batch, so together the ranks cover every problem exactly once per
    epoch. The last incomplete batch of an epoch is dropped (every step has the same size).
    """

    def __init__(self, problems, batch_size, seed=0, rank=0, world_size=1):
        if batch_size % world_size:
            raise ValueError(f"batch_size {batch_size} must be divisible by world_size {world_size}")
        if len(problems) < batch_size:
            raise ValueError(f"{len(problems)} problems are fewer than one batch of {batch_size}")
        self.problems, self.batch_size, self.seed = problems, batch_size, seed
        self.rank, self.world_size = rank, world_size
        self.epoch, self.cursor = 0, 0
        self._order = self._shuffled(0)

    def _shuffled(self, epoch):
        order = list(range(len(self.problems)))
        random.Random(self.seed * 1_000_003 + epoch).shuffle(order)
        return order

    def __iter__(self):
        return self

    def __next__(self):
        if self.cursor + self.batch_size > len(self._order):
            self.epoch, self.cursor = self.epoch + 1, 0
            self._order = self._shuffled(self.epoch)
        batch = self._order[self.cursor:self.cursor + self.batch_size]
        self.cursor += self.batch_size
        return [self.problems[k] for k in batch[self.rank::self.world_size]]

    def state_dict(self):
        return {"epoch": self.epoch, "cursor": self.cursor, "seed": self.seed, "num_problems": len(self.problems)}

    def load_state_dict(self, state):
        if state["num_problems"] != len(self.problems):
            raise ValueError(f"checkpoint was made with {state['num_problems']} problems, now {len(self.problems)}")
        self.seed, self.epoch, self.cursor = state["seed"], state["epoch"], state["cursor"]
        self._order = self._shuffled(self.epoch)


def data_specs_problems(spec):
    """unknown_specs of a comma-separated spec, hub specs probed (the CLI's dry run)."""
    return unknown_specs([s.strip() for s in spec.split(",") if s.strip()], probe_hub=True)


def main():
    """CLI: write the problems of SPEC whose pass rate lies in [low, high] to a JSONL file (AceMath-RL stage 3)."""
    import argparse
    parser = argparse.ArgumentParser(description="Difficulty filtering: keep problems by measured pass rate.")
    parser.add_argument("spec", help="training set: shipped name, file, or hub:org/name")
    parser.add_argument("--pass_rates", required=True, help="eval.py --pass_rates output (JSONL: id, correct, total)")
    parser.add_argument("--low", type=float, default=0.0, help="keep pass rate >= low (1/16 drops never-solved)")
    parser.add_argument("--high", type=float, default=6 / 16, help="keep pass rate <= high")
    parser.add_argument("--out", required=True, help="output JSONL, loadable with --train_data")
    parser.add_argument("--dry_run", action="store_true", help="check arguments only")
    args = parser.parse_args()
    if not 0 <= args.low <= args.high <= 1:
        parser.error("need 0 <= --low <= --high <= 1")
    if args.dry_run:
        problems = [problem for problem, looks_like_path in data_specs_problems(args.spec) if not looks_like_path]
        if problems:
            parser.error("\n  ".join(problems))
        print("data.py: dry run ok")
        return
    kept, counts = filter_by_pass_rate(load_dataset(args.spec), args.pass_rates, args.low, args.high)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        f.write("".join(json.dumps(p, ensure_ascii=False) + "\n" for p in kept))
    print(f"data.py: {counts} -> {args.out}")


if __name__ == "__main__":
    main()
