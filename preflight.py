"""Checks that run before anything heavy loads, so that a run which cannot work fails in seconds with a message that
names the flag to change, not minutes later inside vLLM or CUDA. train.py, sft.py and eval.py call them in
parse_args (dry runs included) and at the start of main(). Where each rule comes from: docs/training-loop.md.

- Context length.  The model's context is read from its config WITHOUT loading it (a local directory, or the
  Hugging Face cache, offline), derived as vLLM derives it: the smallest of the CONTEXT_KEYS, times the RoPE
  factor of scalings that do not already raise max_position_embeddings. The tokenizer's model_max_length does not
  cap it. --config_overrides (a JSON object of config fields) changes the config first, in the trainer's model
  and in vLLM alike (vllm_overrides), e.g. '{"max_position_embeddings": 32768}' as DAPO ran Qwen2.5-Math-7B.
  check_context; train.py's check_train_context.
- Memory for full fine-tuning: fp32 weights + gradients + AdamW's two moments = 16 bytes per trained parameter,
  sharded over the ranks by FSDP2, counted from the config on the meta device. check_memory, check_train_memory.
- The code sandbox. A run that grades code refuses to start without the full sandbox (bubblewrap and libseccomp);
  check_code_sandbox says so in a dry run, so a recipe whose code stages follow days of math fails at validation.
- Why torch sees no GPU when nvidia-smi does (no_gpu_message): usually a driver older than torch's CUDA needs.
- train.py's flags: the systems and run-control flags are defined here (add_system_flags, add_run_control_flags,
  RUN_CONTROL_FLAGS: what a resume may change); check_train_run checks every flag's value, combination
  (ignored_flags) and what it names; check_layout the batch over ranks and TP groups; check_train_data the data
  against --reward and the sandbox.

    error, note = check_context("train.py", "Qwen/Qwen2.5-Math-7B", (1024 + 8192, "--max_prompt_len + ..."))
"""
import copy
import json
import os
import re
import shutil
import subprocess

# config keys vLLM reads the context from (the smallest wins), and RoPE types whose factor it applies on top
CONTEXT_KEYS = ("max_position_embeddings", "n_positions", "max_seq_len", "seq_length", "model_max_length",
                "max_sequence_length", "max_seq_length", "seq_len")
ROPE_ALREADY_SCALED = ("su", "longrope", "llama3", "yarn", "deepseek_yarn", "deepseek_llama_scaling")
FULL_FINETUNE_BYTES = 16    # per trained parameter: fp32 weights 4 + gradients 4 + AdamW moments 8
LORA_BYTES = 2.7            # LoRA: the bf16 base + adapters, gradients and AdamW at rank <= 128 (bench.py memory)
RESIDENT_BYTES = 12         # between steps (gradients freed): weights + moments, beside vLLM while it generates
MIN_DRIVER = {13: 580, 12: 525}   # NVIDIA driver needed by a CUDA major version (12.x: minor-version compatibility)


# ------------------------------------------------------------------------------------------------------------
# The model's config, read without loading the model
# ------------------------------------------------------------------------------------------------------------
def parse_overrides(text, flag="--config_overrides"):
    """'{"max_position_embeddings": 32768}' -> dict ('' -> {}); ValueError naming the flag otherwise."""
    if not text:
        return {}
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{flag} {text!r}: not JSON ({exc})") from None
    if not isinstance(value, dict):
        raise ValueError(f"{flag} {text!r}: must be a JSON object of config fields, e.g. "
                         "'{\"max_position_embeddings\": 32768}'")
    return value


def read_config(model, overrides=None, offline=True):
    """(the model's transformers config with `overrides` applied, None) or (None, why it cannot be read).
    offline: only a local directory or the Hugging Face cache (local_files_only), never the network.
    The overrides go into the config's constructor (as a config.json of the same content would), so derived
    fields (RoPE parameters) follow them; an unknown key is refused (a typo would otherwise do nothing)."""
    from transformers import AutoConfig, PretrainedConfig
    try:
        config_dict, _ = PretrainedConfig.get_config_dict(str(model), local_files_only=offline)
        if "model_type" not in config_dict:  # transformers returns {} for a directory without config.json
            return None, f"{model} has no config.json naming a model_type"
        base = AutoConfig.for_model(**config_dict)
    except (OSError, ValueError) as exc:
        if offline:
            return None, f"no config of {model} offline (not a local directory, not in the Hugging Face cache)"
        return None, f"config of {model} not readable: {str(exc).splitlines()[0][:300]}"
    unknown = [k for k in (overrides or {}) if k not in config_dict and not hasattr(base, k)]
    if unknown:
        raise ValueError(f"--config_overrides: {', '.join(unknown)} not a field of {model}'s config "
                         f"({type(base).__name__})")
    if not overrides:
        return base, None
    # a deep copy: transformers completes RoPE dicts in place (adds rope_theta), which must not reach the caller's
    return AutoConfig.for_model(**{**config_dict, **copy.deepcopy(overrides)}), None


