"""A Hugging Face cache holding only the config.json (and tokenizer_config.json's model_max_length) of the models
the recipes and the README name, so that dry runs check their context lengths offline (tests/test_recipes.py,
tests/test_preflight.py)."""
import json
from pathlib import Path

import pytest

# The context and shape fields of the published config.json of the models the recipes and the README name
# (Hugging Face, as of 2026), enough for the context check and the parameter count.
QWEN = dict(architectures=["Qwen2ForCausalLM"], model_type="qwen2", hidden_act="silu", rms_norm_eps=1e-6)
HUB_CONFIGS = {
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": dict(QWEN, hidden_size=1536, intermediate_size=8960,
        num_hidden_layers=28, num_attention_heads=12, num_key_value_heads=2, vocab_size=151936,
        max_position_embeddings=131072, rope_theta=10000, tie_word_embeddings=False),
    "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": dict(QWEN, hidden_size=3584, intermediate_size=18944,
        num_hidden_layers=28, num_attention_heads=28, num_key_value_heads=4, vocab_size=152064,
        max_position_embeddings=131072, rope_theta=10000, tie_word_embeddings=False),
    "Qwen/Qwen2.5-Math-1.5B": dict(QWEN, hidden_size=1536, intermediate_size=8960, num_hidden_layers=28,
        num_attention_heads=12, num_key_value_heads=2, vocab_size=151936, max_position_embeddings=4096,
        rope_theta=10000, tie_word_embeddings=True),
    "Qwen/Qwen2.5-Math-7B": dict(QWEN, hidden_size=3584, intermediate_size=18944, num_hidden_layers=28,
        num_attention_heads=28, num_key_value_heads=4, vocab_size=152064, max_position_embeddings=4096,
        rope_theta=10000, tie_word_embeddings=False),
    "meta-llama/Llama-3.1-8B-Instruct": dict(architectures=["LlamaForCausalLM"], model_type="llama",
        hidden_size=4096, intermediate_size=14336, num_hidden_layers=32, num_attention_heads=32,
        num_key_value_heads=8, vocab_size=128256, max_position_embeddings=131072, rope_theta=500000.0,
        rope_scaling=dict(factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                          original_max_position_embeddings=8192, rope_type="llama3"), tie_word_embeddings=False),
}
# tokenizer_config.json's model_max_length where it is below the config's context: vLLM does not cap a generating
# model's context with it, and neither may preflight (the AceReason / DeepScaleR recipes run these past 16,384)
TOKENIZER_MAX_LENGTH = {"deepseek-ai/DeepSeek-R1-Distill-Qwen-1.5B": 16384,
                        "deepseek-ai/DeepSeek-R1-Distill-Qwen-7B": 16384}


def write_hub_cache(cache):
    """A Hugging Face cache (HF_HUB_CACHE layout) at `cache` holding only those config.json and
    tokenizer_config.json files; returns cache (a Path)."""
    cache = Path(cache)
    for repo, config in HUB_CONFIGS.items():
        folder = cache / f"models--{repo.replace('/', '--')}"
        snapshot = folder / "snapshots" / ("0" * 40)
        snapshot.mkdir(parents=True)
        (snapshot / "config.json").write_text(json.dumps(config))
        if repo in TOKENIZER_MAX_LENGTH:
            (snapshot / "tokenizer_config.json").write_text(json.dumps({"model_max_length": TOKENIZER_MAX_LENGTH[repo]}))
        (folder / "refs").mkdir()
        (folder / "refs" / "main").write_text("0" * 40)
    return cache


@pytest.fixture(scope="module")
def hub_cache(tmp_path_factory):
    """write_hub_cache in a fresh folder."""
    return write_hub_cache(tmp_path_factory.mktemp("hub"))
