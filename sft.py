"""Light supervised fine-tuning (SFT) on worked solutions: the warm-up before RL.

The Perplexity study starts its best RL run from an SFT-warmed-up model: SFT on chain-of-thought solutions makes
the model comfortable with the answer format and long reasoning, so RL starts higher and learns faster. This file
does that with train.py's parts (distributed.py: fp32 master weights and FSDP2; runs.py: checkpoints, resume, the
metrics log; batching.py / packing.py: packed micro-batches; periodic eval through eval.py) and data.py's
templates, so the SFT model is asked exactly what RL will ask it. Read top to bottom; the loop in main() is:

    for step in range(max_steps):
        examples = next(batcher)                         # batch_size worked examples, seeded order   (data.py)
        loss = -sum log p(response tokens | prompt) / response tokens of the whole batch   (prompt tokens: no loss)
        AdamW step (warmup + cosine lr, gradient clipping); periodic held-out eval in vLLM          (eval.py)

    python sft.py --model Qwen/Qwen2.5-Math-1.5B --train_data my_cot.jsonl --template think_answer --max_steps 500
    python sft.py --train_data my_cot.jsonl --eval_data math500   # (no shipped set is a training set of solutions)
    torchrun --nproc_per_node 8 sft.py ...                                         # FSDP2, exactly as train.py
    python sft.py --resume out/sft                                                 # continue exactly
    python train.py --init_from out/sft/ckpt-000500 ...                            # then RL from the SFT model
                                                                  # (the last checkpoint: ckpt-<its final step>)

Data (data.load_sft_dataset): rows with a problem and its worked `solution` (answer optional), or a chat
`messages` list. A problem is rendered with --template (data.render_prompt, the same call train.py makes) and the
target is sft_response: the solution ending in \\boxed{answer}, or <think>solution</think>
<answer>answer</answer> for the think_answer template. A conversation is rendered with the tokenizer's chat
template, and its last assistant turn is the target. Every target ends with the EOS token (the model must learn
to stop).
"""
import argparse
import contextlib
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm
from transformers import AutoTokenizer

import data
import eval as evaluation
import logprobs
import lora
import preflight
from batching import collate, same_count_micro_batches
from distributed import DIST_TIMEOUT_MIN, FSDP_PARAM_DTYPE, all_reduce, full_weights, init_distributed, load_model, \
    optimizer_step, shutdown_distributed
from reward import last_boxed
from rollout import VLLM_RUNNER, make_engine
from runs import Logger, checkpoint_note, inherit_template, latest_checkpoint, load_checkpoint, refuse_used_out_dir, \
    resume_flags, save_checkpoint, start_stage

# ------------------------------------------------------------------------------------------------------------
# Defaults (a 1.5B model on one GPU; the recipes and the CPU demo pass their own)
# ------------------------------------------------------------------------------------------------------------
MODEL = "Qwen/Qwen2.5-Math-1.5B"
TEMPLATE = "chat"
BATCH_SIZE = 64                 # worked examples per optimizer step
MICRO_BATCH_TOKENS = 16384      # tokens per forward/backward
MAX_LEN = 4096                  # prompt + response tokens; longer examples are skipped with a warning
LR = 1e-5                       # AdamW peak learning rate
WARMUP_STEPS = 20               # linear warmup from 0
MIN_LR_RATIO = 0.1              # cosine decay to LR * MIN_LR_RATIO at the last step
ADAM_BETAS = (0.9, 0.95)
WEIGHT_DECAY = 0.0
GRAD_CLIP = 1.0
EPOCHS = 2.0

# Flags a resumed run may change (when to stop, save, evaluate, log; memory knobs). The others come from the
# checkpoint's run.json, and giving one with another value is refused (runs.resume_flags).
RUN_CONTROL_FLAGS = {"time_limit_s", "save_every", "keep_last",
                     "eval_every", "eval_data", "eval_k", "eval_limit", "eval_temperature", "eval_top_p",
                     "eval_before_train", "max_response_len", "max_model_len", "wandb", "tensorboard",
                     "contamination_check", "micro_batch_tokens", "logprob_chunk", "gradient_checkpointing",
                     "vllm_gpu_memory_utilization", "enforce_eager", "fsdp_cpu_offload", "reward_workers", "engine",
                     "dist_timeout_min", "vllm_runner", "vllm_sleep_level"}