ROPE_KEYS = ("rope_theta", "rope_scaling", "rope_parameters", "partial_rotary_factor")


def vllm_overrides(model, overrides):
    """--config_overrides as vLLM's hf_overrides must carry them for vLLM to build the trainer's model.
    vLLM 0.32 (transformers_utils/config.py:get_config) applies plain values with config.update AFTER the config is
    built and dict values after that (config/model.py:_apply_dict_overrides), so nothing derived from them is
    derived again: an overridden rope_theta is ignored (rope_parameters keeps the checkpoint's), and a rope_scaling
    dict replaces rope_parameters without its theta (Qwen2 then runs at theta 1e6). Whenever a RoPE field is
    overridden, the trainer's derived rope_parameters (read_config, as distributed.load_model builds the trainer)
    go along whole, last, as a dict: vLLM sets it after everything else."""
    overrides = dict(overrides or {})
    if any(k in overrides for k in ROPE_KEYS):
        config, _ = read_config(model, overrides, offline=False)
        rope = getattr(config, "rope_parameters", None)  # transformers 4 configs have none: rope_theta is read as is
        if rope is not None:
            overrides.pop("rope_parameters", None)
            overrides["rope_parameters"] = dict(rope)
    return overrides


def _rope_parameters(config):
    """The RoPE parameter dicts of a config (transformers 5 `rope_parameters`, or 4.x `rope_scaling`)."""
    rope = getattr(config, "rope_parameters", None) or getattr(config, "rope_scaling", None)
    if not rope:
        return []
    dicts = [rope] if "rope_type" in rope or "type" in rope else [v for v in rope.values() if isinstance(v, dict)]
    return [dict(d, rope_type=d.get("rope_type", d.get("type", "default"))) for d in dicts]


def context_length(config):
    """(tokens, how it was derived) of a config, as vLLM derives max_model_len for a generating model (module
    docstring); None when the config names no context."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    found = {k: getattr(text, k) for k in CONTEXT_KEYS if isinstance(getattr(text, k, None), int)}
    if not found:
        return None, "the config names no context length"
    key = min(found, key=found.get)
    tokens, how = found[key], key
    factor = 1.0
    for rope in _rope_parameters(config):
        if rope["rope_type"] not in ROPE_ALREADY_SCALED and rope.get("factor"):
            factor = float(rope["factor"])
    if factor != 1.0:
        tokens, how = int(tokens * factor), f"{key} x RoPE factor {factor:g}"
    return tokens, how


def check_context(tool, model, wanted, *, overrides=None, offline=True, max_model_len=None):
    """Does `wanted` (an int of tokens, with a text naming the flags that make it) fit `model`'s context?
    Returns (error or None, note). The note says what was checked, or why nothing could be.

    wanted: (tokens, "--max_prompt_len 1024 + --max_response_len 8192") or None (only max_model_len checked).
    max_model_len: an explicit --max_model_len, which vLLM refuses above the model's context."""
    config, why = read_config(model, overrides, offline)
    if config is None:
        return None, f"{tool}: context not checked: {why}; it is checked when the run starts"
    context, how = context_length(config)
    if context is None:
        return None, f"{tool}: context not checked: {model}: {how}"
    extension = (" (with --config_overrides)" if overrides else
                 "; a longer context needs --config_overrides (e.g. '{\"max_position_embeddings\": 32768}', as "
                 "the DAPO authors ran Qwen2.5-Math-7B; preflight.py's docstring)")
    where = f"{model}'s context of {context} tokens ({how}{' after --config_overrides' if overrides else ''})"
    if max_model_len and max_model_len > context:
        return f"--max_model_len {max_model_len} exceeds {where}: lower it{extension}", ""
    if wanted and wanted[0] > context:
        return f"{wanted[1]} = {wanted[0]} tokens exceed {where}: lower them{extension}", ""
    if wanted:
        return None, f"{tool}: context checked: {wanted[1]} = {wanted[0]} tokens fit {where}"
    if max_model_len:
        return None, f"{tool}: context checked: --max_model_len {max_model_len} fits {where}"
    return None, f"{tool}: context checked: vLLM runs at {where}"


