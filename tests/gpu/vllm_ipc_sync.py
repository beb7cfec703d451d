"""CUDA IPC weight sync, the verl/OpenRLHF pattern: a trainer process exports its weights to a vLLM
engine in another process, which opens the handles and loads them. The child of test_vllm_ipc.py
(the vLLM venv's interpreter; tests/harness on PYTHONPATH):

    phasealloc-run --sim-gpu=4GiB [--native] -- python tests/gpu/vllm_ipc_sync.py ipc_weight_sync

The trainer (this process) spawns the engine with torch.multiprocessing (it inherits the launcher's
environment: under phasealloc both processes swap the allocator). The trainer loads the random
Llama of vllm_rollout.py, overwrites every parameter with new values, exports each with PyTorch's
`reduce_tensor` (cudaIpcGetMemHandle; under phasealloc the bridge first moves the storage to
PyTorch's allocator) and sends the handles; the engine loads them through vLLM 0.33's own IPC
weight-transfer backend (`weight_transfer_config` backend "ipc", driven with `collective_rpc`:
init_weight_transfer_engine, start_weight_update, update_weights, finish_weight_update), which
rebuilds each tensor with `rebuild_cuda_tensor` (cudaIpcOpenMemHandle) and calls the model's
load_weights. The engine then reads its own parameters back to the host (copies are real on the
simulator) for the trainer to compare bit for bit, and generates again.

The engine's greedy tokens before and after the update are held to the CPU's greedy choices
(vllm_rollout.greedy_deficits: Hugging Face's Llama in fp32 with the checkpoint's and with the new
weights, computed here, in the trainer): on the
simulator at values:exact every kernel of vLLM's step is computed (tools/simcuda's vllm_forms.py and
triton_values.py), so the tokens after the update follow the weights that came over IPC.
"""

import os
import sys
import tempfile

from torch_harness import child_main
from vllm_rollout import cpu_model, greedy_deficits, greedy_reference, make_model

MAX_TOKENS = 6
PROMPT = [1, 5, 6, 7, 9]


def new_weights(model):
    """New values for every parameter (name -> CPU tensor), none equal to the checkpoint's: another
    random model of the same shape (norm weights about 1, the rest about N(0, 0.05)), whose greedy
    tokens differ from the checkpoint's."""
    import torch

    g = torch.Generator().manual_seed(1)

    def value(name, p):
        noise = torch.randn(p.shape, generator=g)
        return (1.0 + 0.1 * noise if name.endswith("norm.weight") else 0.05 * noise).to(p.dtype)

    return {name: value(name, p) for name, p in model.named_parameters()}


def engine_main(model_dir, inbox, outbox):
    """The rollout engine's process: generate, take the trainer's weights over IPC, generate again."""
    import torch
    from vllm import LLM, SamplingParams
    from vllm.config import WeightTransferConfig
    from vllm.inputs import TokensPrompt

    llm = LLM(model=model_dir, skip_tokenizer_init=True, enforce_eager=True, dtype="bfloat16",
              gpu_memory_utilization=0.3, max_model_len=128, max_num_seqs=4, attention_backend="FLASH_ATTN",
              weight_transfer_config=WeightTransferConfig(backend="ipc"))
    params = SamplingParams(max_tokens=MAX_TOKENS, temperature=0.0, ignore_eos=True, detokenize=False)

    def generate():
        out = llm.generate([TokensPrompt(prompt_token_ids=PROMPT)], params, use_tqdm=False)
        return list(out[0].outputs[0].token_ids)

    outbox.put({"tokens_before": generate(), "allocator": torch.cuda.get_allocator_backend()})
    update = inbox.get()
    llm.collective_rpc("init_weight_transfer_engine", args=({"packed": False},))
    llm.collective_rpc("start_weight_update")
    llm.collective_rpc("update_weights", args=(update,))
    llm.collective_rpc("finish_weight_update")
    weights = llm.apply_model(lambda model: {n: p.detach().cpu() for n, p in model.named_parameters()})[0]
    outbox.put({"weights": weights, "tokens_after": generate()})
    inbox.get()  # the trainer has read the report: its exported tensors may go