def build_parser():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    g = p.add_argument_group("model and data")
    g.add_argument("--model", default=MODEL, help="hub id, local HF directory, or a checkpoint dir (uses its model/)")
    g.add_argument("--resume", default=None,
                   help="continue the run in this out_dir from its latest checkpoint, exactly (flags from run.json)")
    g.add_argument("--train_data", default="",
                   help="worked examples (required): file(s) or hub:org/name[:config][:split], comma-separated. "
                        "The shipped sets with solutions (math500, gsm8k_test, minerva_math, ...) are evaluation sets: training "
                        "on one makes its eval numbers meaningless")
    g.add_argument("--problem_field", default="problem", help="column holding the problem")
    g.add_argument("--solution_field", default="solution", help="column holding the worked solution (the target)")
    g.add_argument("--answer_field", default="answer", help="column holding the final answer (optional)")
    g.add_argument("--messages_field", default="messages", help="column holding a chat conversation, used instead of problem/solution when a row has it (\"\": never)")
    g.add_argument("--template", default=TEMPLATE, help="prompt template, the same as RL's: " + data.TEMPLATE_HELP)
    g.add_argument("--max_len", type=int, default=MAX_LEN, help="examples longer than this (prompt + response tokens) "
                   "are skipped; must fit the model's context (checked before loading)")
    g.add_argument("--config_overrides", default="", help="JSON object of model config fields for the trained model "
                   "and the eval engine alike, e.g. '{\"max_position_embeddings\": 32768}' (preflight.py)")
    g.add_argument("--contamination_check", type=int, default=1, help="1: warn about training problems found in eval sets")
    g = p.add_argument_group("optimisation")
    g.add_argument("--batch_size", type=int, default=BATCH_SIZE, help="worked examples per optimizer step (global)")
    g.add_argument("--epochs", type=float, default=EPOCHS, help="passes over the data (when --max_steps is 0)")
    g.add_argument("--max_steps", type=int, default=0, help="optimizer steps (0: from --epochs)")
    g.add_argument("--lr", type=float, default=LR, help="AdamW peak learning rate")
    g.add_argument("--warmup_steps", type=int, default=WARMUP_STEPS, help="linear warmup steps")
    g.add_argument("--min_lr_ratio", type=float, default=MIN_LR_RATIO,
                   help="cosine decay from --lr to lr * this at the last step (1: constant after warmup)")
    g.add_argument("--weight_decay", type=float, default=WEIGHT_DECAY, help="AdamW weight decay")
    g.add_argument("--grad_clip", type=float, default=GRAD_CLIP, help="max gradient norm")
    lora.add_flags(p.add_argument_group("LoRA (lora.py; a resume may not change it)"))
    g = p.add_argument_group("systems")
    g.add_argument("--device", default="cuda", choices=["cuda", "cpu"], help="training device")
    g.add_argument("--micro_batch_tokens", type=int, default=MICRO_BATCH_TOKENS,
                   help="tokens per micro-batch (packed: real tokens; padded: count x longest)")
    # train.py's precision, packing, memory, FSDP2 and vLLM flags (here vLLM is the periodic eval's engine)
    preflight.add_shared_system_flags(g, vllm_runner=VLLM_RUNNER, dist_timeout_min=DIST_TIMEOUT_MIN,
                                      fsdp_param_dtype=FSDP_PARAM_DTYPE, vllm_gpu_memory_utilization=0.3)
    g = p.add_argument_group("run control (may change on --resume)")
    g.add_argument("--out_dir", default="out/sft", help="checkpoints, metrics.jsonl, eval-<step>/")
    g.add_argument("--time_limit_s", type=float, default=0,
                   help="also stop after this many seconds of training (eval excluded): equal-time comparisons")
    g.add_argument("--save_every", type=int, default=0, help="checkpoint every N steps (0: only at the end)")
    g.add_argument("--keep_last", type=int, default=2, help="checkpoints to keep (0: all); each holds the fp32 "
                   "weights (4 bytes/parameter), the newest also AdamW's state (8 bytes/parameter; runs.py)")
    g.add_argument("--eval_data", default="", help="held-out benchmark(s) for periodic eval ('' for none)")
    g.add_argument("--eval_every", type=int, default=0, help="evaluate every N steps and at the end (0: at the end only)")
    g.add_argument("--eval_before_train", type=int, default=0, help="1: also evaluate the starting weights (step 0)")
    g.add_argument("--eval_k", type=int, default=1, help="samples per eval problem")
    g.add_argument("--eval_limit", type=int, default=None, help="only the first N eval problems")
    g.add_argument("--eval_temperature", type=float, default=0.6, help="eval sampling temperature (0: greedy)")
    g.add_argument("--eval_top_p", type=float, default=0.95, help="eval nucleus sampling")
    g.add_argument("--max_response_len", type=int, default=4096, help="eval: max generated tokens")
    g.add_argument("--seed", type=int, default=0, help="seed of data order and init")
    g.add_argument("--data_seed", type=int, default=None,
                   help="seed of the data order (default: --seed, plus 1 for each earlier stage when --model is a "
                        "checkpoint of this project, so a continued stage does not replay the last one's order)")
    g.add_argument("--wandb", default="", help="wandb project name (logs there too when set and installed)")
    g.add_argument("--tensorboard", type=int, default=0, help="1: also write TensorBoard logs to out_dir/tb")
    g.add_argument("--dry_run", action="store_true", help="check flags and paths, load nothing, exit")
    return p