# ------------------------------------------------------------------------------------------------------------
# train.py's flags: values, combinations, the model's context, the layout over ranks
# ------------------------------------------------------------------------------------------------------------
# train.py: flags a resumed run may change: when to stop, save, evaluate and log, and memory knobs that leave the
# maths alone. Every other flag changes what is learned: on --resume it comes from the checkpoint, and giving it
# with another value is refused.
RUN_CONTROL_FLAGS = {"max_steps", "save_every", "keep_last", "eval_every", "eval_data", "eval_k", "eval_limit",
                     "eval_temperature", "eval_top_p", "eval_before_train", "wandb", "tensorboard",
                     "contamination_check", "micro_batch_tokens", "logprob_chunk", "gradient_checkpointing",
                     "vllm_gpu_memory_utilization", "enforce_eager", "fsdp_cpu_offload", "reward_workers",
                     "dist_timeout_min", "vllm_runner", "vllm_sleep_level"}


def add_shared_system_flags(group, *, vllm_runner, dist_timeout_min, fsdp_param_dtype, vllm_gpu_memory_utilization):
    """The systems flags train.py and sft.py both take (sft.py's vLLM engine is its periodic eval's): precision,
    packing, memory, the vLLM engine, FSDP2, the grading processes. Defaults that differ come from the caller."""
    g = group
    g.add_argument("--dtype", default=None, choices=["bfloat16", "float32"],
                   help="compute dtype (autocast; weights stay fp32): default bfloat16 on GPU, float32 on CPU")
    g.add_argument("--engine", default="vllm", choices=["vllm", "hf"], help="generation engine")
    g.add_argument("--packing", type=int, default=1, help="1: the trainer's passes run on real tokens only, sequences "
                   "packed into one row (batching.py, packing.py); 0: padded micro-batches")
    g.add_argument("--logprob_chunk", type=int, default=256,
                   help="positions per chunk in logprobs.token_logprobs (memory ~ chunk x vocab)")
    g.add_argument("--gradient_checkpointing", type=int, default=1, help="1: recompute activations in backward")
    g.add_argument("--vllm_gpu_memory_utilization", type=float, default=vllm_gpu_memory_utilization,
                   help="vLLM's share of the GPU while awake")
    g.add_argument("--max_model_len", type=int, default=None, help="vLLM context (default: the longest prompt + "
                   "--max_response_len; train.py: --max_prompt_len +, sft.py: --max_len +, at most the model's)")
    g.add_argument("--enforce_eager", type=int, default=0, help="1: no CUDA graphs in vLLM (less memory, slower)")
    g.add_argument("--fsdp_cpu_offload", type=int, default=0, help="1: keep FSDP2 parameters/grads/optimizer state in "
                   "host memory (also on one GPU: a one-rank FSDP2 group; distributed.py)")
    g.add_argument("--fsdp_param_dtype", default=fsdp_param_dtype, choices=["auto", "float32", "bfloat16"],
                   help="FSDP2 mixed precision (several ranks or offload): bfloat16 gathers and computes with bf16 "
                   "copies of the fp32 master weights, reduces gradients in fp32; auto: --dtype's (distributed.py)")
    g.add_argument("--dist_timeout_min", type=float, default=dist_timeout_min,
                   help="collective timeout under torchrun (NCCL's default is 10: rank 0 alone reads a checkpoint, "
                   "long generations and eval shards finish unevenly)")
    g.add_argument("--vllm_runner", default=vllm_runner, choices=["v1", "v2", "auto"],
                   help="vLLM's model runner on GPU (rollout.VLLM_RUNNER says why V1; `python bench.py gpu` checks "
                   "which combination samples correctly)")
    g.add_argument("--vllm_sleep_level", type=int, default=2, choices=[1, 2], help="2: vLLM discards its weights "
                   "while the trainer runs (pushed anew before it generates); 1: keeps a host copy (host RAM of the "
                   "model's size, slower; the fallback when level 2 fails bench.py gpu's check)")
    g.add_argument("--reward_workers", type=int, default=2, help="grading processes")


