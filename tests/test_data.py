"""data.py: shipped sets, file formats, validation errors, contamination, templates, batching, filtering."""
import gzip
import json
from pathlib import Path

import pytest

import data
from data import DatasetError, PromptBatcher, filter_by_pass_rate, load_dataset, render_prompt

ROWS = {  # SOURCES.md counts (aime_1983_2023: 975 minus the 4 MATH-500 problems)
    "math500": 500, "aime2024": 30, "aime2025": 30, "amc2023": 40, "gsm8k_test": 1319, "minerva_math": 272,
    "olympiadbench": 675, "gaokao2023en": 385, "college_math": 2818, "gsm8k_train": 7473, "math_train12k": 11998,
    "aime_1983_2023": 971,
    "mbpp_train": 374, "mbpp_valid": 90, "mbpp_test": 500, "humaneval": 164, "stdio_demo": 6,  # code (rows with tests)
}
CODE_SETS = ("mbpp_train", "mbpp_valid", "mbpp_test", "humaneval", "stdio_demo")


@pytest.mark.parametrize("name", sorted(ROWS))
def test_shipped_sets_load_with_their_row_counts(name):
    problems = load_dataset(name)
    assert len(problems) == ROWS[name]
    assert len({p["id"] for p in problems}) == len(problems)
    if name in CODE_SETS:  # a complete reference program and tests (code_reward.py runs them: test_code_reward)
        assert all(p["problem"].strip() and p["solution"].strip() and "answer" not in p for p in problems)
        assert all(data.validate_tests(p["tests"]) == (p["tests"], None) for p in problems)
        return
    assert all(p["problem"].strip() and p["answer"].strip() for p in problems)
    if name in data.SHIPPED_TRAIN:
        assert not any("solution" in p for p in problems), "training sets ship without solutions"


def test_every_shipped_file_is_listed():
    shipped = {p.name.split(".")[0] for p in data.DATA_DIR.glob("*.jsonl.gz")}
    assert shipped == set(data.SHIPPED_EVAL + data.SHIPPED_TRAIN) == set(ROWS)
    readme = (data.DATA_DIR / "README.md").read_text()
    assert all(name in readme for name in ROWS)


def write_rows(path, rows):
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if path.suffix == ".gz":
        with gzip.open(path, "wt") as f:
            f.write(text)
    else:
        path.write_text(text)


GOOD = [{"id": "a", "problem": "1+1?", "answer": "2"}, {"id": "b", "problem": "2+2?", "answer": 4.0},
        {"problem": "3+3?", "answer": "6", "level": 2}]


@pytest.mark.parametrize("suffix", [".jsonl", ".jsonl.gz", ".json", ".parquet"])
def test_file_formats(tmp_path, suffix):
    path = tmp_path / f"mine{suffix}"
    if suffix == ".json":
        path.write_text(json.dumps(GOOD))
    elif suffix == ".parquet":
        pa = pytest.importorskip("pyarrow")
        import pyarrow.parquet as pq
        # a parquet column has one type: answers as strings here (the float 4.0 case is covered by the others)
        pq.write_table(pa.Table.from_pylist([{**r, "answer": a} for r, a in zip(GOOD, ["2", "4", "6"])]), path)
    else:
        write_rows(path, GOOD)
    problems = load_dataset(str(path))
    assert [p["answer"] for p in problems] == ["2", "4", "6"]
    assert problems[0]["id"] == "a" and problems[2]["id"].startswith("mine-")
    assert problems[0]["source"] == "mine"


def test_json_with_data_key_and_field_mapping(tmp_path):
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"data": [{"q": "x?", "a": "1", "uid": 7}]}))
    problems = load_dataset(str(path), id_field="uid", problem_field="q", answer_field="a")
    assert problems == [{"id": "7", "problem": "x?", "answer": "1", "source": "other"}]


