"""Scenarios of test_values.py: each runs in a fresh process on the simulated GPU at the value level
the test sets (SIMCUDA_GPU=values:LEVEL) and returns what the test compares with the same work done
on the CPU."""

import torch_harness
from tiny_rlhf import common_args, prompts, reward_length, tiny_llama_and_tokenizer, trained


def scenario_data_dependent_sizes():
    import torch

    torch.manual_seed(0)
    host = torch.randn(257, 33)
    x = host.cuda()
    before = torch.cuda.memory_allocated()
    idx = (x > 0.7).nonzero()
    nonzero_bytes = torch.cuda.memory_allocated() - before
    out = {
        "nonzero": [list(idx.shape), bool(torch.equal(idx.cpu(), (host > 0.7).nonzero()))],
        "nonzero_bytes": nonzero_bytes,
        "nonzero_cpu_bytes": (host > 0.7).nonzero().numel() * 8,
        "masked_select": [list(x.masked_select(x < -1.2).shape), list(host.masked_select(host < -1.2).shape)],
        "bool_index": bool(torch.equal(x[x[:, 0] > 0].cpu(), host[host[:, 0] > 0])),
        "unique": [torch.tensor([5, 3, 5, 1, 3], device="cuda").unique().tolist()],
        "unique_counts": [t.tolist() for t in torch.tensor([2, 2, 7, 2], device="cuda").unique(return_counts=True)],
        "where_one_arg": bool(torch.equal(torch.where(x > 1.5)[1].cpu(), torch.where(host > 1.5)[1])),
        "item": [float((x * 2).sum().item()), float((host * 2).sum().item())],
        "equal": [bool(torch.equal(x, x.clone())), bool(torch.equal(x, x + 1))],
    }
    out["strided_to_host"] = bool(torch.equal(x[:, 3:9].t().cpu(), host[:, 3:9].t()))
    y = x.clone()
    y[y > 0] = 0.0  # index_put_ with a boolean mask
    out["index_put_mask"] = bool(torch.equal(y.cpu(), host.masked_fill(host > 0, 0.0)))
    # Backwards that count a mask inside their CUDA form: boolean indexing's (index_put with boolean
    # indices) and masked_scatter's (masked_scatter_backward: a masked_select of the gradient).
    grads = {}
    for device in ("cuda", "cpu"):
        a = host.to(device).requires_grad_()
        source = torch.arange(257 * 33, dtype=torch.float32, device=device).view(257, 33).requires_grad_()
        mask = host.to(device) > 0.3
        ((a[mask] * 3).sum() + (a.masked_scatter(mask, source) * a.detach()).sum()).backward()
        grads[device] = (a.grad.cpu(), source.grad.cpu())
    out["mask_backwards"] = all(torch.equal(g, c) for g, c in zip(grads["cuda"], grads["cpu"]))
    return out


def scenario_training_step_matches_the_cpu():
    import torch

    def run(device):
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.LayerNorm(32),
                                    torch.nn.Linear(32, 4)).to(device)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-2, foreach=True)
        torch.manual_seed(2)
        data = torch.randn(8, 16).to(device)
        target = torch.randint(0, 4, (8,)).to(device)
        losses = []
        for _ in range(3):
            loss = torch.nn.functional.cross_entropy(model(data), target)
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(float(loss.item()))
        return losses, [p.detach().cpu() for p in model.parameters()]

    gpu_losses, gpu_params = run("cuda")
    cpu_losses, cpu_params = run("cpu")
    return {"gpu_losses": gpu_losses, "cpu_losses": cpu_losses,
            "params_close": all(torch.allclose(a, b, rtol=1e-4, atol=1e-5) for a, b in zip(gpu_params, cpu_params))}


def scenario_stand_in_rule():
    """What the observable level leaves out, and what no level can compute: the stand-in."""
    import torch

    torch.manual_seed(4)
    a, b = torch.randn(8, 16), torch.randn(16, 4)
    bias = torch.arange(4.0)
    lib = torch.library.Library("simcuda_test", "DEF")
    lib.define("double_it(Tensor x) -> Tensor")
    lib.impl("double_it", lambda x: x * 2, "CUDA")  # a CUDA kernel in Python: its operations are computed
    x = torch.ones(5, device="cuda")
    # _fused_dropout has a compiled CUDA kernel only: the CPU cannot compute it.
    custom = [torch.ops.aten._fused_dropout(x, 0.5)[0].cpu().tolist() for _ in range(2)]
    python_kernel = torch.ops.simcuda_test.double_it(x).cpu().tolist()
    ac, bc = a.cuda(), b.cuda()
    return {
        "mm": (ac @ bc).cpu().tolist(),
        "mm_cpu": (a @ b).tolist(),
        "addmm": torch.addmm(bias.cuda(), ac, bc).cpu().tolist(),
        "addmm_cpu": torch.addmm(bias, a, b).tolist(),
        "relu_of_mm": torch.relu(ac @ bc + 1).cpu().tolist(),  # what follows a product is computed
        "custom": custom,
        "python_kernel": python_kernel,
        "x_kept": x.cpu().tolist(),
    }