def add_system_flags(group, *, vllm_runner, dist_timeout_min, fsdp_param_dtype):
    """train.py's systems flags: how the run uses the machine (precision, memory, the vLLM engine, FSDP2, the
    grading processes), not what it learns. The checks below and check_memory read them. The defaults that live
    with their code (rollout.VLLM_RUNNER, distributed's) come from the caller: rollout and distributed import this
    file, never the reverse."""
    from code_reward import UNSAFE_FLAG
    g = group
    add_shared_system_flags(g, vllm_runner=vllm_runner, dist_timeout_min=dist_timeout_min,
                            fsdp_param_dtype=fsdp_param_dtype, vllm_gpu_memory_utilization=0.5)
    g.add_argument("--tensor_parallel_size", type=int, default=1,
                   help="vLLM tensor parallelism: groups of this many ranks generate together (multi-GPU)")
    g.add_argument("--reward_timeout_s", type=float, default=5.0, help="hard limit per graded response")
    g.add_argument("--strict_answers", type=int, default=1, help="1: reward only explicit answers (box, answer phrase, "
                   "JSON field, ####); 0: also reward.py's free-text fallback (what eval.py uses)")
    g.add_argument("--code_timeout_s", type=float, default=None, help="hard limit per code response, all its tests "
                   "(default code_reward.DEFAULT_TIMEOUT_S)")
    g.add_argument(UNSAFE_FLAG, type=int, default=0, help="1: grade code with the rlimits fallback when the full "
                   "sandbox cannot run: programs can then read the datasets' tests and solutions (reward hacking), "
                   "the network")


def resolve_dtypes(args):
    """train.py's --dtype and --fsdp_param_dtype left at their defaults: bfloat16 on GPU, float32 on CPU; FSDP2's
    "auto" is --dtype's (distributed.FSDP_PARAM_DTYPE: bf16 weights under bf16 compute), float32 with LoRA (each
    parameter keeps its own dtype)."""
    if args.dtype is None:
        args.dtype = "bfloat16" if args.device == "cuda" else "float32"
    if args.fsdp_param_dtype == "auto":
        args.fsdp_param_dtype = "float32" if args.lora_rank else args.dtype


def out_of_memory_message(exc):
    """What to turn when train.py runs out of GPU memory."""
    return (f"train.py: out of GPU memory ({exc}).\nTurn down --micro_batch_tokens (activations), "
            "--vllm_gpu_memory_utilization (vLLM's share), --max_response_len or --batch_size * --group_size "
            "(rollout size); keep --gradient_checkpointing 1; --enforce_eager 1 saves vLLM's CUDA graphs.")


def add_run_control_flags(group, eval_temperature, eval_top_p):
    """train.py's run-control flags: where the run writes, when it stops, saves, evaluates and logs (most of
    RUN_CONTROL_FLAGS: a resumed run may change them). The eval defaults are train.py's constants."""
    g = group
    g.add_argument("--out_dir", default="out/run", help="checkpoints, metrics.jsonl, samples.jsonl")
    g.add_argument("--max_steps", type=int, default=500, help="optimizer steps")
    g.add_argument("--save_every", type=int, default=50, help="checkpoint every N steps (0: only at the end)")
    g.add_argument("--keep_last", type=int, default=3, help="checkpoints to keep (0: all); each holds the fp32 "
                   "weights (4 bytes/parameter: 30 GB at 7B), the newest also AdamW's state (8 bytes/parameter); "
                   "the run prints the sizes at start (runs.py)")
    g.add_argument("--eval_every", type=int, default=50, help="evaluate every N steps (0: never)")
    g.add_argument("--eval_data", default="aime2024", help="eval benchmark(s) for periodic evaluation ('' for none)")
    g.add_argument("--eval_k", type=int, default=1, help="samples per eval problem")
    g.add_argument("--eval_limit", type=int, default=None, help="only the first N eval problems")
    g.add_argument("--eval_temperature", type=float, default=eval_temperature,
                   help="sampling temperature of periodic eval (0: greedy)")
    g.add_argument("--eval_before_train", type=int, default=0,
                   help="1: also evaluate the starting weights, logged as step 0 (the baseline of the eval curve)")
    g.add_argument("--eval_top_p", type=float, default=eval_top_p, help="nucleus sampling of periodic eval")
    g.add_argument("--seed", type=int, default=0, help="seed for data order, sampling and init")
    g.add_argument("--wandb", default="", help="wandb project name (logs there too when set and installed)")
    g.add_argument("--tensorboard", type=int, default=0, help="1: also write TensorBoard logs to out_dir/tb")
    g.add_argument("--dry_run", action="store_true", help="check flags and paths, load nothing, exit")