def test_mixing_sets_keeps_ids_unique(tmp_path):
    path = tmp_path / "extra.jsonl"
    write_rows(path, [{"id": "test/algebra/1.json", "problem": "p", "answer": "1"}])
    mixed = load_dataset(f"aime2024,{path}")
    assert len(mixed) == 31
    assert mixed[0]["id"].startswith("aime2024/") and mixed[-1]["id"] == "extra/test/algebra/1.json"


@pytest.mark.parametrize("content,message", [
    ('{"id": "a", "problem": "p", "answer": "1"}\n{"id": "b", "problem": "", "answer": "1"}\n', "bad.jsonl:2: missing or empty 'problem'"),
    ('{"id": "a", "problem": "p"}\n', "bad.jsonl:1: missing or empty 'answer'"),
    ('{"id": "a", "problem": "p", "answer": " "}\n', "bad.jsonl:1: missing or empty 'answer'"),
    ('{"id": "a", "problem": "p", "answer": "1"}\n\n{"id": "a", "problem": "q", "answer": "2"}\n', "bad.jsonl:3: duplicate id 'a' (first at 1)"),
    ('{"id": "a", "problem": "p", "answer": "1"}\n{"id": "b", oops}\n', "bad.jsonl:2: unreadable JSON"),
    ('["not", "an", "object"]\n', "bad.jsonl:1: expected a JSON object"),
    ('', "bad.jsonl: no rows"),
])
def test_malformed_input_names_file_and_line(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(DatasetError) as err:
        load_dataset(str(path))
    assert message in str(err.value)


CODE_ROW = {"id": "c", "problem": "Write f.", "tests": {"kind": "functional", "asserts": ["assert f() == 1"]}}


@pytest.mark.parametrize("tests,message", [
    ({"kind": "unit"}, "bad.jsonl:2: field 'tests.kind': must be 'functional' or 'stdio'"),
    ({"kind": "functional"}, "bad.jsonl:2: field 'tests.asserts': expected a non-empty list"),
    ({"kind": "functional", "asserts": ["assert f(("]}, "bad.jsonl:2: field 'tests.asserts[0]': not valid Python"),
    ({"kind": "functional", "asserts": ["assert 1", 2]}, "bad.jsonl:2: field 'tests.asserts[1]': expected a string"),
    ({"kind": "functional", "asserts": ["assert 1"], "entry_point": "a b"}, "field 'tests.entry_point'"),
    ({"kind": "functional", "asserts": ["assert 1"], "cases": []}, "field 'tests.cases': not a field of functional"),
    ({"kind": "stdio", "cases": [{"input": "1", "output": "1"}, {"input": "2"}]}, "field 'tests.cases[1]': expected exactly"),
    ({"kind": "stdio", "cases": [{"input": 1, "output": "1"}]}, "field 'tests.cases[0].input': expected a string"),
    ("not json", "bad.jsonl:2: field 'tests': a string that is not JSON"),
    ([1], "bad.jsonl:2: field 'tests': expected an object, got list"),
])
def test_malformed_tests_name_file_line_and_field(tmp_path, tests, message):
    path = tmp_path / "bad.jsonl"
    write_rows(path, [CODE_ROW, {**CODE_ROW, "id": "d", "tests": tests}])
    with pytest.raises(DatasetError) as err:
        load_dataset(str(path))
    assert message in str(err.value)


def test_local_code_sets_load_like_shipped_ones(tmp_path):
    stdio = {"kind": "stdio", "cases": [{"input": "1 2", "output": "3"}]}
    path = tmp_path / "mine.jsonl.gz"
    write_rows(path, [CODE_ROW, {"id": "s", "problem": "Add.", "tests": json.dumps(stdio)}])  # hub-style JSON string
    problems = load_dataset(str(path))
    assert problems[0]["tests"] == CODE_ROW["tests"] and problems[1]["tests"] == stdio and "answer" not in problems[1]
    other = tmp_path / "other.jsonl"
    write_rows(other, [{"q": "Add.", "io": stdio}])
    assert load_dataset(str(other), problem_field="q", tests_field="io")[0]["tests"] == stdio
    write_rows(other, [{"q": "Add.", "io": {"kind": "stdio"}}])
    with pytest.raises(DatasetError, match="other.jsonl:1: field 'io.cases'"):
        load_dataset(str(other), problem_field="q", tests_field="io")
    mixed = load_dataset(f"aime2024,{path}")      # math and code rows mix (each is graded by its own data)
    assert sum("tests" in p for p in mixed) == 2 and sum("answer" in p for p in mixed) == 30


def test_unknown_spec_and_type(tmp_path):
    with pytest.raises(DatasetError, match="not a shipped set"):
        load_dataset("no_such_set")
    (tmp_path / "x.csv").write_text("a,b\n")
    with pytest.raises(DatasetError, match="unsupported file type"):
        load_dataset(str(tmp_path / "x.csv"))


def test_hub_path_fails_clearly_without_datasets_package(monkeypatch):
    import builtins
    real_import = builtins.__import__

    def no_datasets(name, *args, **kwargs):
        if name == "datasets":
            raise ImportError("no datasets")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_datasets)
    with pytest.raises(DatasetError, match="pip install datasets"):
        load_dataset("hub:agentica-org/DeepScaleR-Preview-Dataset:train")