def scenario_sampling_is_valid_and_seeded():
    import torch

    def draws():
        torch.manual_seed(11)
        probs = torch.softmax(torch.randn(64, 1000, device="cuda"), dim=-1)
        return torch.multinomial(probs, 4).cpu(), torch.randint(0, 1000, (256,), device="cuda").cpu()

    (m1, r1), (m2, r2) = draws(), draws()
    # An explicit CUDA generator (vLLM's sampler: probs / Exponential draws, then argmax).
    g = torch.Generator(device="cuda").manual_seed(5)
    e1, e2 = (torch.empty(512, device="cuda").exponential_(generator=g).cpu() for _ in range(2))
    g.manual_seed(5)
    e3 = torch.empty(512, device="cuda").exponential_(generator=g).cpu()
    return {"in_range": bool(((m1 >= 0) & (m1 < 1000)).all() and ((r1 >= 0) & (r1 < 1000)).all()),
            "reproducible": bool(torch.equal(m1, m2) and torch.equal(r1, r2)),
            "distinct_values": int(r1.unique().numel()),
            "generator_draws_positive": bool((e1 > 0).all()), "generator_draws_differ": not torch.equal(e1, e2),
            "generator_reseed_repeats": bool(torch.equal(e1, e3))}


def scenario_maybe_aliasing_ops_that_copy_are_computed():
    """`to`, `reshape` and `contiguous` may return their input; when they make a new tensor its values
    are computed. Under inference mode PyTorch dispatches `aten.to.dtype` itself (vLLM's sampler casts
    its token ids to int32 so)."""
    import torch

    def casts():
        ids = torch.zeros(2, 64, device="cuda")
        ids[0, 4] = 1
        ids = ids.argmax(dim=-1)
        t = torch.arange(6, device="cuda").view(2, 3).t()
        return {"to_int32": ids.to(torch.int32).tolist(), "to_float": ids.to(torch.float32).tolist(),
                "reshape": t.reshape(-1).tolist(), "contiguous": t.contiguous().tolist(),
                "same_dtype_is_input": ids.to(torch.int64) is ids}

    with torch.inference_mode():
        inference = casts()
    return {"inference": inference, "grad": casts()}


def scenario_subclass_operations_are_computed():
    """Tensor subclasses with a dispatch of their own (nested jagged tensors, DTensor) run it with the
    value mode still on, so the plain-tensor operations they make are computed: verl pads its
    jagged micro-batches with `to_padded_tensor`, FSDP2 steps DTensor parameters. A subclass
    without one (vLLM's parameter classes) is computed as a plain tensor."""
    import os
    import tempfile

    import torch
    import torch.distributed as dist
    from torch.distributed.tensor import DeviceMesh, Shard, distribute_tensor

    out = {}
    jagged = torch.nested.nested_tensor([torch.arange(1, 4), torch.arange(1, 6)], layout=torch.jagged).to("cuda")
    out["max_length"] = int(jagged.offsets().diff().max().item())
    out["padded"] = torch.nested.to_padded_tensor(jagged, padding=0, output_size=(2, 5)).tolist()
    out["jagged_sum"] = (jagged * 2).values().sum().item()

    class plain_parameter(torch.nn.Parameter):  # no __torch_dispatch__ of its own
        pass

    weight = plain_parameter(torch.zeros(3, device="cuda"))
    with torch.no_grad():
        weight.copy_(torch.tensor([1.0, 2.0, 3.0], device="cuda"))
    out["parameter"] = (weight * 2).tolist()

    with tempfile.TemporaryDirectory() as folder:
        dist.init_process_group("nccl", init_method="file://" + os.path.join(folder, "store"), rank=0, world_size=1)
        try:
            mesh = DeviceMesh("cuda", [0])
            sharded = distribute_tensor(torch.arange(4.0, device="cuda"), mesh, [Shard(0)])
            out["dtensor"] = (sharded * 3 + 1).to_local().tolist()
        finally:
            dist.destroy_process_group()
    return out