def check_train_memory(args, source, device, world):
    """train.py on a GPU: check_memory for the run its flags describe (the model read from `source`'s config, vLLM's
    share, a bf16 KL reference when --kl_coef > 0, LoRA). An error (str) or None."""
    import torch
    params = count_parameters(read_config(source, args.overrides, offline=False)[0])
    return check_memory("train.py", params, torch.cuda.get_device_properties(device).total_memory, world=world,
                        cpu_offload=bool(args.fsdp_cpu_offload),
                        vllm_share=args.vllm_gpu_memory_utilization if args.engine == "vllm" else None,
                        reference_bytes=2 if args.kl_coef > 0 else 0, lora=args.lora_rank > 0)


def check_train_flags(args):
    """train.py's flag values and ranges that cannot work: one message each (parse_args refuses them all at once,
    with ignored_flags' and lora.check_flags')."""
    errors = [message for bad, message in [
        (args.batch_size < 1 or args.group_size < 2, f"--batch_size {args.batch_size} must be >= 1 and --group_size "
         f"{args.group_size} >= 2 (a group of one response has advantage 0)"),
        (args.max_response_len < 1 or args.max_steps < 0 or args.micro_batch_tokens < 1,
         "--max_response_len, --micro_batch_tokens must be >= 1 and --max_steps >= 0"),
        (args.clip_low < 0 or (args.clip_low >= 1 and args.loss_type != "cispo") or args.clip_high < 0,
         "--clip_low must be in [0, 1) (CISPO: >= 1 removes the lower bound) and --clip_high >= 0"),
        (not 0 < args.top_entropy_quantile <= 1 or args.max_sampling_rounds < 1 or args.tis_low < 0,
         "--top_entropy_quantile must be in (0, 1], --max_sampling_rounds >= 1, --tis_low >= 0"),
        (not 0 <= args.overlong_buffer_len <= args.max_response_len,
         "--overlong_buffer_len must be in [0, --max_response_len]"),
        (args.kl_coef < 0 or args.entropy_coef < 0 or args.lr <= 0,
         "--kl_coef and --entropy_coef must be >= 0, --lr > 0"),
        (args.temperature <= 0 or args.eval_temperature < 0 or not 0 < args.eval_top_p <= 1,
         "--temperature must be > 0, --eval_temperature >= 0 (0: greedy), --eval_top_p in (0, 1]"),
        (args.top_p != 1.0, f"--top_p {args.top_p}: training rollouts must sample the full distribution (--top_p 1): "
         f"with a nucleus, vLLM's log-probs are those of the renormalised top-p set, which the trainer does not "
         f"compute, so the PPO ratio, the IS weights and the alignment check would be wrong. Use --eval_top_p"),
        (args.ppo_epochs < 1 or args.mini_batches < 1 or args.batch_size % args.mini_batches,
         "--ppo_epochs and --mini_batches must be >= 1 and divide the batch")] if bad]
    return errors


def check_train_run(args, parser, ckpt, errors, later):
    """train.py's flags before anything loads: their values (check_train_flags, lora.check_flags), combinations
    (ignored_flags against `parser`'s defaults), and what they name: the template, --reward's functions (parsed into
    args.reward_components), LoRA's target modules, --init_from, the data specs, the code sandbox in a dry run.
    Appends to `errors`, and to `later` what a dry run only notes (paths an earlier recipe stage will create)."""
    import data
    import lora
    from reward import check_reward_functions, parse_reward_spec
    errors += check_train_flags(args) + lora.check_flags(args) + ignored_flags(args, parser)
    errors += list(filter(None, [data.template_error(args.template)]))
    args.reward_components = None   # --reward parsed, each user's function imported where it will run (reward.py)
    if args.reward:
        try:
            args.reward_components = parse_reward_spec(args.reward)
        except ValueError as exc:
            errors.append(str(exc))
        errors += list(filter(None, [args.reward_components and check_reward_functions(args.reward_components)]))
        if args.format_reward:
            errors.append("--format_reward with --reward: name format or format_loose in --reward instead")
    if args.lora_rank > 0 and args.lora_targets and not ckpt and not errors:
        errors += lora.check_targets(args.init_from or args.model, args.lora_targets)
    if args.init_from and not ckpt and not os.path.isdir(os.path.join(args.init_from, "model")) and \
            not os.path.exists(os.path.join(args.init_from, "config.json")):
        (later if args.dry_run else errors).append(f"--init_from {args.init_from}: not a checkpoint (no model/ or "
                                                   "config.json)")
    specs = args.train_data.split(",") + args.eval_data.split(",")
    for problem, looks_like_path in data.unknown_specs(specs, probe_hub=args.dry_run):
        (later if args.dry_run and looks_like_path else errors).append(problem)
    if args.dry_run:  # a run that grades code needs the sandbox (a real run checks it in main, after its data)
        errors += list(filter(None, [check_code_sandbox("train.py", specs, args.template,
                                                        bool(args.allow_unsafe_code_sandbox))]))