def parse_args(argv=None):
    """Flags -> namespace (on --resume the run's own flags), validated before loading anything."""
    parser = build_parser()
    args = parser.parse_args(argv)
    errors, later = [], []  # later: in a dry run, paths an earlier recipe stage will create are noted, not errors
    ckpt = latest_checkpoint(args.resume) if args.resume else None
    if args.resume and ckpt is None:
        (later if args.dry_run else errors).append(f"--resume {args.resume}: no checkpoint found there")
    if ckpt:
        resume_flags(args, build_parser, argv, ckpt, RUN_CONTROL_FLAGS, script="sft.py")
    if not args.train_data:
        errors.append("--train_data: name the worked examples to train on (a file or hub:org/name). No shipped set "
                      "is a training set of worked solutions: those with solutions are evaluation sets")
    if args.batch_size < 1 or args.max_steps < 0 or args.epochs <= 0 or args.micro_batch_tokens < 1:
        errors.append("--batch_size, --micro_batch_tokens must be >= 1, --max_steps >= 0, --epochs > 0")
    if args.lr <= 0 or args.warmup_steps < 0 or not 0 <= args.min_lr_ratio <= 1 or args.grad_clip <= 0:
        errors.append("--lr and --grad_clip must be > 0, --warmup_steps >= 0, --min_lr_ratio in [0, 1]")
    if args.eval_temperature < 0 or not 0 < args.eval_top_p <= 1 or args.time_limit_s < 0:
        errors.append("--eval_temperature >= 0 (0: greedy), --eval_top_p in (0, 1], --time_limit_s >= 0")
    errors += lora.check_flags(args) + list(filter(None, [data.template_error(args.template)]))
    for problem, looks_like_path in data.unknown_specs(args.train_data.split(",") + args.eval_data.split(","),
                                                       probe_hub=args.dry_run):
        (later if args.dry_run and looks_like_path else errors).append(problem)
    looks_local = args.model.startswith((".", "/", "~")) or args.model.count("/") > 1  # a hub id is org/name
    if not args.resume and looks_local and not Path(args.model).exists():
        (later if args.dry_run else errors).append(f"--model {args.model}: no such directory")
    if args.lora_rank > 0 and args.lora_targets and not ckpt and not errors:
        errors += lora.check_targets(args.model, args.lora_targets)
    for note in later:
        print(f"sft.py: dry run: {note} (yet)")
    if errors:
        parser.error("\n  ".join(errors))
    preflight.resolve_dtypes(args)   # --dtype and --fsdp_param_dtype left at their defaults, as train.py's
    if ckpt is None:  # a fresh stage: a checkpoint of this project as --model makes it the next stage
        start_stage(args, args.model if Path(args.model, "run.json").exists() else None)
        inherit_template(args, build_parser, argv, args.model, "sft.py")
    try:  # before anything loads (preflight.py): the examples must fit the model's context
        args.overrides = preflight.parse_overrides(args.config_overrides)
        source = str(ckpt / "model") if ckpt else model_dir(args.model)
        error, note = preflight.check_context("sft.py", source, (args.max_len, f"--max_len {args.max_len}"),
                                              overrides=args.overrides, offline=args.dry_run,
                                              max_model_len=args.max_model_len)
    except ValueError as exc:
        error = str(exc)
    if error:
        parser.error(error)
    if int(os.environ.get("RANK", "0")) == 0:
        print(note)
    return args