def test_contamination_detection(tmp_path):
    m500 = load_dataset("math500")
    train = [{"id": "mine-1", "problem": "  " + m500[3]["problem"].upper().replace(" ", "  ") + " ", "answer": "1"},
             {"id": "mine-2", "problem": "A brand new problem.", "answer": "2"}]
    hits = data.find_contamination(train, ["math500", "aime2024"])
    assert hits == [("mine-1", "math500", m500[3]["id"])]
    assert data.find_contamination(load_dataset("math_train12k"), ["math500"]) == []
    assert data.find_contamination(load_dataset("aime_1983_2023"), ["math500"]) == []
    # code: MBPP train/validation against the code evaluation sets (MBPP test, HumanEval): no overlap
    assert data.find_contamination(load_dataset("mbpp_train,mbpp_valid,stdio_demo"), ["mbpp_test", "humaneval"]) == []
    assert {"mbpp_test", "humaneval"} <= set(data.SHIPPED_EVAL) and not {"mbpp_test", "humaneval"} & set(data.SHIPPED_TRAIN)


@pytest.mark.parametrize("template", sorted(data.TEMPLATES))
def test_templates_render_with_the_tiny_tokenizer(tokenizer, template):
    ids = render_prompt("What is $1+1$?", tokenizer, template)
    text = tokenizer.decode(ids)
    assert "What is $1+1$?" in text and all(isinstance(i, int) for i in ids)
    if template == "chat":
        assert text.startswith("<|im_start|>user\n") and text.endswith("<|im_start|>assistant\n")
        assert "\\boxed{}" in text
    if template == "think_answer":
        assert text.endswith("Assistant: ") and "<answer></answer>" in text   # the study's prompt, verbatim
    if template == "code":
        assert text.endswith("<|im_start|>assistant\n") and "```python" in text and "\\boxed" not in text
    with pytest.raises(ValueError, match="unknown template"):
        render_prompt("x", tokenizer, "nope")


PROBLEMS = [{"id": str(k), "problem": f"p{k}", "answer": "1"} for k in range(23)]


def ids_of(batch):
    return [p["id"] for p in batch]


def test_batcher_is_deterministic_and_covers_each_epoch():
    a, b = PromptBatcher(PROBLEMS, 5, seed=3), PromptBatcher(PROBLEMS, 5, seed=3)
    first = [ids_of(next(a)) for _ in range(8)]
    assert first == [ids_of(next(b)) for _ in range(8)]
    epoch0 = sum(first[:4], [])
    assert len(set(epoch0)) == 20, "an epoch never repeats a problem (last partial batch dropped)"
    assert first[4] != first[0] and a.epoch == 1, "a new epoch reshuffles"
    assert ids_of(next(PromptBatcher(PROBLEMS, 5, seed=4))) != first[0]


