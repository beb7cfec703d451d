"""vllm_forms.py's CPU forms of vLLM's operations against PyTorch's own CPU computations of the same
thing: paged, variable-length FlashAttention against scaled_dot_product_attention on each sequence
alone, the norms and the activation against their definitions. CPU tensors only (no vLLM); each
check runs in a child with the simulator's libraries (this venv's torch loads only with them)."""

import torch_harness


def scenario_paged_varlen_attention_is_causal_attention_of_each_sequence():
    """Two sequences (5 and 3 new queries over 9 and 3 keys), GQA (4 query heads, 2 key/value heads),
    their keys scattered over the pages of a paged cache in a shuffled order: each sequence's output
    is SDPA with the bottom-right causal mask over its own keys."""
    import torch
    import torch.nn.functional as F
    from simcuda import vllm_forms

    g = torch.Generator().manual_seed(0)
    heads, kv_heads, dim, page = 4, 2, 8, 4
    lengths_q, lengths_k = [5, 3], [9, 3]
    q = torch.randn(sum(lengths_q), heads, dim, generator=g)
    keys = [torch.randn(n, kv_heads, dim, generator=g) for n in lengths_k]
    values = [torch.randn(n, kv_heads, dim, generator=g) for n in lengths_k]
    pages = torch.randperm(8, generator=g)
    k_cache, v_cache = torch.zeros(8, page, kv_heads, dim), torch.zeros(8, page, kv_heads, dim)
    table = torch.zeros(2, 3, dtype=torch.int32)
    used = 0
    for b, n in enumerate(lengths_k):
        for i in range((n + page - 1) // page):
            p = int(pages[used])
            used += 1
            table[b, i] = p
            rows = slice(i * page, min(n, (i + 1) * page))
            k_cache[p, :rows.stop - rows.start] = keys[b][rows]
            v_cache[p, :rows.stop - rows.start] = values[b][rows]
    out = torch.full_like(q, float("nan"))
    cu_q = torch.tensor([0, 5, 8], dtype=torch.int32)
    vllm_forms.fa2_varlen_fwd({"q": q, "k": k_cache, "v": v_cache, "out": out, "cu_seqlens_q": cu_q,
                               "cu_seqlens_k": torch.zeros(3, dtype=torch.int32),
                               "seqused_k": torch.tensor(lengths_k, dtype=torch.int32), "block_table": table,
                               "softmax_scale": dim ** -0.5, "is_causal": True, "window_size_left": -1,
                               "window_size_right": -1, "softcap": 0.0}, [out, None])
    for b, (q0, q1) in enumerate(((0, 5), (5, 8))):
        nq, nk = q1 - q0, lengths_k[b]
        mask = torch.ones(nq, nk, dtype=torch.bool).tril(nk - nq)  # bottom-right aligned
        expected = F.scaled_dot_product_attention(q[q0:q1].transpose(0, 1), keys[b].transpose(0, 1),
                                                  values[b].transpose(0, 1), attn_mask=mask, enable_gqa=True)
        torch.testing.assert_close(out[q0:q1], expected.transpose(0, 1), rtol=1e-5, atol=1e-5)
    return True


def scenario_norms_and_activation_follow_their_definitions():
    import torch
    import torch.nn.functional as F
    from simcuda import vllm_forms

    g = torch.Generator().manual_seed(1)
    x, residual, weight = (torch.randn(3, 16, generator=g) for _ in range(3))
    rms = lambda t: t * torch.rsqrt(t.pow(2).mean(-1, keepdim=True) + 1e-6) * weight  # noqa: E731
    out = torch.empty_like(x)
    vllm_forms.rms_norm({"result": out, "input": x, "weight": weight, "epsilon": 1e-6}, [])
    torch.testing.assert_close(out, rms(x))
    x2, r2 = x.clone(), residual.clone()
    vllm_forms.fused_add_rms_norm({"input": x2, "residual": r2, "weight": weight, "epsilon": 1e-6}, [])
    torch.testing.assert_close(r2, x + residual)
    torch.testing.assert_close(x2, rms(x + residual))
    act = torch.empty(3, 8)
    vllm_forms.silu_and_mul({"result": act, "input": x}, [])
    torch.testing.assert_close(act, F.silu(x[:, :8]) * x[:, 8:])
    return True


OFF = {"SIMCUDA_GPU": "quiet:1,values:off"}


def test_paged_varlen_attention_is_causal_attention_of_each_sequence():
    assert torch_harness.run(__file__, "paged_varlen_attention_is_causal_attention_of_each_sequence", env=OFF)


def test_norms_and_activation_follow_their_definitions():
    assert torch_harness.run(__file__, "norms_and_activation_follow_their_definitions", env=OFF)


if __name__ == "__main__":
    torch_harness.child_main(globals())
