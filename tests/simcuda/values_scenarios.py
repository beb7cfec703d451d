"""Scenarios of test_values.py: each runs in a fresh process on the simulated GPU with
SIMCUDA_GPU=values:exact (real values, interpose/python/phasealloc/_sim_values.py) and returns
what the test compares with the same work done on the CPU."""

import sim_harness


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
    y = x.clone()
    y[y > 0] = 0.0  # index_put_ with a boolean mask
    out["index_put_mask"] = bool(torch.equal(y.cpu(), host.masked_fill(host > 0, 0.0)))
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


if __name__ == "__main__":
    sim_harness.child_main(globals())