def model_dir(path):
    """A checkpoint dir (train.py's or sft.py's) stands for its model/; anything else is used as given."""
    return str(Path(path) / "model") if Path(path, "model", "config.json").exists() else str(path)


# ------------------------------------------------------------------------------------------------------------
# Data: worked examples -> (prompt ids, response ids) with the RL templates
# ------------------------------------------------------------------------------------------------------------
def sft_response(example, template, think_prefilled=False):
    """The response text a worked example teaches, in the answer format `template`'s prompt asks for (the grader
    reads the same: reward.extract_answer):
        chat, boxed     the solution, ending with \\boxed{answer} (appended when the solution has no \\boxed)
        think_answer    <think>solution</think> <answer>answer</answer>  (the study's prompt ends in "Assistant: ")
    think_prefilled: the prompt itself opened a <think> block (DeepSeek-R1-Distill's chat template; see
    data.prompt_opens_think), so the target closes it -- `solution\n</think>\n\n\\boxed{answer}` -- because the grader
    gives a response that never closes its reasoning nothing. A solution that is already an R1-style trace
    (`<think>...</think>` then the write-up) is not wrapped in a second pair of tags. A conversation
    ({"messages"}) teaches its last assistant turn as written, minus a leading <think> the prompt already opened."""
    if "messages" in example:
        text = example["messages"][-1]["content"]
        if think_prefilled and text.lstrip().startswith("<think>"):
            text = text.lstrip()[len("<think>"):].lstrip("\n")
        return text
    solution, answer = example["solution"], example.get("answer")
    thought, closed, _ = solution.partition("</think>")
    thought = thought.strip().removeprefix("<think>").strip() if closed else solution
    if answer is None and (template == "think_answer" or think_prefilled):
        answer = last_boxed(solution)   # the solution's own boxed answer
        if answer is None:
            raise data.DatasetError(f"example {example['id']}: no 'answer' and no \\boxed answer in the solution: "
                               f"the {'think_answer template' if template == 'think_answer' else 'opened <think>'} "
                               f"needs one after the reasoning")
    if template == "think_answer":
        return f"<think>{thought}</think> <answer>{answer}</answer>"
    if think_prefilled:
        return f"{thought}\n</think>\n\nThe final answer is $\\boxed{{{answer}}}$."
    if "\\boxed" in solution or answer is None:
        return solution
    return f"{solution}\nThe final answer is $\\boxed{{{answer}}}$."


def tokenize_examples(examples, tokenizer, template, max_len):
    """Worked examples -> (samples, skipped ids). A sample holds the prompt exactly as RL renders it and the
    target response + EOS, tokenized separately (as in RL, where the response is generated after the prompt).
    It is a data.Sample, so collate builds its batch and response mask. Skipped: longer than max_len
    tokens, or with no answer where the format must state one (think_answer's <answer>, or after a <think> the
    prompt opened) and none in the row or in the solution's last \\boxed."""
    eos = tokenizer.eos_token_id
    if eos is None:
        raise ValueError("the tokenizer has no EOS token: SFT must teach the model to stop")
    samples, skipped = [], []
    # a prompt that opens <think> itself (R1-Distill's chat template): the target must close it (sft_response)
    prefilled = {}
    for ex in examples:
        if "messages" in ex:
            prompt = tokenizer.apply_chat_template(ex["messages"][:-1], add_generation_prompt=True, tokenize=True)
            prompt = list(prompt["input_ids"] if isinstance(prompt, dict) or hasattr(prompt, "input_ids") else prompt)
        else:
            prompt = data.render_prompt(ex["problem"], tokenizer, template)
        try:
            kind = "chat" if "messages" in ex else template
            if kind not in prefilled:
                prefilled[kind] = data.prompt_opens_think(tokenizer, kind)
            target = sft_response(ex, template, prefilled[kind])
        except data.DatasetError:
            skipped.append(ex["id"])  # no answer to state (think_answer's <answer>, or after a prefilled <think>)
            continue
        response = tokenizer.encode(target, add_special_tokens=False)
        if not response or response[-1] != eos:  # a conversation may already end with the EOS token
            response.append(eos)
        if len(prompt) + len(response) > max_len:
            skipped.append(ex["id"])
            continue
        samples.append(data.Sample(prompt, response, [0.0] * len(response), "stop", ""))
    return samples, skipped


