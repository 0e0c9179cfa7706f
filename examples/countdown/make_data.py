"""Write the Countdown example's data: four sets with no problem in two of them, as JSONL rows of data.py's schema
plus the columns the reward reads (numbers, target):

    sft.jsonl         {id, problem, numbers, target, solution}   worked examples for the SFT warm-up (sft.py)
    rl.jsonl          {id, problem, numbers, target}             problems only, for GRPO (train.py --reward)
    validation.jsonl  {id, problem, numbers, target}             chose every setting of run.py
    heldout.jsonl     {id, problem, numbers, target}             the reported success (never used to choose)

A problem is COUNT numbers from 1..MAX_NUMBER and a target that a chain of steps reaches, each step combining the
running result with the next number by one of OPS, every result a whole number in 0..MAX_RESULT: `7 2 4 4 3 -> 8`,
solved by `3-2=1,1+4=5,5-4=1,1+7=8`. The defaults keep every step within single digits, so that the demo's 0.5M-
parameter model can learn the game in minutes; the reward file scores the full game (OPS = "+-*/", MAX_RESULT =
1000) for a real model. Two rows with the same numbers and target are one problem.

    python examples/countdown/make_data.py      (writes examples/countdown/data; run.py reads it from there)
"""
import argparse
import itertools
import json
import random
from pathlib import Path

COUNT, MAX_NUMBER, OPS, MAX_RESULT = 5, 9, "+-", 9
SIZES = {"heldout": 500, "validation": 400, "sft": 500, "rl": 948}


def step(a, op, b):
    """a op b when the result is a whole number in 0..MAX_RESULT, else None."""
    result = a + b if op == "+" else a - b if op == "-" else a * b if op == "*" else \
        a // b if b and a % b == 0 else None
    return result if result is not None and 0 <= result <= MAX_RESULT else None


def solutions(numbers):
    """{target: [worked solutions]}: every chain over all the numbers, in every order, by target (not one of the
    numbers, not 0)."""
    found = {}
    for order in sorted(set(itertools.permutations(numbers))):
        for ops in itertools.product(OPS, repeat=len(numbers) - 1):
            value, steps = order[0], []
            for number, op in zip(order[1:], ops):
                result = step(value, op, number)
                if result is None:
                    break
                steps.append(f"{value}{op}{number}={result}")
                value = result
            else:
                if value and value not in numbers:
                    found.setdefault(value, []).append(",".join(steps))
    return found


def write_sets(out_dir, seed=0, sizes=SIZES):
    """Every problem there is, shuffled by the seed and dealt into the sets in the order of `sizes` (the numbers of
    a row shown in a random order); a worked solution drawn for each SFT row. Returns {name: path}."""
    rng = random.Random(f"countdown-{seed}")
    problems = [(numbers, target, ways)
                for numbers in itertools.combinations_with_replacement(range(1, MAX_NUMBER + 1), COUNT)
                for target, ways in sorted(solutions(numbers).items())]
    rng.shuffle(problems)
    if sum(sizes.values()) > len(problems):
        raise ValueError(f"{sum(sizes.values())} problems asked for, {len(problems)} exist")
    Path(out_dir).mkdir(parents=True, exist_ok=True)
    paths, start = {}, 0
    for name, count in sizes.items():
        rows = []
        for k, (numbers, target, ways) in enumerate(problems[start:start + count]):
            shown = rng.sample(numbers, len(numbers))
            row = {"id": f"{name}-{k}", "problem": f"{' '.join(map(str, shown))} -> {target}", "numbers": shown,
                   "target": target}
            if name == "sft":
                row["solution"] = rng.choice(ways)
            rows.append(row)
        start += count
        paths[name] = str(Path(out_dir) / f"{name}.jsonl")
        Path(paths[name]).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return paths


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=str(Path(__file__).parent / "data"), help="folder for the four files")
    parser.add_argument("--seed", type=int, default=0, help="which problems go to which set")
    args = parser.parse_args()
    print(write_sets(args.out, args.seed))
