"""The pieces of a small RLHF job that the tests share: a tiny random Llama with a word-level tokenizer,
saved with save_pretrained (frameworks want a path; nothing is downloaded), prompts, a Python reward,
and TRL's common trainer arguments. Used by simcuda's value-mode scenarios and by the multi-rank
TRL job under accelerate (tests/gpu/trl_grpo_rank.py)."""


def tiny_llama_and_tokenizer(directory=None, **config_overrides):
    """A tiny random Llama and a word-level tokenizer, built here and saved with save_pretrained (no
    downloads) under `directory` (a fresh temporary one by default); returns (model directory,
    tokenizer). config_overrides replace LlamaConfig fields (vLLM's attention wants head_dim 64)."""
    import os
    import tempfile

    import torch
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    out = directory or tempfile.mkdtemp(prefix="trl-")
    words = ["<pad>", "<eos>", "<bos>", "<unk>"] + ["w%d" % i for i in range(60)]
    tok = Tokenizer(models.WordLevel({w: i for i, w in enumerate(words)}, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>",
                                        bos_token="<bos>", unk_token="<unk>")
    model_dir = os.path.join(out, "model")
    tokenizer.save_pretrained(model_dir)
    fields = dict(vocab_size=len(words), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
                  pad_token_id=0, eos_token_id=1, bos_token_id=2)
    config = LlamaConfig(**{**fields, **config_overrides})
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(model_dir)
    return model_dir, tokenizer


def prompts(n=32):
    return ["w%d w%d w%d" % (i % 60, (i * 7) % 60, (i * 11) % 60) for i in range(n)]


def reward_length(completions, **kwargs):
    return [float(len(c.split())) / 10.0 for c in completions]


def common_args(model_dir):
    import os

    return dict(output_dir=os.path.join(os.path.dirname(model_dir), "run"), per_device_train_batch_size=4,
                max_steps=3, logging_steps=1, report_to=[], save_strategy="no", learning_rate=1e-4, bf16=False,
                dataloader_num_workers=0, seed=0)


def trained(trainer):
    import torch

    trainer.train()
    logged = [h for h in trainer.state.log_history if "loss" in h]
    out = {"steps": trainer.state.global_step, "losses": [h["loss"] for h in logged],
           "grad_norms": [h.get("grad_norm") for h in logged], "allocator": torch.cuda.get_allocator_backend()}
    if out["allocator"] == "phasealloc":  # what offload moved, when PHASEALLOC_CONF asks for it
        import phasealloc

        s = phasealloc.stats()
        out.update(offloads=s["num_offloads"], restores=s["num_restores"], offloaded_peak=s["offloaded_bytes.all.peak"])
    return out