def receive(outbox, engine, timeout_s=600):
    """The engine's next report; an engine process that ended without one is an error at once
    (not after the timeout)."""
    import queue
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return outbox.get(timeout=2)
        except queue.Empty:
            if not engine.is_alive():
                try:  # a report written just before the engine ended is still in the pipe
                    return outbox.get(timeout=1)
                except queue.Empty:
                    raise RuntimeError("the engine process ended (exit status %s) before it reported" %
                                       engine.exitcode) from None
            if time.monotonic() > deadline:
                raise


def vllm_layout(trainer):
    """The trainer's parameters (name -> CPU tensor) in vLLM's layout: q, k, v stacked into
    qkv_proj, gate and up into gate_up_proj."""
    import torch

    out = {}
    for name, value in trainer.items():
        if ".q_proj." in name:
            k, v = trainer[name.replace(".q_proj.", ".k_proj.")], trainer[name.replace(".q_proj.", ".v_proj.")]
            out[name.replace(".q_proj.", ".qkv_proj.")] = torch.cat([value, k, v])
        elif ".gate_proj." in name:
            up = trainer[name.replace(".gate_proj.", ".up_proj.")]
            out[name.replace(".gate_proj.", ".gate_up_proj.")] = torch.cat([value, up])
        elif not any(part in name for part in (".k_proj.", ".v_proj.", ".up_proj.")):
            out[name] = value
    return out


def scenario_ipc_weight_sync():
    import torch
    import torch.multiprocessing as mp
    from torch.multiprocessing.reductions import reduce_tensor
    from transformers import AutoModelForCausalLM

    phasealloc = sys.modules.get("phasealloc")
    with tempfile.TemporaryDirectory(prefix="vllm-ipc-") as out:
        model_dir = os.path.join(out, "model")
        make_model(model_dir)
        ctx = mp.get_context("spawn")
        inbox, outbox = ctx.Queue(), ctx.Queue()
        engine = ctx.Process(target=engine_main, args=(model_dir, inbox, outbox))
        engine.start()
        started = receive(outbox, engine)

        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).cuda()
        new = new_weights(model)
        with torch.no_grad():
            for name, p in model.named_parameters():
                p.copy_(new[name].to("cuda"))
        uuid = str(torch.cuda.get_device_properties(0).uuid)
        names, dtypes, shapes, handles = [], [], [], []
        for name, p in model.named_parameters():
            _, args = reduce_tensor(p.detach())
            names.append(name)
            dtypes.append(str(p.dtype).removeprefix("torch."))
            shapes.append(list(p.shape))
            handles.append({uuid: args})
        inbox.put({"names": names, "dtype_names": dtypes, "shapes": shapes, "ipc_handles": handles})
        report = receive(outbox, engine)
        inbox.put("done")
        engine.join(timeout=120)

        trainer = vllm_layout({n: p.detach().cpu() for n, p in model.named_parameters()})
        references, deficits = {}, {}
        for when, weights in (("before", None), ("after", new)):
            reference = cpu_model(model_dir, weights)
            references[when] = greedy_reference(reference, PROMPT, MAX_TOKENS)
            deficits[when] = greedy_deficits(reference, PROMPT, report["tokens_after"] if weights else
                                             started["tokens_before"])
        engine_weights = report["weights"]
        bits = lambda t: t.contiguous().view(torch.int16) if t.dtype == torch.bfloat16 else t  # noqa: E731
        differ = sorted(n for n in trainer
                        if n not in engine_weights or not torch.equal(bits(trainer[n]), bits(engine_weights[n])))
        original = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16)
        checkpoint = vllm_layout({n: p.detach() for n, p in original.named_parameters()})
        unchanged = sorted(n for n in checkpoint if torch.equal(bits(checkpoint[n]), bits(engine_weights[n])))
    return {
        "trainer_allocator": torch.cuda.get_allocator_backend(),
        "phasealloc_enabled": bool(phasealloc is not None and phasealloc.is_enabled()),
        "engine_allocator": started["allocator"],
        "engine_exit": engine.exitcode,
        "parameters": len(trainer),
        "engine_parameters": sorted(engine_weights),
        "differ": differ,
        "unchanged": unchanged,
        "tokens_before": started["tokens_before"],
        "tokens_after": report["tokens_after"],
        "reference_tokens": references,
        "deficits": deficits,
        "max_tokens": MAX_TOKENS,
    }


if __name__ == "__main__":
    child_main(globals())