@pytest.mark.parametrize("stop_after", [2, 4, 6])   # mid-epoch, at the boundary, in the next epoch
def test_batcher_resumes_exactly(stop_after):
    full = PromptBatcher(PROBLEMS, 5, seed=1)
    expected = [ids_of(next(full)) for _ in range(10)]
    first = PromptBatcher(PROBLEMS, 5, seed=1)
    for _ in range(stop_after):
        next(first)
    state = json.loads(json.dumps(first.state_dict()))  # survives a JSON round-trip, as in checkpoints
    resumed = PromptBatcher(PROBLEMS, 5, seed=999)
    resumed.load_state_dict(state)
    assert [ids_of(next(resumed)) for _ in range(10 - stop_after)] == expected[stop_after:]


def test_batcher_refuses_a_changed_dataset():
    state = PromptBatcher(PROBLEMS, 5).state_dict()
    with pytest.raises(ValueError, match="23 problems"):
        PromptBatcher(PROBLEMS[:-1], 5).load_state_dict(state)


def test_sharding_covers_every_problem_exactly_once():
    world = 4
    ranks = [PromptBatcher(PROBLEMS, 8, seed=2, rank=r, world_size=world) for r in range(world)]
    single = PromptBatcher(PROBLEMS, 8, seed=2)
    for _ in range(5):
        shards = [ids_of(next(r)) for r in ranks]
        assert all(len(s) == 2 for s in shards)
        together = sum(shards, [])
        assert sorted(together) == sorted(ids_of(next(single))) and len(set(together)) == 8
    with pytest.raises(ValueError):
        PromptBatcher(PROBLEMS, 6, world_size=4)


def test_filter_by_pass_rate(tmp_path):
    problems = [{"id": str(k), "problem": "p", "answer": "1"} for k in range(5)]
    path = tmp_path / "pass_rates.jsonl"
    write_rows(path, [{"id": "0", "correct": 0, "total": 16}, {"id": "1", "correct": 6, "total": 16},
                      {"id": "2", "correct": 7, "total": 16}, {"id": "3", "correct": 16, "total": 16}])
    kept, counts = filter_by_pass_rate(problems, str(path), low=0.0, high=6 / 16)
    assert ids_of(kept) == ["0", "1"] and counts == {"kept": 2, "dropped": 2, "unmeasured": 1}
    kept, _ = filter_by_pass_rate(problems, data.read_pass_rates(path), low=1 / 16, high=6 / 16)
    assert ids_of(kept) == ["1"]
    bad = tmp_path / "bad_rates.jsonl"
    write_rows(bad, [{"id": "0", "correct": 1}])
    with pytest.raises(DatasetError, match="bad_rates.jsonl:1"):
        filter_by_pass_rate(problems, str(bad))


def test_no_import_cycle_among_the_project_files():
    """Data flows one way (README): no root file imports, even inside a function, one that imports it back."""
    import ast
    root = Path(__file__).resolve().parents[1]
    files = {p.stem: p for p in root.glob("*.py")}
    graph = {}
    for name, path in files.items():
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                deps |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                deps.add(node.module.split(".")[0])
        graph[name] = deps & files.keys() - {name}

    def reaches(start, target, seen):
        return any(d == target or (d not in seen and reaches(d, target, seen | {d})) for d in graph[start])
    cycles = [name for name in graph if reaches(name, name, {name})]
    assert not cycles, f"import cycles through {cycles}"


# ---------------------------------------------------------------------------------------------- issue 36, item 1
@pytest.fixture(scope="module")
def llama3_tokenizer(tmp_path_factory):
    from tiny_model import build_llama3_tokenizer
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(build_llama3_tokenizer(tmp_path_factory.mktemp("llama3")))