def scenario_threads_compute_values():
    """Operations in threads started after `import torch` (a thread, a thread pool's workers: Ray runs an
    async actor's methods in one) give real values too."""
    import concurrent.futures
    import threading

    import torch

    def work():
        t = torch.arange(6, device="cuda")
        return [int(t.sum().item()), t.nonzero().numel()]

    got = {}
    thread = threading.Thread(target=lambda: got.setdefault("thread", work()))
    thread.start()
    thread.join()
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        got["pool"] = pool.submit(work).result()
    got["main"] = work()
    return got


def tiny_gpt2(eos_bias=None, token_bias=None, n_layer=2):
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(n_layer=n_layer, n_embd=64, n_head=4, vocab_size=97, n_positions=64, eos_token_id=7,
                        bos_token_id=7, pad_token_id=7, tie_word_embeddings=False)
    torch.manual_seed(3)
    model = GPT2LMHeadModel(config)
    if eos_bias is not None or token_bias is not None:
        head = torch.nn.Linear(64, 97, bias=True)
        with torch.no_grad():
            head.weight.zero_()
            head.bias.zero_()
            head.bias[7 if eos_bias is not None else token_bias] = 10.0
        model.lm_head = head
    return model.eval()


def scenario_generate_stops_on_eos_by_value():
    import torch

    prompt = torch.tensor([[1, 2, 3, 4]], device="cuda")
    stops = tiny_gpt2(eos_bias=True).cuda().generate(prompt, max_new_tokens=12, do_sample=False)
    runs = tiny_gpt2(token_bias=5).cuda().generate(prompt, max_new_tokens=12, do_sample=False)
    sampled = tiny_gpt2().cuda().generate(prompt, max_new_tokens=12, do_sample=True, top_k=0)
    return {"stops": stops.cpu().tolist(), "runs": runs.cpu().tolist(), "sampled": sampled.cpu().tolist()}


def scenario_gpt2_forward_matches_the_cpu():
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config()  # GPT-2 small: 12 layers, 768 wide
    torch.manual_seed(4)
    model = GPT2LMHeadModel(config).eval()
    ids = torch.randint(0, config.vocab_size, (2, 24))
    with torch.no_grad():
        cpu = model(ids).logits
        gpu = model.cuda()(ids.cuda()).logits.cpu()
    return {"max_abs_diff": float((gpu - cpu).abs().max()), "scale": float(cpu.abs().max()),
            "argmax_equal": bool(torch.equal(gpu.argmax(-1), cpu.argmax(-1)))}


def scenario_attention_gradients_match_the_cpu():
    import torch
    import torch.nn.functional as F

    torch.manual_seed(6)
    worst = {}
    for causal in (False, True):
        for kv_heads in (4, 2):  # 2: grouped-query attention
            q, k, v = torch.randn(2, 4, 6, 8), torch.randn(2, kv_heads, 6, 8), torch.randn(2, kv_heads, 6, 8)
            grad_out = torch.randn(2, 4, 6, 8)

            def run(device):
                leaves = [t.to(device).requires_grad_() for t in (q, k, v)]
                out = F.scaled_dot_product_attention(*leaves, is_causal=causal, enable_gqa=kv_heads != 4)
                out.backward(grad_out.to(device))
                return [t.grad.cpu() for t in leaves] + [out.detach().cpu()]

            worst["causal=%s kv_heads=%d" % (causal, kv_heads)] = max(
                float((a - b).abs().max()) for a, b in zip(run("cuda"), run("cpu")))
    return worst


def scenario_moe_routes_by_value():
    """A tiny Mixtral-shaped MoE: tokens go to experts by the router's values, so the per-expert
    token counts (and the sizes allocated for each expert's batch) are the CPU run's."""
    import torch
    from transformers import MixtralConfig, MixtralForCausalLM

    config = MixtralConfig(vocab_size=101, hidden_size=64, intermediate_size=96, num_hidden_layers=2,
                           num_attention_heads=4, num_key_value_heads=2, num_local_experts=4,
                           num_experts_per_tok=2, max_position_embeddings=64)
    torch.manual_seed(7)
    model = MixtralForCausalLM(config).eval()
    ids = torch.randint(0, 101, (2, 12))
    with torch.no_grad():
        cpu = model(ids, output_router_logits=True)
        gpu = model.cuda()(ids.cuda(), output_router_logits=True)

    def counts(router_logits):
        chosen = router_logits[0].topk(2, dim=-1).indices.cpu()
        return torch.bincount(chosen.flatten(), minlength=4).tolist()

    return {"logits_diff": float((gpu.logits.cpu() - cpu.logits).abs().max()),
            "counts_gpu": counts(gpu.router_logits), "counts_cpu": counts(cpu.router_logits)}