def check_train_data(args, problems, eval_problems):
    """train.py, once its data is loaded (before any model): --reward must grade every kind of row it is given
    (math on code rows, or code on math rows, is refused now, not at the first evaluation); --contamination_check
    warns about training problems found in eval sets; a run that grades code needs the full sandbox (sets
    args.code_sandbox; code_reward.require_sandbox exits otherwise). Returns an error or None."""
    import data
    from code_reward import require_sandbox
    from reward import check_rows
    unfit = args.reward_components and (
        check_rows(args.reward_components, problems, f"--train_data {args.train_data}") or
        (eval_problems and check_rows(args.reward_components, eval_problems, f"--eval_data {args.eval_data}")))
    if unfit:
        return f"train.py: {unfit}"
    if args.contamination_check and int(os.environ.get("RANK", "0")) == 0:
        hits = data.find_contamination(problems, data.SHIPPED_EVAL + tuple(   # and the hub eval sets it evaluates on
            spec for spec in args.eval_data.split(",") if data.is_hub_set(spec)))
        if hits:
            print(f"train.py: WARNING: {len(hits)} training problems also appear in eval sets, e.g. {hits[:3]}")
    if any("tests" in p for p in problems + eval_problems):  # code runs: the full sandbox, or refuse to start
        args.code_sandbox = require_sandbox(bool(args.allow_unsafe_code_sandbox))
    return None


def ignored_flags(args, parser):
    """A flag set away from its default in a combination where nothing reads it is refused (a message each), so
    that no run silently differs from what its command line says. Flags that are read but change nothing strictly
    on-policy (the ratio pi / pi_old is 1) get a printed note instead: they are right for an off-policy run."""
    changed = {name for name in vars(args) if getattr(args, name) != parser.get_default(name)}
    needs = [("tis_cap", args.tis_cap > 0, {"tis_mode", "tis_low"}),
             ("overlong_buffer_len", args.overlong_buffer_len > 0, {"overlong_penalty"}),
             ("dynamic_sampling", args.dynamic_sampling, {"max_sampling_rounds"}),
             ("kl_coef", args.kl_coef > 0, {"kl_estimator"}),
             ("engine vllm", args.engine == "vllm", {"vllm_gpu_memory_utilization", "vllm_runner", "vllm_sleep_level",
                                                     "enforce_eager", "tensor_parallel_size"})]
    errors = [f"--{', --'.join(sorted(changed & flags))}: nothing reads "
              f"{'it' if len(changed & flags) == 1 else 'them'} without --{needed}{'' if ' ' in needed else ' > 0'}"
              for needed, on, flags in needs if not on and changed & flags]
    if args.clip_ratio_c and (args.loss_type != "ppo" or args.clip_ratio_c <= 1):
        errors.append(f"--clip_ratio_c {args.clip_ratio_c}: dual clipping is PPO's (--loss_type ppo) and needs c > 1")
    on_policy_only = sorted(changed & {"clip_low", "clip_high", "loss_type", "clip_ratio_c"})
    if on_policy_only and args.ppo_epochs == 1 and args.mini_batches == 1 and int(os.environ.get("RANK", "0")) == 0:
        print(f"train.py: note: --{', --'.join(on_policy_only)} change nothing strictly on-policy (--ppo_epochs 1, "
              f"--mini_batches 1: the ratio pi / pi_old is 1); they act with --mini_batches or --ppo_epochs > 1")
    return errors


