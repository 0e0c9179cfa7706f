"""The transformers fallback engine (`--engine hf` in train.py, sft.py and eval.py): rollout.py's four calls --
generate, update_weights, sleep, wake_up -- on transformers' generate(), for machines without vLLM and as a
cross-check of vLLM's samples and log-probs (tests/test_rollout.py runs the same bookkeeping checks on both).
Slower than vLLM (no paged KV cache, no continuous batching) and never colocated: there is nothing to sleep.
"""
import time

import torch

from data import Sample, check_prompt_ids


class HFEngine:
    """The same interface on transformers' generate(), for machines without vLLM and as a cross-check.

    model: a local path / hub id (the engine loads its own copy), or the trainer's nn.Module itself (then
    update_weights is a no-op: generation always sees the current weights, at the cost of no KV-cache reuse).
    Log-probs are those of the processed distribution (temperature and top-p applied), like vLLM's.
    """

    def __init__(self, model, tokenizer=None, dtype=torch.float32, device=None, seed=0, *, batch_size=64,
                 max_model_len=None, config_overrides=None):
        from transformers import AutoModelForCausalLM, AutoTokenizer
        self.device = device or ("cuda" if torch.cuda.is_available() else "cpu")
        if isinstance(model, torch.nn.Module):
            self.model, self.shared = model, True
        else:  # config_overrides: --config_overrides, as the trainer applies them (preflight.read_config)
            from preflight import read_config
            config = read_config(model, config_overrides, offline=False)[0] if config_overrides else None
            self.model = AutoModelForCausalLM.from_pretrained(model, dtype=dtype, config=config).to(self.device)
            self.shared = False
        self.tokenizer = tokenizer if tokenizer is not None else AutoTokenizer.from_pretrained(
            model if isinstance(model, str) else self.model.name_or_path)
        self.seed = seed
        self.batch_size = self.max_num_seqs = batch_size   # sequences per generate() call (eval.py sizes by it)
        self.max_model_len = max_model_len or self.model.config.max_position_embeddings
        self.last_sync_s = 0.0

    @torch.no_grad()
    def generate(self, prompt_token_ids, n=1, temperature=1.0, top_p=1.0, max_tokens=1024, *, seed=None,
                 logprobs=True):  # logprobs: computed either way (cheap here); rollout.py's engine may skip them
        check_prompt_ids(prompt_token_ids)
        eos = self.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos]) | {self.tokenizer.eos_token_id}
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else self.tokenizer.eos_token_id
        was_training = self.model.training
        self.model.eval()
        generator_seed = self.seed if seed is None else seed
        samples = []
        per_call = max(1, self.batch_size // n)
        try:
            for start in range(0, len(prompt_token_ids), per_call):
                chunk = prompt_token_ids[start:start + per_call]
                torch.manual_seed(generator_seed + start * n)
                width = max(map(len, chunk))
                ids = torch.tensor([[pad] * (width - len(p)) + list(p) for p in chunk], device=self.device)
                attention = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in chunk], device=self.device)
                new_tokens = min(max_tokens, self.max_model_len - width)
                out = self.model.generate(
                    input_ids=ids, attention_mask=attention, do_sample=temperature > 0, temperature=temperature or None,
                    top_p=top_p, top_k=0, max_new_tokens=new_tokens, num_return_sequences=n, pad_token_id=pad,
                    eos_token_id=sorted(eos_ids), return_dict_in_generate=True, output_scores=True, use_cache=True)
                generated = out.sequences[:, width:]                                   # [len(chunk)*n, L]
                scores = torch.stack(out.scores, dim=1).float().log_softmax(-1)        # processed distribution
                token_lp = scores.gather(-1, generated.unsqueeze(-1)).squeeze(-1)      # [len(chunk)*n, L]
                for row in range(generated.shape[0]):
                    tokens = generated[row].tolist()
                    stop_at = next((k for k, t in enumerate(tokens) if t in eos_ids), None)
                    length = len(tokens) if stop_at is None else stop_at + 1
                    tokens = tokens[:length]
                    samples.append(Sample(
                        list(chunk[row // n]), tokens, token_lp[row, :length].tolist(),
                        "stop" if stop_at is not None else "length",
                        self.tokenizer.decode(tokens, skip_special_tokens=True)))
        finally:
            self.model.train(was_training)
        return samples

    @torch.no_grad()
    def update_weights(self, named_tensors):
        start = time.perf_counter()
        if not self.shared:
            own = self.model.state_dict()
            for name, tensor in named_tensors:
                own[name].copy_(tensor)
        self.last_sync_s = time.perf_counter() - start
        return self.last_sync_s

    def sleep(self):
        pass

    def wake_up(self):
        pass

    def close(self):
        pass
