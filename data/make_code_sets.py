"""Rebuild the shipped code sets (mbpp_*.jsonl.gz, humaneval.jsonl.gz, stdio_demo.jsonl.gz) from their sources.

    python data/make_code_sets.py [SOURCE_DIR]      (default ../shared/data/code: see its SOURCES.md)

Rows are in the project's schema: id, problem (what the model is asked), solution (a complete reference program),
tests (the dict code_reward takes; see code_reward.py), source. Output is deterministic (sorted keys, gzip mtime 0).
"""
import ast
import gzip
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
MBPP_SPLITS = {"mbpp_test": range(11, 511), "mbpp_valid": range(511, 601), "mbpp_train": range(601, 975)}  # 1-10: few-shot


def read_jsonl_gz(path):
    with gzip.open(path, "rt", encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def write_jsonl_gz(path, rows):
    text = "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows)
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        f.write(text.encode("utf-8"))


def mbpp_entry_point(solution, first_test):
    """The function the tests are about: the first name the first test calls that the reference defines at top
    level. It is always the program's, even when it shadows a builtin (mbpp-126 defines `sum`)."""
    defined = {n.name for n in ast.parse(solution).body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for node in ast.walk(ast.parse(first_test)):  # breadth first: the outermost call first
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in defined:
            return node.func.id
    return None


def mbpp_rows(source):
    """MBPP: the problem statement plus its FIRST test (it tells the function's name and signature, as EvalPlus
    prompts do); all three tests are graded, so two stay hidden and hard-coding the shown one does not pass."""
    by_split = {name: [] for name in MBPP_SPLITS}
    for r in read_jsonl_gz(source / "mbpp.jsonl.gz"):
        split = next((name for name, ids in MBPP_SPLITS.items() if r["task_id"] in ids), None)
        if split is None:
            continue
        tests = {"kind": "functional", "asserts": [t.replace("\r\n", "\n") for t in r["test_list"]]}
        if r["test_setup_code"].strip():
            tests["setup"] = r["test_setup_code"].replace("\r\n", "\n")
        entry_point = mbpp_entry_point(r["code"].replace("\r\n", "\n"), r["test_list"][0])
        if entry_point:
            tests["entry_point"] = entry_point
        by_split[split].append({
            "id": f"mbpp-{r['task_id']}", "source": "mbpp",
            "problem": f"{r['text'].strip()}\nYour code should pass this test:\n{r['test_list'][0]}",
            "solution": r["code"].replace("\r\n", "\n"), "tests": tests})
    return by_split


def humaneval_rows(source):
    """HumanEval: the prompt (signature + docstring, with its imports and helpers) is shown in a code block and
    also runs before the program (so `List` and helper functions exist) and in the checker."""
    rows = []
    for r in read_jsonl_gz(source / "HumanEval.jsonl.gz"):
        rows.append({
            "id": r["task_id"], "source": "humaneval",
            "problem": f"Complete the following Python function:\n\n```python\n{r['prompt'].strip()}\n```",
            "solution": r["prompt"] + r["canonical_solution"],
            "tests": {"kind": "functional", "prelude": r["prompt"], "entry_point": r["entry_point"],
                      "asserts": [f"{r['test'].rstrip()}\n\n\ncheck({r['entry_point']})\n"]}})
    return rows


# ------------------------------------------------------------------------------------------------------------
# stdio_demo: small stdin/stdout problems written for this project (public domain). Expected outputs come from
# the `answer` functions below, written independently of the reference programs they check.
# ------------------------------------------------------------------------------------------------------------
def _primes_upto(n):
    sieve = bytearray([1]) * (n + 1)
    sieve[:2] = b"\x00\x00"[:n + 1]
    for i in range(2, int(n ** 0.5) + 1):
        if sieve[i]:
            sieve[i * i::i] = bytearray(len(sieve[i * i::i]))
    return sum(sieve)


def _balanced(s):
    pairs, stack = {")": "(", "]": "[", "}": "{"}, []
    for ch in s:
        if ch in "([{":
            stack.append(ch)
        elif not stack or stack.pop() != pairs[ch]:
            return False
    return not stack


STDIO_DEMO = [
    {"id": "stdio-sum", "problem": "The first line holds an integer T (1 <= T <= 1000). Each of the next T lines holds "
     "two integers a and b (|a|, |b| <= 10^18). For each pair print a + b on its own line.",
     "solution": "import sys\ndata = sys.stdin.read().split()\nt = int(data[0])\n"
                 "print('\\n'.join(str(int(data[1 + 2 * i]) + int(data[2 + 2 * i])) for i in range(t)))\n",
     "inputs": ["2\n1 2\n3 4\n", "1\n-1000000000000000000 999999999999999999\n",
                "3\n0 0\n-5 5\n7 -9\n"],
     "answer": lambda s: "\n".join(str(int(a) + int(b)) for a, b in (l.split() for l in s.strip().split("\n")[1:])) + "\n"},
    {"id": "stdio-reverse-words", "problem": "Read one line of words separated by single spaces and print the words "
     "in reverse order, separated by single spaces.",
     "solution": "print(' '.join(input().split()[::-1]))\n",
     "inputs": ["hello world\n", "one\n", "the quick brown fox jumps\n"],
     "answer": lambda s: " ".join(reversed(s.split())) + "\n"},
    {"id": "stdio-distinct", "problem": "The first line holds n (1 <= n <= 200000); the second line holds n integers. "
     "Print how many distinct values there are.",
     "solution": "input()\nprint(len(set(input().split())))\n",
     "inputs": ["5\n1 2 2 3 3\n", "1\n42\n", "6\n-1 1 -1 1 0 0\n",
                "200000\n" + " ".join(str(i % 1234) for i in range(200000)) + "\n"],
     "answer": lambda s: f"{len(set(s.split(chr(10))[1].split()))}\n"},
    {"id": "stdio-grid-paths", "problem": "A robot walks on an R x C grid (1 <= R, C <= 30) from the top-left cell to "
     "the bottom-right cell, moving only right or down. Read R and C from one line and print the number of paths.",
     "solution": "r, c = map(int, input().split())\nways = [1] * c\nfor _ in range(r - 1):\n"
                 "    for j in range(1, c):\n        ways[j] += ways[j - 1]\nprint(ways[-1])\n",
     "inputs": ["1 1\n", "2 2\n", "3 7\n", "30 30\n"],
     "answer": lambda s: (lambda r, c: f"{__import__('math').comb(r + c - 2, r - 1)}\n")(*map(int, s.split()))},
    {"id": "stdio-brackets", "problem": "The first line holds T. Each of the next T lines is a non-empty string of the "
     "characters ()[]{}. For each, print YES if its brackets are balanced and NO otherwise.",
     "solution": "t = int(input())\nfor _ in range(t):\n    s, stack, ok = input().strip(), [], True\n"
                 "    for ch in s:\n        if ch in '([{':\n            stack.append(ch)\n"
                 "        elif not stack or '([{'.index(stack.pop()) != ')]}'.index(ch):\n            ok = False\n"
                 "            break\n    print('YES' if ok and not stack else 'NO')\n",
     "inputs": ["3\n()\n([)]\n{[]}\n", "2\n(((\n)(\n", "1\n" + "([{}])" * 1000 + "\n"],
     "answer": lambda s: "".join(("YES" if _balanced(line) else "NO") + "\n" for line in s.strip().split("\n")[1:])},
    {"id": "stdio-primes", "problem": "Read n (1 <= n <= 2000000) and print how many primes are <= n. "
     "Your program must finish within a second or two.",
     "solution": "n = int(input())\nsieve = bytearray([1]) * (n + 1)\nsieve[0] = 0\nif n >= 1:\n    sieve[1] = 0\n"
                 "for i in range(2, int(n ** 0.5) + 1):\n    if sieve[i]:\n"
                 "        sieve[i * i::i] = bytes(len(range(i * i, n + 1, i)))\nprint(sum(sieve))\n",
     "inputs": ["1\n", "10\n", "100\n", "2000000\n"],
     "answer": lambda s: f"{_primes_upto(int(s))}\n"},
]


def stdio_rows():
    rows = []
    for p in STDIO_DEMO:
        cases = [{"input": text, "output": p["answer"](text)} for text in p["inputs"]]
        rows.append({"id": p["id"], "source": "stdio_demo", "problem": p["problem"], "solution": p["solution"],
                     "tests": {"kind": "stdio", "cases": cases}})
    return rows


def main():
    source = Path(sys.argv[1]) if len(sys.argv) > 1 else HERE.parent.parent / "shared" / "data" / "code"
    sets = {**mbpp_rows(source), "humaneval": humaneval_rows(source), "stdio_demo": stdio_rows()}
    for name, rows in sets.items():
        write_jsonl_gz(HERE / f"{name}.jsonl.gz", rows)
        print(f"data/{name}.jsonl.gz: {len(rows)} rows")


if __name__ == "__main__":
    main()
