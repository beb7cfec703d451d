"""CPU forms of the custom operations vLLM's wheel registers on a Llama-style model's path, for the
value mode (values.py): its norms, activation, rotary embedding, KV-cache write and FlashAttention
(FA2's `varlen_fwd`, FA3's `fwd`, paged or not).

Rationale: these operations have CUDA kernels only, so on simcuda, the simulated GPU, they had the
stand-in (zeros, or arguments left as they were) at every level, and a vLLM generation could not be
compared with any reference. Each is written here from its contract (vLLM's `_custom_ops` and
`flash_attn_interface` docstrings, the schemas in its wheel), in PyTorch on the CPU, with the
arithmetic in the same precision steps as the CUDA kernel where that changes a rounding (norms in
fp32, then cast, then the weight in the model's dtype).

Approach: a form is keyed by the operator's qualified name ("_C::rms_norm"), so that the table needs
no vLLM import and serves every vLLM release whose schema keeps the argument names. It receives the
operation's arguments bound to their schema names (CUDA tensors as CPU aliases of their device bytes)
and the CPU aliases of the CUDA operation's returned tensors, and writes its results through them.
Attention is heavy (HEAVY): at values:observable it keeps the stand-in, like PyTorch's own attention.

Limitations: only the unquantized paths (kv_cache_dtype "auto", no FP8 descales), no ALiBi, no
dropout; a call outside them raises NotImplementedError, which the value mode reports once and
answers with the stand-in. FA3's `k_new`/`v_new` (appending to the cache inside attention) and
`leftpad_k` are refused the same way.
"""

import math

# Forms the observable level does not compute (values.py's heavy products, by qualified name).
HEAVY = frozenset(("_vllm_fa2_C::varlen_fwd", "_vllm_fa3_C::fwd"))


def _rms(x, eps):
    import torch

    xf = x.float()
    return xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps)


def rms_norm(a, outs):
    x, weight = a["input"], a["weight"]
    y = _rms(x, a["epsilon"]).to(x.dtype)
    a["result"].copy_(y * weight if weight is not None else y)


def fused_add_rms_norm(a, outs):
    x, residual, weight = a["input"], a["residual"], a["weight"]
    residual.copy_(x.float() + residual.float())
    y = _rms(residual, a["epsilon"]).to(x.dtype)
    x.copy_(y * weight if weight is not None else y)


def silu_and_mul(a, outs):
    import torch.nn.functional as F

    x = a["input"]
    d = x.shape[-1] // 2
    a["result"].copy_(F.silu(x[..., :d]) * x[..., d:])


