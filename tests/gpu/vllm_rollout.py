"""One vLLM engine's life in one process, as an RLHF rollout worker lives it: start (profile, size the
KV cache from the device's free memory), generate, sleep(level=1), wake, generate, sleep(level=2),
wake. Run by tests/gpu/test_vllm.py under phasealloc-run --sim-gpu (PyTorch's allocator or
phasealloc) with the vLLM venv's interpreter:

    python vllm_rollout.py MODEL_DIR [--cuda-graphs]

MODEL_DIR is made here (a random two-layer Llama, save_pretrained) if it does not exist. Prints one
line "ROLLOUT {json}" with what the test asserts on; asserts nothing itself, so the test names the
figure that is wrong. The report carries the reference: the same checkpoint in Hugging Face's Llama on the CPU in fp32,
its greedy generate() and how far each of vLLM's tokens lies below its greedy choice
(greedy_deficits; CPU work is not simulated).

The engine core runs in this process (VLLM_ENABLE_V1_MULTIPROCESSING=0, set by the test), so the
simulated GPU this process sees is the engine's. Attention is vLLM's FLASH_ATTN (the compiled
FlashAttention in vLLM's wheel: no JIT); FlashInfer's sampler is off (VLLM_USE_FLASHINFER_SAMPLER=0:
it JIT-compiles with nvcc). vLLM's own Triton kernels are compiled by Triton's ptxas on the CPU.
"""

import json
import os
import sys

VOCAB = 512
LAYERS = 2
KV_HEADS = 2
HEAD_DIM = 64
MAX_TOKENS = 8
UTILIZATION = 0.5


def make_model(path):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(vocab_size=VOCAB, hidden_size=KV_HEADS * HEAD_DIM, intermediate_size=256,
                         num_hidden_layers=LAYERS, num_attention_heads=KV_HEADS, num_key_value_heads=KV_HEADS,
                         head_dim=HEAD_DIM, max_position_embeddings=256, bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    LlamaForCausalLM(config).to(torch.bfloat16).save_pretrained(path)


def cpu_model(model_dir, weights=None):
    """The checkpoint in Hugging Face's Llama on the CPU in fp32 (with `weights`, name -> tensor, loaded
    over it): the reference vLLM's greedy tokens are held to."""
    import torch
    from transformers import LlamaForCausalLM

    model = LlamaForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
    if weights is not None:
        model.load_state_dict({name: t.float() for name, t in weights.items()}, strict=False)
    return model.eval()


def greedy_reference(model, prompt, max_tokens):
    """Hugging Face's greedy generate() on the CPU."""
    import torch

    with torch.no_grad():
        out = model.generate(torch.tensor([prompt]), max_new_tokens=max_tokens, min_new_tokens=max_tokens,
                             do_sample=False)
    return out[0, len(prompt):].tolist()


def greedy_deficits(model, prompt, tokens):
    """For each generated token, how far its logit lies below the largest one given the same prefix,
    on the CPU model (teacher-forced): 0 where the token is the CPU's greedy choice. A greedy run
    computed in bf16 may take the other side of a near-tie (a margin under GREEDY_TOLERANCE); a token
    from garbage attention or a corrupted weight lies a sizable part of the logits' spread below."""
    import torch

    ids = torch.tensor([prompt + list(tokens)])
    with torch.no_grad():
        logits = model(ids).logits[0, len(prompt) - 1:-1].float()
    chosen = logits.gather(1, torch.tensor(tokens)[:, None])[:, 0]
    return (logits.max(dim=-1).values - chosen).tolist()


# Logits of the tiny random Llama spread with a standard deviation of about 0.2, its top two are
# 0.001-0.4 apart: a token counts as the CPU's choice if its logit is within 0.01 of the largest.
GREEDY_TOLERANCE = 0.01


def value_level():
    """The simulated GPU's value level as this process's simulator reports it (None on a real GPU)."""
    try:
        from simcuda import introspect
    except ImportError:
        return None
    return introspect.value_level() if introspect.loaded() else None


def weights_checksum(model):
    """Sum of every parameter, read back to the host through a copy (real on the simulator)."""
    import torch

    return float(sum(p.detach().float().cpu().sum() for p in model.parameters()))


def main():
    model_dir = sys.argv[1]
    cuda_graphs = "--cuda-graphs" in sys.argv[2:]
    if not os.path.exists(os.path.join(model_dir, "config.json")):
        make_model(model_dir)

    import torch
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    prompt_ids = [1, 5, 6, 7]

    total = torch.cuda.mem_get_info()[1]
    llm = LLM(model=model_dir, skip_tokenizer_init=True, enforce_eager=not cuda_graphs, dtype="bfloat16",
              gpu_memory_utilization=UTILIZATION, enable_sleep_mode=True, max_model_len=128, max_num_seqs=4,
              attention_backend="FLASH_ATTN")
    config = llm.llm_engine.vllm_config
    blocks = config.cache_config.num_gpu_blocks
    kv_bytes = blocks * config.cache_config.block_size * LAYERS * 2 * KV_HEADS * HEAD_DIM * 2  # K and V, bf16
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, ignore_eos=True, detokenize=False)
    prompt = TokensPrompt(prompt_token_ids=prompt_ids)

    def generate():
        return list(llm.generate([prompt], params, use_tqdm=False)[0].outputs[0].token_ids)

    def free():
        torch.cuda.synchronize()
        return torch.cuda.mem_get_info()[0]

    phasealloc = sys.modules.get("phasealloc")  # loaded by the start-up hook under phasealloc

    def phase():
        """The phase phasealloc's detection set (None on PyTorch's allocator)."""
        return phasealloc.current_phase() if phasealloc is not None and phasealloc.is_enabled() else None

    report = {"total_bytes": total, "utilization": UTILIZATION, "kv_cache_bytes": kv_bytes,
              "free_after_start": free(), "cuda_graphs": cuda_graphs,
              "cudagraph_mode": str(config.compilation_config.cudagraph_mode),
              "allocator": torch.cuda.get_allocator_backend(), "value_level": value_level()}
    report["tokens"] = generate()
    report["checksum_before_sleep"] = llm.apply_model(weights_checksum)[0]
    report["free_before_sleep1"] = free()
    llm.sleep(level=1)
    report["free_asleep1"] = free()
    report["phase_asleep1"] = phase()
    llm.wake_up()
    report["free_awake1"] = free()
    report["phase_awake1"] = phase()
    report["checksum_after_wake1"] = llm.apply_model(weights_checksum)[0]
    report["tokens_after_wake1"] = generate()
    llm.sleep(level=2)
    report["free_asleep2"] = free()
    llm.wake_up()
    report["free_awake2"] = free()
    reference = cpu_model(model_dir)  # the CPU's computation is not simulated
    report["reference_tokens"] = greedy_reference(reference, prompt_ids, MAX_TOKENS)
    report["deficits"] = {name: greedy_deficits(reference, prompt_ids, report[name])
                          for name in ("tokens", "tokens_after_wake1")}
    print("ROLLOUT " + json.dumps(report), flush=True)


if __name__ == "__main__":
    main()