# TRL's trainers, unmodified, on the tiny Llama: each builder takes the saved model and tokenizer and
# returns make(use_cpu), which builds the trainer on the CPU or on the device from the same model
# and seed. scenario_trl_NAME_three_steps trains on the device (the dry-run tests run it as a job);
# scenario_trl_NAME_against_the_cpu trains on the CPU first (the reference: PyTorch's CPU kernels, no
# simulator involved), then on the device, in this process.


def grpo_builder(**config):
    """GRPOTrainer with a Python reward function; `config` adds GRPOConfig keys."""
    def build(model_dir, tokenizer):
        from datasets import Dataset
        from trl import GRPOConfig, GRPOTrainer

        def make(use_cpu):
            args = GRPOConfig(num_generations=4, max_completion_length=16, use_cpu=use_cpu, **config,
                              **common_args(model_dir))
            return GRPOTrainer(model=model_dir, reward_funcs=reward_length, args=args,
                               train_dataset=Dataset.from_dict({"prompt": prompts()}), processing_class=tokenizer)
        return make
    return build


def rloo_builder(model_dir, tokenizer):
    from datasets import Dataset
    from trl import RLOOConfig, RLOOTrainer

    def make(use_cpu):
        args = RLOOConfig(num_generations=4, max_completion_length=16, use_cpu=use_cpu, **common_args(model_dir))
        return RLOOTrainer(model=model_dir, reward_funcs=reward_length, args=args,
                           train_dataset=Dataset.from_dict({"prompt": prompts()}), processing_class=tokenizer)
    return make


def sft_builder(model_dir, tokenizer):
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    texts = [p + " w1 w2 w3 <eos>" for p in prompts()]

    def make(use_cpu):
        args = SFTConfig(max_length=32, use_cpu=use_cpu, **common_args(model_dir))
        return SFTTrainer(model=model_dir, args=args, train_dataset=Dataset.from_dict({"text": texts}),
                          processing_class=tokenizer)
    return make


def dpo_builder(model_dir, tokenizer):
    from datasets import Dataset
    from trl import DPOConfig, DPOTrainer

    data = {"prompt": prompts(), "chosen": [" w5 w6" for _ in range(32)], "rejected": [" w9" for _ in range(32)]}

    def make(use_cpu):
        args = DPOConfig(max_length=32, use_cpu=use_cpu, **common_args(model_dir))
        return DPOTrainer(model=model_dir, args=args, train_dataset=Dataset.from_dict(data), processing_class=tokenizer)
    return make


TRAINERS = {
    "grpo": grpo_builder(),
    "grpo_with_reference": grpo_builder(beta=0.04),  # a KL term: a reference model scores each batch
    "rloo": rloo_builder,
    "sft": sft_builder,
    "dpo": dpo_builder,
}


def _model():
    """The tiny Llama, with the LlamaConfig fields of TRL_TINY_LLAMA (JSON) when set: a larger one
    for the offload tests, whose state must fill pages of its own to leave the GPU."""
    import json
    import os

    return tiny_llama_and_tokenizer(**json.loads(os.environ.get("TRL_TINY_LLAMA", "{}")))


def on_the_device(build):
    return trained(build(*_model())(False))


def on_the_cpu_and_the_device(build):
    """The device run's steps, losses, grad norms and allocator, and the CPU reference's beside them."""
    make = build(*_model())
    reference = trained(make(True))
    device = trained(make(False))
    return {**device, "cpu_steps": reference["steps"], "cpu_losses": reference["losses"],
            "cpu_grad_norms": reference["grad_norms"]}


for _name, _build in TRAINERS.items():
    globals()["scenario_trl_%s_three_steps" % _name] = lambda build=_build: on_the_device(build)
    globals()["scenario_trl_%s_against_the_cpu" % _name] = lambda build=_build: on_the_cpu_and_the_device(build)


if __name__ == "__main__":
    torch_harness.child_main(globals())