def check_train_context(args, ckpt, default_model):
    """train.py: prompt + response (or --max_model_len) must fit the context of the model the run starts from, read
    from its config (offline in a dry run: a local directory or the Hugging Face cache; a dry run says when it
    cannot). Sets args.overrides (--config_overrides parsed). Returns an error, or None after printing (rank 0)
    what was checked."""
    try:
        args.overrides = parse_overrides(args.config_overrides)
        source, note = str(ckpt / "model") if ckpt else args.stage_start, ""
        if args.dry_run and not os.path.exists(source) and source != args.model:  # an earlier stage will make it
            if args.model == default_model:  # no --model given: nothing says which model the checkpoint will hold
                source = args.init_from  # reported as not readable (yet)
            else:
                source = args.model
                note = f" (--init_from {args.init_from} does not exist yet: checked against --model)"
        # what vLLM is asked for: --max_model_len, or room for the longest prompt and response
        wanted = None if args.max_model_len else (args.max_prompt_len + args.max_response_len,
                                                  f"--max_prompt_len {args.max_prompt_len} + --max_response_len "
                                                  f"{args.max_response_len}")
        error, checked = check_context("train.py", source, wanted, overrides=args.overrides, offline=args.dry_run,
                                       max_model_len=args.max_model_len)
    except ValueError as exc:
        return str(exc)
    if not error and int(os.environ.get("RANK", "0")) == 0:
        print(checked + note)
    return error