def rotary_embedding(a, outs):
    """Rotates the first rot_dim dimensions after rope_dim_offset of every head of query and key by
    the position's angle: NeoX style (halves) or GPT-J style (interleaved pairs)."""
    import torch

    cache, head_size = a["cos_sin_cache"], a["head_size"]
    offset, inverse = a.get("rope_dim_offset") or 0, bool(a.get("inverse"))
    positions = a["positions"].reshape(-1).long()
    rot = cache.shape[-1]
    cos, sin = cache[positions].float().chunk(2, dim=-1)  # [tokens, rot / 2] each
    if inverse:
        sin = -sin
    for t in (a["query"], a["key"]):
        if t is None:
            continue
        heads = t.view(positions.numel(), -1, head_size)
        part = heads[..., offset:offset + rot].float()
        c, s = cos[:, None, :], sin[:, None, :]
        if a["is_neox"]:
            x1, x2 = part[..., :rot // 2], part[..., rot // 2:]
            rotated = torch.cat((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1)
        else:
            x1, x2 = part[..., 0::2], part[..., 1::2]
            rotated = torch.stack((x1 * c - x2 * s, x2 * c + x1 * s), dim=-1).flatten(-2)
        heads[..., offset:offset + rot] = rotated.to(t.dtype)


def reshape_and_cache_flash(a, outs):
    """Writes each token's key and value into its slot (block * block_size + offset) of the paged
    caches [blocks, block_size, heads, head_size]; slots below 0 are padding."""
    if a["kv_cache_dtype"] != "auto":
        raise NotImplementedError("KV cache dtype %s" % a["kv_cache_dtype"])
    key, value, key_cache, value_cache = a["key"], a["value"], a["key_cache"], a["value_cache"]
    slots = a["slot_mapping"].long()[:key.shape[0]]
    keep = slots >= 0
    slots = slots[keep]
    block_size = key_cache.shape[1]
    blocks, offsets = slots // block_size, slots % block_size
    key_cache[blocks, offsets] = key[keep].to(key_cache.dtype)
    value_cache[blocks, offsets] = value[keep].to(value_cache.dtype)


def _attention(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, block_table, scale, causal, window_left,
               window_right, softcap, sinks, out, lse):
    """Variable-length attention as FlashAttention defines it: sequence b's queries are
    q[cu_seqlens_q[b]:cu_seqlens_q[b+1]]; its keys the first seqused_k[b] tokens of its pages
    (block_table[b]) or k[cu_seqlens_k[b]:cu_seqlens_k[b+1]]; the causal mask aligned to the bottom
    right; grouped-query heads; softcap; per-head sink logits in the softmax's denominator."""
    import torch

    cu_q = cu_seqlens_q.long().tolist()
    groups = q.shape[1] // k.shape[-2]
    for b in range(len(cu_q) - 1):
        q0, q1 = cu_q[b], cu_q[b + 1]
        nq = q1 - q0
        if nq <= 0:
            continue
        if seqused_k is not None:
            nk = int(seqused_k[b])
        else:
            nk = int(cu_seqlens_k[b + 1]) - int(cu_seqlens_k[b])
        if block_table is not None:
            pages = block_table[b, :math.ceil(nk / k.shape[1])].long()
            keys = k[pages].flatten(0, 1)[:nk]
            vals = v[pages].flatten(0, 1)[:nk]
        else:
            k0 = int(cu_seqlens_k[b])
            keys, vals = k[k0:k0 + nk], v[k0:k0 + nk]
        qf = q[q0:q1].float().transpose(0, 1)  # [heads, nq, d]
        kf = keys.float().transpose(0, 1).repeat_interleave(groups, dim=0)
        vf = vals.float().transpose(0, 1).repeat_interleave(groups, dim=0)
        scores = qf @ kf.transpose(1, 2) * scale
        if softcap:
            scores = softcap * torch.tanh(scores / softcap)
        i = torch.arange(nq)[:, None] + (nk - nq)  # the key index aligned with each query
        j = torch.arange(nk)[None, :]
        allowed = torch.ones(nq, nk, dtype=torch.bool)
        if causal:
            allowed &= j <= i
        if window_left >= 0:
            allowed &= j >= i - window_left
        if window_right >= 0:
            allowed &= j <= i + window_right
        scores = scores.masked_fill(~allowed, float("-inf"))
        if sinks is not None:
            sink = sinks.float()[:, None, None].expand(-1, nq, 1)
            total = torch.logsumexp(torch.cat((scores, sink), dim=-1), dim=-1)
        else:
            total = torch.logsumexp(scores, dim=-1)
        probs = torch.exp(scores - total[..., None]).nan_to_num(0.0)  # a row with no key attends to nothing
        out[q0:q1] = (probs @ vf).transpose(0, 1).to(out.dtype)
        if lse is not None and lse.dim() == 2 and lse.shape[0] == q.shape[1]:
            lse[:, q0:q1] = total.to(lse.dtype)


def _output(a, outs):
    out = a.get("out")
    return out if out is not None else outs[0]


def _lse(outs):
    return outs[1] if len(outs) > 1 and outs[1] is not None and outs[1].numel() else None


def _scale(a):
    return a["softmax_scale"] or a["q"].shape[-1] ** -0.5


def fa2_varlen_fwd(a, outs):
    if a.get("alibi_slopes") is not None or a.get("p_dropout"):
        raise NotImplementedError("FlashAttention 2 with ALiBi or dropout")
    if a.get("leftpad_k") is not None:
        raise NotImplementedError("FlashAttention 2 with leftpad_k")
    _attention(a["q"], a["k"], a["v"], a["cu_seqlens_q"], a["cu_seqlens_k"], a.get("seqused_k"), a.get("block_table"),
               _scale(a), a["is_causal"], a["window_size_left"], a["window_size_right"], a.get("softcap") or 0.0,
               None, _output(a, outs), _lse(outs))


def fa3_fwd(a, outs):
    for name in ("k_new", "v_new", "leftpad_k", "q_v", "seqused_q", "kv_batch_idx", "rotary_cos"):
        if a.get(name) is not None:
            raise NotImplementedError("FlashAttention 3 with %s" % name)
    if a["q"].element_size() == 1:
        raise NotImplementedError("FlashAttention 3 in FP8")
    _attention(a["q"], a["k"], a["v"], a["cu_seqlens_q"], a.get("cu_seqlens_k"), a.get("seqused_k"), a.get("page_table"),
               _scale(a), a["is_causal"], a["window_size_left"], a["window_size_right"], a.get("softcap") or 0.0,
               a.get("s_aux"), _output(a, outs), _lse(outs))


def fa3_scheduler_metadata(a, outs):
    """FA3's split-KV schedule: read by its kernel only, which the form above replaces; nothing to
    compute."""


FORMS = {
    "_C::rms_norm": rms_norm,
    "_C::fused_add_rms_norm": fused_add_rms_norm,
    "_C::silu_and_mul": silu_and_mul,
    "_C::rotary_embedding": rotary_embedding,
    "_C_cache_ops::reshape_and_cache_flash": reshape_and_cache_flash,
    "_vllm_fa2_C::varlen_fwd": fa2_varlen_fwd,
    "_vllm_fa3_C::fwd": fa3_fwd,
    "_vllm_fa3_C::get_scheduler_metadata": fa3_scheduler_metadata,
}