def lr_at(step, args, total_steps):
    """Linear warmup over warmup_steps, then cosine decay from lr to lr * min_lr_ratio at the last step."""
    if step < args.warmup_steps:
        return args.lr * (step + 1) / args.warmup_steps
    progress = (step - args.warmup_steps) / max(1, total_steps - 1 - args.warmup_steps)
    ratio = args.min_lr_ratio + (1 - args.min_lr_ratio) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress)))
    return args.lr * ratio


# ------------------------------------------------------------------------------------------------------------
# One optimizer step
# ------------------------------------------------------------------------------------------------------------
def sft_step(model, optimizer, batch, args, device, *, autocast, pad_id, step):
    """One optimizer step on this rank's share of the global batch (a list of Samples).

    loss = -(1 / N) * sum over the RESPONSE tokens of every example of log p(token | everything before it),
    N = the number of response tokens in the whole global batch (all ranks). Prompt tokens and padding get no
    loss (the mask of collate; logprobs.token_logprobs does not even project them through the head). With this
    global normaliser the micro-batch losses sum to the batch loss, so --micro_batch_tokens and the number of
    ranks change nothing but memory. Returns {loss (that mean NLL per response token), grad_norm, tokens,
    response_tokens, skipped}."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    lengths = [len(s.prompt_ids) + len(s.response_ids) for s in batch]
    num_tokens = all_reduce([sum(len(s.response_ids) for s in batch)])[0]
    dummy = data.Sample([pad_id, pad_id], [pad_id], [0.0], "stop", "")  # zero-weight pass when a rank ran out (FSDP)
    loss_sum = 0.0
    for mb in same_count_micro_batches(list(range(len(batch))), lengths, args.micro_batch_tokens, args.packing):
        ids, attention, mask, _ = collate([dummy] if mb is None else [batch[i] for i in mb], pad_id, device)
        if mb is None:
            mask.zero_()
        with autocast:
            logp = logprobs.token_logprobs(model, ids, attention, chunk_size=args.logprob_chunk,
                                       score_mask=mask if mb else None, packed=args.packing)
        loss = -(logp * mask).sum() / num_tokens
        # FSDP averages gradients over ranks; the loss is already normalised globally, so undo the mean
        (loss * world if world > 1 else loss).backward()
        loss_sum += loss.item()
    loss_sum, tokens = all_reduce([loss_sum, sum(lengths)])
    grad_norm, skipped = optimizer_step(model, optimizer, loss_sum, args.grad_clip, step)
    return {"loss": loss_sum, "grad_norm": grad_norm, "tokens": tokens, "response_tokens": num_tokens,
            "skipped": skipped}


def make_eval_engine(args, source, tokenizer, world):
    """The periodic eval's engine, started as train.py starts its own: dummy weights, the trainer pushes its own."""
    max_model_len = args.max_model_len
    if not max_model_len:  # prompt + response room, clamped to the model's own context (as vLLM derives it)
        context = preflight.context_length(preflight.read_config(source, args.overrides, offline=False)[0])[0]
        max_model_len = min(args.max_len + args.max_response_len, context or 10 ** 9)
    return make_engine(args.engine, source, tokenizer, dtype=args.dtype, seed=args.seed, world=world,
                       load_format="dummy",
                       max_model_len=max_model_len, gpu_memory_utilization=args.vllm_gpu_memory_utilization,
                       enforce_eager=bool(args.enforce_eager), hf_overrides=args.overrides, runner=args.vllm_runner,
                       sleep_level=args.vllm_sleep_level)


