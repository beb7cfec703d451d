"""Real PyTorch (the torch 2.15 wheel) with its own allocator on the simulated GPU.

Each test runs one scenario of torch_scenarios.py in a fresh process through
`phasealloc-run --sim-gpu=SIZE --native`, so the launcher, the stand-ins and the wheel are the
ones a user runs. The scenarios compare PyTorch's books with the simulator's."""

import os

import torch_harness

SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_scenarios.py")
GIB = 1 << 30
MIB = 1 << 20


def test_devices_properties_and_copies():
    r = torch_harness.run(SCENARIOS, "devices", sim_gpu="40GiB",
                        env={"SIMCUDA_GPU": "quiet:1,count:2,name:NVIDIA A100-SXM4-40GB,cc:8.0,sms:108"})
    assert r["available"] is True
    assert r["count"] == 2
    assert r["names"] == ["NVIDIA A100-SXM4-40GB"] * 2
    assert r["total_memory"] == [40 * GIB] * 2
    assert r["capability"] == [[8, 0], [8, 0]]
    assert r["sms"] == [108, 108]
    assert r["mem_get_info_total"] == 40 * GIB
    assert r["copies"] and all(r["copies"].values()), r["copies"]
    assert r["allocated_after"] == 0
    assert r["unemulated"] == 0


def test_allocator_books_match_the_simulator_through_random_ops_on_two_streams():
    r = torch_harness.run(SCENARIOS, "books", env={"SIMCUDA_GPU": "quiet:1,events:deferred:16"})
    assert r["ops"] >= 1000
    assert r["problems"] == []
    assert r["segments_allocated"] > 10
    assert r["peak_reserved"] == r["peak_mapped"]
    assert r["reserved_after_empty_cache"] == 0 and r["mapped_after_empty_cache"] == 0
    assert r["unemulated"] == 0


def test_interval_peaks_of_the_mapped_bytes():
    r = torch_harness.run(SCENARIOS, "interval_peaks")
    # Each interval's peak is its own; the run's peak is the largest of them, untouched by taking.
    assert r["first"] == 200 * MIB, r
    assert r["second"] == 0, r  # nothing mapped in between: the interval starts at the bytes mapped then
    assert r["mapped_kept"] == 2 * MIB and r["third"] == 2 * MIB + 30 * MIB, r  # a small segment kept, 30 MiB on top
    assert r["peak"] == 200 * MIB and r["mapped_end"] == 2 * MIB, r


def test_expandable_segments_map_pages_and_empty_cache_returns_them():
    r = torch_harness.run(SCENARIOS, "expandable", env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    assert r["intact"] is True
    assert r["cudaMalloc_calls"] == 0, "expandable segments map with cuMem*, not cudaMalloc"
    assert r["vmm_maps"] > 0 and r["vmm_unmaps"] > 0
    assert r["reserved_live"] == r["mapped_live"] > 700 * (1 << 20)
    assert r["reserved_cached"] == r["reserved_live"]
    assert r["reserved_after_empty_cache"] == 0 and r["mapped_after_empty_cache"] == 0
    assert r["unemulated"] == 0


def test_out_of_memory_is_torch_out_of_memory_error_with_pytorchs_message():
    r = torch_harness.run(SCENARIOS, "oom", sim_gpu="2GiB")
    assert r["capacity"] == 2 * GIB
    assert r["is_oom_error"], r["kind"]
    assert r["kind"] == "torch.OutOfMemoryError"
    assert "CUDA out of memory. Tried to allocate 1024.00 MiB" in r["message"]
    assert "GPU 0 has a total capacity of 2.00 GiB" in r["message"]
    assert r["simulator_ooms"] >= 1
    assert r["still_works"] is True


def test_out_of_memory_with_expandable_segments():
    r = torch_harness.run(SCENARIOS, "oom", sim_gpu="2GiB", env={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
    assert r["is_oom_error"], r["kind"]
    assert "CUDA out of memory" in r["message"]
    assert r["still_works"] is True


def test_gpt2_small_trains_a_step_and_generates_with_a_kv_cache():
    r = torch_harness.run(SCENARIOS, "gpt2")
    assert r["parameters"] == 124439808  # GPT-2 small (tied embeddings)
    assert r["logits_shape"] == [4, 128, 50257]
    assert r["grads"] == 148
    assert r["optimizer_states"] == 3 * 148  # step, exp_avg, exp_avg_sq
    assert r["generated_shape"] == [4, 32 + 16]
    assert r["kernel_launches"] > 1000 and r["library_calls"] > 50
    assert r["unemulated"] == 0
    # Memory is real: fp32 parameters and AdamW's two moments stay on the device; the gradients
    # went with zero_grad(set_to_none=True).
    assert 3 * 124439808 * 4 <= r["after_training_allocated"] < 4 * 124439808 * 4
    print("gpt2 small: %.1f s, peak RSS %.0f MiB, peak reserved %.0f MiB, %d launches" % (
        r["seconds"], r["max_rss_bytes"] / 2**20, r["peak_reserved"] / 2**20, r["kernel_launches"]))


def test_a_cuda_tensor_crosses_processes_through_ipc_handles():
    r = torch_harness.run(SCENARIOS, "ipc")
    assert r["device"] == "cuda:0"
    assert r["intact"] is True
    assert r["exit"] == 0


def test_llama_bf16_trains_with_pytorchs_own_attention_kernels():
    r = torch_harness.run(SCENARIOS, "llama_bf16")
    assert r["trained"] is True, r.get("error")
    assert r["unemulated"] == 0
    assert r["peak_allocated"] > 2 * 32000 * 512 * 2  # bf16 embeddings and head at least


def test_without_the_adaptations_cudnn_attention_fails_loudly():
    r = torch_harness.run(SCENARIOS, "llama_bf16", env={"PHASEALLOC_SIM_ADAPT": "0"})
    assert r["trained"] is False
    assert "CUDNN_STATUS_NOT_SUPPORTED" in r["error"]
    assert r["unemulated"] >= 1


def test_new_device_memory_is_zero_or_the_configured_fill_byte():
    assert torch_harness.run(SCENARIOS, "fresh_memory")["bytes"] == [0]
    assert torch_harness.run(SCENARIOS, "fresh_memory", env={"SIMCUDA_GPU": "quiet:1,fill:0x5a"})["bytes"] == [0x5A]


def test_cuda_graph_capture_records_a_copy_and_each_replay_performs_it():
    r = torch_harness.run(SCENARIOS, "cuda_graph")
    assert r["capturing_inside"] is True and r["capturing_outside"] is False
    assert r["unchanged_by_capture"] is True, "a captured copy must not run at capture"
    assert r["first_replay"] is True and r["second_replay"] is True
    assert r["allocated_with_graph"] >= 3 * 4096 * 4  # static_in, static_out, warm (+ the pool's scratch)
    assert r["sync_errors"] == ["CUDA error: operation failed due to a previous error during capture",
                                "CUDA error: operation not permitted when stream is capturing"], r["sync_errors"]
    assert r["works_after"] is True
    assert r["unemulated"] == 0