@pytest.mark.parametrize("template", sorted(data.TEMPLATES))
def test_llama3_prompts_start_with_one_bos_from_its_post_processor(llama3_tokenizer, tokenizer, template):
    """Llama-3 adds <|begin_of_text|> through its tokenizer.json's post-processor, and transformers 5 reports
    add_bos_token False for it: every template, plain text or chat, starts with exactly one BOS (a chat template
    that writes BOS itself does not get a second). The Qwen-style tiny tokenizer adds nothing, as before."""
    bos = llama3_tokenizer.bos_token_id
    assert not getattr(llama3_tokenizer, "add_bos_token", False)   # the flag the old code read
    ids = render_prompt("What is $1+1$?", llama3_tokenizer, template)
    assert ids[0] == bos and ids.count(bos) == 1, llama3_tokenizer.decode(ids)
    assert ids[1:] == render_prompt("What is $1+1$?", llama3_tokenizer, template)[1:]
    if template in ("boxed", "think_answer"):   # the rest is the plain text, encoded without special tokens
        text = llama3_tokenizer.decode(ids[1:])
        assert ids[1:] == llama3_tokenizer.encode(text, add_special_tokens=False)
    assert data.text_prefix_ids(tokenizer) == []
    qwen = render_prompt("What is $1+1$?", tokenizer, template)
    if template in ("boxed", "think_answer"):
        assert qwen == tokenizer.encode(tokenizer.decode(qwen), add_special_tokens=False)


# ---------------------------------------------------------------------------------------------- issue 36, items 3-4
@pytest.mark.parametrize("spec,parsed", [
    ("hub:org/name", ("org/name", None, "train")),
    ("hub:org/name:test", ("org/name", None, "test")),
    ("hub:org/name:validation[:10%]", ("org/name", None, "validation[:10%]")),
    ("hub:openai/gsm8k:main", ("openai/gsm8k", "main", "train")),
    ("hub:openai/gsm8k:main:test", ("openai/gsm8k", "main", "test")),
    ("hub:openai/gsm8k:socratic:train[:100]", ("openai/gsm8k", "socratic", "train[:100]")),
])
def test_hub_specs_name_a_config_and_a_split(spec, parsed):
    assert data.parse_hub_spec(spec) == parsed


@pytest.mark.parametrize("spec", ["hub:", "hub:org/name:", "hub:a:b:c:d", "hub:org/name::test"])
def test_malformed_hub_specs_are_refused(spec):
    with pytest.raises(DatasetError, match=r"hub:org/name\[:config\]\[:split\]"):
        data.parse_hub_spec(spec)
    assert data.check_hub_spec(spec)[0]


@pytest.fixture()
def hub_layout(tmp_path, monkeypatch):
    """A local folder in the layout of openai/gsm8k on the hub: two configs (main, socratic), no default one,
    parquet files per split, the configs declared in the README's YAML header. datasets writes its cache to tmp."""
    pa = pytest.importorskip("pyarrow")
    datasets = pytest.importorskip("datasets")
    import pyarrow.parquet as pq
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "cache")
    root = tmp_path / "gsm8k"
    card = ["---", "configs:"]
    for config in ("main", "socratic"):
        card += [f"- config_name: {config}", "  data_files:"]
        for split, n in (("train", 5), ("test", 3)):
            (root / config).mkdir(parents=True, exist_ok=True)
            # gsm8k's answer column: the worked solution, then '#### <answer>'
            rows = [{"question": f"{config} {split} {k} + 1?", "answer": f"{k} + 1 = {k + 1}\n#### {k + 1}"}
                    for k in range(n)]
            pq.write_table(pa.Table.from_pylist(rows), root / config / f"{split}-00000-of-00001.parquet")
            card += [f"  - split: {split}", f"    path: {config}/{split}-*"]
    (root / "README.md").write_text("\n".join(card + ["---", "# a local copy in the hub's layout", ""]))
    return root