# ------------------------------------------------------------------------------------------------------------
# The run
# ------------------------------------------------------------------------------------------------------------
def main(argv=None, engine=None):
    """Returns the trained model (None on --dry_run). engine: an engine to evaluate with (demo.py and the tests
    share one); by default one is started when --eval_data is set."""
    args = parse_args(argv)
    if args.dry_run:
        print(f"sft.py: dry run ok: {json.dumps(vars(args))}")
        return None
    if args.device == "cuda" and not torch.cuda.is_available():
        sys.exit(preflight.no_gpu_message("sft.py"))

    rank, world = init_distributed(args.device, args.dist_timeout_min, one_rank_group=bool(args.fsdp_cpu_offload))
    is_main = rank == 0
    random.seed(args.seed)
    torch.manual_seed(args.seed)
    device = torch.device(args.device, int(os.environ.get("LOCAL_RANK", "0"))) if args.device == "cuda" \
        else torch.device("cpu")
    dtype = {"bfloat16": torch.bfloat16, "float32": torch.float32}[args.dtype]
    autocast = torch.autocast(device.type, dtype=dtype) if dtype != torch.float32 else contextlib.nullcontext()

    # ---- data and model --------------------------------------------------------------------------------------
    resume_ckpt = latest_checkpoint(args.resume) if args.resume else None
    if args.resume:
        args.out_dir = args.resume
    else:
        refuse_used_out_dir(args.out_dir, "sft.py")
    os.makedirs(args.out_dir, exist_ok=True)
    source = str(resume_ckpt / "model") if resume_ckpt else model_dir(args.model)
    if device.type == "cuda":  # refuse now, not after loading, when full fine-tuning cannot fit (preflight.py)
        problem = preflight.check_memory(
            "sft.py", preflight.count_parameters(preflight.read_config(source, args.overrides, offline=False)[0]),
            torch.cuda.get_device_properties(device).total_memory, world=world,
            cpu_offload=bool(args.fsdp_cpu_offload), lora=args.lora_rank > 0)
        if problem:
            sys.exit(problem)
    tokenizer = AutoTokenizer.from_pretrained(source)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
    examples = data.load_sft_dataset(args.train_data, problem_field=args.problem_field,
                                     solution_field=args.solution_field, answer_field=args.answer_field,
                                     messages_field=args.messages_field)
    if args.contamination_check and is_main:
        hits = data.find_contamination([e for e in examples if "problem" in e])
        if hits:
            print(f"sft.py: WARNING: {len(hits)} training problems also appear in eval sets, e.g. {hits[:3]}")
    samples, skipped = tokenize_examples(examples, tokenizer, args.template, args.max_len)
    if skipped and is_main:
        print(f"sft.py: WARNING: skipped {len(skipped)} example(s) longer than --max_len {args.max_len} tokens "
              f"or with no answer to state: {', '.join(skipped[:5])}{' ...' if len(skipped) > 5 else ''}")
    if is_main:
        conversations = sum("messages" in e for e in examples)
        print(f"sft.py: {len(samples)} examples to train on: {len(examples) - conversations} problem/solution rows "
              f"rendered with --template {args.template}, {conversations} chat conversations (--messages_field "
              f"{args.messages_field!r}) with the tokenizer's chat template")
    if len(samples) < args.batch_size:
        sys.exit(f"sft.py: {len(samples)} usable worked examples in {args.train_data} ({len(skipped)} skipped), "
                 f"fewer than one batch of --batch_size {args.batch_size}")
    batcher = data.PromptBatcher(samples, args.batch_size, seed=args.data_seed, rank=rank, world_size=world)
    # the batcher draws whole batches and reshuffles (an epoch's remainder waits for the next epoch's order)
    total_steps = args.max_steps or max(1, math.ceil(args.epochs * (len(samples) // args.batch_size)))
    # fp32 master weights; compute runs in --dtype under autocast. LoRA: the base (--model) frozen in --dtype, fp32
    # adapters (on resume, the checkpoint's)
    model = load_model(model_dir(args.model) if args.lora_rank else source, device, dtype if args.lora_rank else
                       torch.float32, world, bool(args.fsdp_cpu_offload),
                       gradient_checkpointing=bool(args.gradient_checkpointing), packed=bool(args.packing),
                       overrides=args.overrides, param_dtype=args.fsdp_param_dtype,
                       wrap=lora.wrapper(args, resume_ckpt and resume_ckpt / "adapter") if args.lora_rank
                       else None).train()
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=args.lr, betas=ADAM_BETAS,
                                  weight_decay=args.weight_decay)
    if is_main:
        print(checkpoint_note(model, args.keep_last, args.save_every, "sft.py"))
    start_step = 0
    if resume_ckpt:
        state = load_checkpoint(resume_ckpt, model, optimizer)
        batcher.load_state_dict(state["batcher"])
        start_step = state["step"]
        if is_main:
            print(f"sft.py: resumed {resume_ckpt} at step {start_step}")
    run_info = {"flags": vars(args)}
    logger = Logger(args.out_dir, start_step if resume_ckpt else None, args.wandb, bool(args.tensorboard),
                          config=vars(args)) if is_main else None

    # ---- periodic held-out eval: the weights go into the engine, eval.py samples and grades ----------------------
    if args.eval_data and engine is None:
        engine = make_eval_engine(args, source, tokenizer, world)

    def evaluate(done):
        engine.update_weights(full_weights(model, getattr(engine, "dtype", None), device))
        results = evaluation.evaluate_during_training(engine, tokenizer, args, done, rank, dp_world=world, tp=1)
        engine.sleep()  # give the memory back to training (a no-op on CPU)
        return results

    if args.eval_data and args.eval_before_train and start_step == 0:
        baseline = {"step": 0, **evaluate(0)}
        if is_main:
            logger.log(baseline)

    # ---- the loop --------------------------------------------------------------------------------------------
    trained_s = 0.0  # seconds spent in training steps in this invocation (--time_limit_s counts these)
    bar = tqdm(total=None if args.time_limit_s else total_steps, initial=start_step, desc="sft", disable=not is_main, dynamic_ncols=True)
    for step in range(start_step, total_steps):
        start = time.perf_counter()
        lr = lr_at(step, args, total_steps)
        for group in optimizer.param_groups:
            group["lr"] = lr
        out = sft_step(model, optimizer, next(batcher), args, device, autocast=autocast, pad_id=pad_id, step=step)
        seconds = all_reduce([time.perf_counter() - start], "max")[0]
        trained_s += seconds
        done = step + 1
        out_of_time = bool(args.time_limit_s) and trained_s >= args.time_limit_s
        last = done == total_steps or out_of_time
        metrics = {"step": done, "sft/loss": out["loss"], "sft/lr": lr, "sft/grad_norm": out["grad_norm"],
                   "sft/epoch": batcher.epoch + batcher.cursor / max(1, len(samples)),
                   "sft/response_tokens": int(out["response_tokens"]), "sft/skipped": int(out["skipped"]),
                   "time/step": seconds, "perf/trained_tokens_per_s": out["tokens"] / max(seconds, 1e-9)}
        if args.eval_data and ((args.eval_every and done % args.eval_every == 0) or last):
            metrics.update(evaluate(done))
        if is_main:
            logger.log(metrics)
            bar.set_postfix(loss=f"{out['loss']:.4f}", lr=f"{lr:.2e}", refresh=False)
            bar.update(1)
        if (args.save_every and done % args.save_every == 0) or last:
            save_checkpoint(args.out_dir, done, model, tokenizer, optimizer, keep_last=args.keep_last,
                            trainer_state={"batcher": batcher.state_dict()}, run_info=run_info)
        if out_of_time:
            if is_main:
                print(f"sft.py: --time_limit_s {args.time_limit_s:g} reached after {done} steps ({trained_s:.1f} s)")
            break
    bar.close()
    return model


def out_of_memory_message(exc):
    """What to turn when SFT runs out of GPU memory (train.py says the same of its own knobs)."""
    return (f"sft.py: out of GPU memory ({exc}).\nTurn down --micro_batch_tokens (activations) or --max_len (the "
            "longest example is one micro-batch), --logprob_chunk (the output head's slice); keep "
            "--gradient_checkpointing 1; for the weights, gradients and AdamW state (16 bytes per parameter): more "
            "GPUs (torchrun), --fsdp_cpu_offload 1, or --lora_rank; for the periodic eval's engine: "
            "--vllm_gpu_memory_utilization, --enforce_eager 1.")


if __name__ == "__main__":
    try:
        main()
        shutdown_distributed()   # every rank done, then the process groups go (distributed.py)
    except KeyboardInterrupt:
        sys.exit(130)
    except torch.OutOfMemoryError as exc:  # say which knobs to turn, not a traceback
        sys.exit(out_of_memory_message(exc))