def check_layout(world, tp_size, batch_size):
    """An error (str) unless the ranks split into vLLM tensor-parallel groups of tp_size and the batch splits evenly
    over those groups, and each group's share over its tp_size ranks (train.py's batch layout diagram)."""
    replicas = world // tp_size
    if world % tp_size or batch_size % replicas or (tp_size > 1 and batch_size // replicas % tp_size):
        return (f"train.py: need {world} ranks divisible by --tensor_parallel_size {tp_size}, and --batch_size "
                f"{batch_size} divisible by the {replicas} data-parallel groups (and their share by {tp_size})")
    return None


# ------------------------------------------------------------------------------------------------------------
# Memory for full fine-tuning
# ------------------------------------------------------------------------------------------------------------
def count_parameters(config):
    """Parameters of the model a config describes (tied weights once), built on the meta device: no memory."""
    import torch
    from transformers import AutoModelForCausalLM
    with torch.device("meta"):
        model = AutoModelForCausalLM.from_config(config)
    return sum(p.numel() for p in model.parameters())


def check_memory(tool, params, gpu_bytes, *, world=1, cpu_offload=False, vllm_share=None, reference_bytes=0,
                 lora=False):
    """An error (str) when full fine-tuning of `params` parameters cannot fit a GPU of `gpu_bytes`, else None.

    Per GPU, FSDP2 shards the state over `world` ranks: 16 B/param for the update (weights, gradients, AdamW),
    plus reference_bytes (a bf16 KL reference: 2 B/param). With vllm_share (train.py: vLLM's
    gpu_memory_utilization), the state between updates (12 B/param: gradients are freed) must also fit beside
    vLLM's share, or vLLM refuses to start. Activations come on top of this: passing is necessary, not sufficient.
    --fsdp_cpu_offload keeps the state in host memory: nothing to check here. lora: the state is the frozen base in
    bf16 (2 B/param; the adapters with their gradients and AdamW add 0.01-0.7 B/param at ranks 1-128, `python
    bench.py memory`) and the KL reference is that base with the adapters off (nothing more)."""
    if cpu_offload or not gpu_bytes:
        return None
    gb = 1e9
    if lora:
        update = resident = LORA_BYTES * params / world
    else:
        update = (FULL_FINETUNE_BYTES + reference_bytes) * params / world
        resident = (RESIDENT_BYTES + reference_bytes) * params / world
    room = gpu_bytes * (1 - vllm_share) if vllm_share else None
    problem = None
    if update > gpu_bytes and lora:
        problem = (f"the frozen base of {params / 1e9:.2f}B parameters with its LoRA adapters needs "
                   f"{update / gb:.0f} GB per GPU on {world} process(es), more than this GPU's {gpu_bytes / gb:.0f} GB")
    elif update > gpu_bytes:
        problem = (f"full fine-tuning of {params / 1e9:.2f}B parameters needs {update / gb:.0f} GB per GPU on "
                   f"{world} process(es) (16 B/param: fp32 weights, gradients, AdamW"
                   f"{' + the bf16 KL reference' if reference_bytes else ''}), more than this GPU's "
                   f"{gpu_bytes / gb:.0f} GB")
    elif room is not None and resident > room:
        per_param = f"{LORA_BYTES} B/param with LoRA" if lora else "12 B/param" + (" + the KL reference"
                                                                                  if reference_bytes else "")
        problem = (f"the trainer's state between updates ({resident / gb:.0f} GB per GPU: {per_param}) does not "
                   f"fit beside vLLM's share (--vllm_gpu_memory_utilization {vllm_share} of {gpu_bytes / gb:.0f} GB)")
    if problem is None:
        return None
    return (f"{tool}: {problem}. Use more GPUs (torchrun --nproc_per_node N: FSDP2 shards the state; "
            f"recipes: LAUNCHER=\"torchrun --nproc_per_node 8\"), --fsdp_cpu_offload 1 (state in host memory), "
            f"or train low-rank adapters instead of every weight (--lora_rank 32: ~2.1 B/param, lora.py)"
            f"{'; or lower --vllm_gpu_memory_utilization' if room is not None else ''}")


# ------------------------------------------------------------------------------------------------------------
# No GPU in torch although nvidia-smi sees one
# ------------------------------------------------------------------------------------------------------------
def check_code_sandbox(tool, specs, template, allow_fallback):
    """An error message, or None: the run grades code (template "code", or a spec whose rows hold tests) and the
    full sandbox does not work here, and the fallback was not accepted (--allow_unsafe_code_sandbox 1)."""
    import code_reward
    import data
    if allow_fallback or not (template == "code" or any(data.has_code_rows(s) for s in specs if s)):
        return None
    if code_reward.sandbox_mode("bwrap") == "bwrap":
        return None
    return (f"{tool}: this run grades code, and the full code sandbox does not work here: install bubblewrap and "
            f"libseccomp (setup.sh does, as root), or accept the weaker rlimits fallback with "
            f"{code_reward.UNSAFE_FLAG} 1 (code_reward.py's docstring says what it lets a program do)")


def nvidia_driver():
    """(driver version string, GPU names) from nvidia-smi, or (None, []) when it is missing or fails."""
    if not shutil.which("nvidia-smi"):
        return None, []
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return None, []
    rows = [[c.strip() for c in line.split(",", 1)] for line in out.stdout.splitlines() if line.strip()]
    if out.returncode or not rows:
        return None, []
    return rows[0][0], [r[-1] for r in rows]


def no_gpu_message(tool, torch_version=None, torch_cuda="unset"):
    """Why torch sees no CUDA GPU, and what to do: the driver vs torch's CUDA when nvidia-smi works."""
    import torch
    torch_version = torch_version or torch.__version__
    torch_cuda = torch.version.cuda if torch_cuda == "unset" else torch_cuda
    driver, gpus = nvidia_driver()
    if driver is None:
        return (f"{tool}: no CUDA GPU here (nvidia-smi finds none). The GPU defaults need one; on a CPU machine "
                f"run the demo:\n  python demo.py")
    head = (f"{tool}: nvidia-smi sees {len(gpus)} GPU(s) ({gpus[0]}) with NVIDIA driver {driver}, but torch "
            f"{torch_version} sees none")
    if not torch_cuda:
        return (f"{head}: this torch is a CPU build. Install the GPU stack: DEVICE=gpu bash setup.sh "
                f"(a fresh VENV=...), or --device cpu")
    major = int(str(torch_cuda).split(".")[0])
    need = MIN_DRIVER.get(major)
    have = int(re.match(r"\d+", driver).group()) if re.match(r"\d+", driver) else 0
    if need and have < need:
        return (f"{head}: torch was built for CUDA {torch_cuda}, which needs driver >= {need}. Upgrade the "
                f"driver, or install the older pinned stack for CUDA 12.8 in a fresh environment: "
                f"STACK=cu128 VENV=.venv-cu128 bash setup.sh (setup.sh says which versions)")
    return (f"{head} although torch's CUDA {torch_cuda} suits driver {driver}: check CUDA_VISIBLE_DEVICES "
            f"({os.environ.get('CUDA_VISIBLE_DEVICES', 'unset')}) and `nvidia-smi` for a GPU in use or in a "
            f"bad state")