def test_a_hub_set_with_configs_loads_through_datasets(hub_layout):
    test = load_dataset(f"hub:{hub_layout}:main:test", problem_field="question")
    assert [p["problem"] for p in test] == [f"main test {k} + 1?" for k in range(3)]
    assert [p["answer"] for p in test] == ["1", "2", "3"] and test[0]["source"] == "gsm8k"   # after '####'
    train = load_dataset(f"hub:{hub_layout}:socratic", problem_field="question")   # a config alone: split train
    assert len(train) == 5 and train[0]["problem"] == "socratic train 0 + 1?"
    assert len(load_dataset(f"hub:{hub_layout}:main:train[:2]", problem_field="question")) == 2


def test_a_dry_run_checks_a_hub_specs_config_and_split(hub_layout, capsys):
    """What a dry run knows without reading rows (the card and file list): a missing or unknown config, a split
    the config does not have. A dataset the offline hub cannot reach is said to be unchecked, not refused."""
    ok = f"hub:{hub_layout}:main:test"
    assert data.check_hub_spec(ok, probe=True) == (None, None)
    missing = data.check_hub_spec(f"hub:{hub_layout}:test", probe=True)[0]
    assert "Config name is missing" in missing and "['main', 'socratic']" in missing
    assert "'nope' not found" in data.check_hub_spec(f"hub:{hub_layout}:nope:train", probe=True)[0]
    assert "no split 'validation' in config 'main'" in data.check_hub_spec(f"hub:{hub_layout}:main:validation",
                                                                          probe=True)[0]
    assert data.check_hub_spec(f"hub:{hub_layout}:main:validation") == (None, None)   # without probe: syntax only
    error, note = data.check_hub_spec("hub:nobody/nothing:train", probe=True)     # tests run with HF_HUB_OFFLINE=1
    assert error is None and "not checked against the hub" in note
    # the scripts' dry runs: train.py and sft.py refuse a bad hub spec, print what they could not check
    import sft
    import train
    with pytest.raises(SystemExit):
        sft.parse_args(["--train_data", f"hub:{hub_layout}:main:validation", "--dry_run", "--device", "cpu"])
    assert "no split 'validation'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        train.parse_args(["--train_data", f"hub:{hub_layout}:train", "--dry_run", "--device", "cpu"])
    assert "Config name is missing" in capsys.readouterr().err
    assert data.unknown_specs([ok, "hub:nobody/nothing"], probe_hub=True) == []
    assert "data: hub:nobody/nothing: not checked against the hub" in capsys.readouterr().out


def test_a_dry_run_refuses_hub_data_without_the_datasets_package(monkeypatch):
    import builtins
    real_import = builtins.__import__
    monkeypatch.setattr(builtins, "__import__", lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name))
                        if name == "datasets" else real_import(name, *a, **k))
    problems = data.unknown_specs(["math500", "hub:open-r1/OpenR1-Math-220k:train"])
    assert len(problems) == 1 and "needs the `datasets` package, which setup.sh installs" in problems[0][0]
    assert problems[0][1] is False   # an error even in a dry run (not a path an earlier stage may create)


def test_data_cli_dry_run_checks_hub_specs(hub_layout, monkeypatch, capsys):
    argv = ["data.py", "SPEC", "--pass_rates", "rates.jsonl", "--out", "hard.jsonl", "--dry_run"]
    monkeypatch.setattr("sys.argv", [a.replace("SPEC", f"hub:{hub_layout}:main:validation") for a in argv])
    with pytest.raises(SystemExit):
        data.main()
    assert "no split 'validation'" in capsys.readouterr().err
    monkeypatch.setattr("sys.argv", [a.replace("SPEC", f"hub:{hub_layout}:main:test,math500") for a in argv])
    data.main()
    assert "dry run ok" in capsys.readouterr().out
