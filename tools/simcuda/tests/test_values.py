"""simcuda's value levels (SIMCUDA_GPU=values:LEVEL): PyTorch operations on the simulated GPU give
the values the same operations give on the CPU, data-dependent sizes included, so host code that
reads device values (generate() stopping on EOS, .item(), boolean masks) takes the real path. At
`exact` every output is real; at `observable` (the default) the heavy products are a stand-in;
`off` skips kernels. Each test runs one scenario of values_scenarios.py in a fresh process, under
PyTorch's allocator unless it says otherwise. TRL's trainers here are all of TRL 1.16's RL and
preference trainers but its experimental ones: it ships no PPO trainer (neither `trl` nor
`trl.experimental` has one)."""

import os

import pytest

import torch_harness

SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "values_scenarios.py")
EXACT = {"SIMCUDA_GPU": "quiet:1,values:exact"}
OBSERVABLE = {"SIMCUDA_GPU": "quiet:1,values:observable"}
DEFAULT = {"SIMCUDA_GPU": "quiet:1"}  # no values key: simcuda's default level
REAL_LEVELS = pytest.mark.parametrize("level", [EXACT, OBSERVABLE], ids=["exact", "observable"])


@REAL_LEVELS
def test_data_dependent_sizes_and_python_answers_are_the_cpus(level):
    r = torch_harness.run(SCENARIOS, "data_dependent_sizes", env=level)
    assert r["nonzero"][1] is True, r["nonzero"]
    assert r["nonzero_bytes"] >= r["nonzero_cpu_bytes"] > 0, r  # the CUDA output holds what the CPU found
    assert r["masked_select"][0] == r["masked_select"][1], r["masked_select"]
    assert r["bool_index"] is True
    assert r["unique"] == [[1, 3, 5]]
    assert r["unique_counts"] == [[2, 7], [3, 1]]
    assert r["where_one_arg"] is True
    assert abs(r["item"][0] - r["item"][1]) < 1e-3, r["item"]
    assert r["equal"] == [True, False]
    assert r["index_put_mask"] is True
    assert r["mask_backwards"] is True
    assert r["strided_to_host"] is True


def test_a_training_step_gives_the_cpus_losses_and_parameters():
    r = torch_harness.run(SCENARIOS, "training_step_matches_the_cpu", env=EXACT)
    assert all(abs(a - b) < 1e-5 for a, b in zip(r["gpu_losses"], r["cpu_losses"])), r
    assert r["gpu_losses"][2] < r["gpu_losses"][0], r  # it learns
    assert r["params_close"] is True


@REAL_LEVELS
def test_generate_stops_on_eos_by_value_and_runs_to_the_limit_without_it(level):
    """No generate() patch at either level: the EOS comes from the head's bias, which the observable
    level's stand-in for a product with an additive term keeps."""
    r = torch_harness.run(SCENARIOS, "generate_stops_on_eos_by_value", env=level)
    assert r["stops"] == [[1, 2, 3, 4, 7]], r["stops"]  # EOS forced by the head's bias: one token
    assert r["runs"] == [[1, 2, 3, 4] + [5] * 12], r["runs"]  # never EOS: max_new_tokens
    assert all(0 <= t < 97 for t in r["sampled"][0]), r["sampled"]  # sampling: valid token ids


def test_gpt2_small_forward_equals_the_cpu_forward():
    r = torch_harness.run(SCENARIOS, "gpt2_forward_matches_the_cpu", env=EXACT)
    assert r["max_abs_diff"] <= 1e-4 * max(1.0, r["scale"]), r
    assert r["argmax_equal"] is True


def test_a_tiny_moe_routes_tokens_by_value_as_on_the_cpu():
    r = torch_harness.run(SCENARIOS, "moe_routes_by_value", env=EXACT)
    assert r["counts_gpu"] == r["counts_cpu"] and sum(r["counts_cpu"]) == 2 * 24, r
    assert r["logits_diff"] < 1e-4, r


def test_attention_forward_and_gradients_equal_the_cpus_grouped_and_causal_too():
    r = torch_harness.run(SCENARIOS, "attention_gradients_match_the_cpu", env=EXACT)
    assert all(diff < 1e-5 for diff in r.values()), r


def test_the_observable_level_puts_the_stand_in_in_place_of_products_and_computes_the_rest():
    r = torch_harness.run(SCENARIOS, "stand_in_rule", env=OBSERVABLE)
    assert r["mm"] == [[0.0] * 4] * 8, r["mm"]  # the product: zeros
    assert r["addmm"] == [[0.0, 1.0, 2.0, 3.0]] * 8, r["addmm"]  # beta * input kept
    assert r["relu_of_mm"] == [[1.0] * 4] * 8  # computed from the stand-in
    exact = torch_harness.run(SCENARIOS, "stand_in_rule", env=EXACT)
    close = lambda x, y: all(abs(a - b) < 1e-4 for ra, rb in zip(x, y) for a, b in zip(ra, rb))
    assert close(exact["mm"], exact["mm_cpu"]) and close(exact["addmm"], exact["addmm_cpu"]), exact


@REAL_LEVELS
def test_an_operation_with_no_cpu_kernel_is_named_once_and_gets_zeros(level):
    out = torch_harness.run(SCENARIOS, "stand_in_rule", env=level, expect_ok=False)
    r = torch_harness.result(out, "stand_in_rule")
    assert r["custom"] == [[0.0] * 5] * 2, r["custom"]
    assert r["x_kept"] == [1.0] * 5  # its input is left as it was
    named = [line for line in out.stderr.splitlines() if "aten._fused_dropout" in line]
    assert len(named) == 1 and "no CPU kernel" in named[0] and "stand-in" in named[0], out.stderr[-2000:]
    # An extension's op whose CUDA kernel is Python code (vLLM's attention op) runs that code with the
    # value mode on: what it calls is computed, and nothing is named.
    assert r["python_kernel"] == [2.0] * 5, r["python_kernel"]
    assert "double_it" not in out.stderr, out.stderr[-2000:]


@REAL_LEVELS
def test_sampling_gives_valid_seeded_draws(level):
    r = torch_harness.run(SCENARIOS, "sampling_is_valid_and_seeded", env=level)
    assert r["in_range"] is True and r["reproducible"] is True, r
    assert r["distinct_values"] > 150, r  # 256 draws from 1000: real draws, not a constant
    # Draws from an explicit CUDA generator are real (the stand-in would be zeros), advance, and repeat
    # after the generator is re-seeded.
    assert r["generator_draws_positive"] and r["generator_draws_differ"] and r["generator_reseed_repeats"], r


@REAL_LEVELS
def test_ops_that_may_alias_but_copy_are_computed(level):
    r = torch_harness.run(SCENARIOS, "maybe_aliasing_ops_that_copy_are_computed", env=level)
    for mode in ("inference", "grad"):
        assert r[mode] == {"to_int32": [4, 0], "to_float": [4.0, 0.0], "reshape": [0, 3, 1, 4, 2, 5],
                           "contiguous": [[0, 3], [1, 4], [2, 5]], "same_dtype_is_input": True}, (mode, r)


@REAL_LEVELS
def test_operations_on_tensor_subclasses_are_computed(level):
    r = torch_harness.run(SCENARIOS, "subclass_operations_are_computed", env=level)
    assert r["max_length"] == 5, r
    assert r["padded"] == [[1, 2, 3, 0, 0], [1, 2, 3, 4, 5]], r
    assert r["jagged_sum"] == 42, r
    assert r["parameter"] == [2.0, 4.0, 6.0], r
    assert r["dtensor"] == [1.0, 4.0, 7.0, 10.0], r


@REAL_LEVELS
def test_threads_started_after_torch_compute_values(level):
    r = torch_harness.run(SCENARIOS, "threads_compute_values", env=level)
    assert r == {"thread": [15, 5], "pool": [15, 5], "main": [15, 5]}, r


# TRL's trainers at the exact level, each checked against the same training on the CPU in the same
# process (the trainer with use_cpu=True: PyTorch's CPU kernels, no simulator), under both
# allocators. A corrupted block, a wrong restore or an uncomputed operation changes the losses.
# Tolerance: relative 1e-5 (the device's values are computed with the CPU's kernels, so they agree
# to the last bit here; the margin is for summation order). The losses must change from step to step
# (a constant would compare equal whatever the memory held).
TRAINERS = ("grpo", "grpo_with_reference", "rloo", "sft", "dpo")
RELATIVE_TOLERANCE = 1e-5


def close(a, b):
    return a is not None and b is not None and abs(a - b) <= RELATIVE_TOLERANCE * max(1.0, abs(b))


# A trainer's CPU reference is the same computation whichever allocator the device run has: the
# first of its two tests trains on the CPU in its child, the second reuses those figures.
_CPU_REFERENCE = {}


# Every trainer under phasealloc; under PyTorch's allocator (the simulator's own check) GRPO each
# submission, the rest in the weekly tier (tests/harness/tiers.py).
TRAINER_RUNS = [pytest.param(trainer, native, id="%s-%s" % (trainer, "native" if native else "phasealloc"),
                             marks=[pytest.mark.weekly] if native and trainer != "grpo" else [])
                for trainer in TRAINERS for native in (True, False)]


@pytest.mark.parametrize("trainer,native", TRAINER_RUNS)
def test_trls_trainers_train_as_on_the_cpu(trainer, native):
    if trainer in _CPU_REFERENCE:
        r = torch_harness.run(SCENARIOS, "trl_%s_three_steps" % trainer, env=EXACT, native=native)
        r.update(_CPU_REFERENCE[trainer])
    else:
        r = torch_harness.run(SCENARIOS, "trl_%s_against_the_cpu" % trainer, env=EXACT, native=native)
        _CPU_REFERENCE[trainer] = {key: r[key] for key in ("cpu_steps", "cpu_losses", "cpu_grad_norms")}
    assert r["allocator"] == ("native" if native else "phasealloc"), r
    assert r["steps"] == r["cpu_steps"] == 3 and len(r["losses"]) == len(r["cpu_losses"]) == 3, r
    assert len(set(r["cpu_losses"])) == 3, r  # the reference itself moves
    assert all(close(a, b) for a, b in zip(r["losses"], r["cpu_losses"])), r
    assert all(close(a, b) for a, b in zip(r["grad_norms"], r["cpu_grad_norms"])), r


# offload:auto under the same trainers where it has idle state to move (AdamW's state outside its
# step, and GRPO's reference model outside its scoring forward), on a Llama large enough (hidden
# 256: about 4 MiB of fp32 weights) that its state fills pages of its own: the tiny one's shares its
# pages with blocks that stay, so nothing would leave. Each against its own CPU reference; the
# offloads must have happened (a policy that moved nothing would compare equal too).
LARGER_LLAMA = {"TRL_TINY_LLAMA": '{"hidden_size": 256, "intermediate_size": 512, "num_attention_heads": 4, '
                                  '"num_key_value_heads": 2}'}


@pytest.mark.parametrize("trainer", ("grpo_with_reference", "sft"))
def test_trls_trainers_train_as_on_the_cpu_with_offload_auto(trainer):
    r = torch_harness.run(SCENARIOS, "trl_%s_against_the_cpu" % trainer, env=dict(EXACT, **LARGER_LLAMA),
                          native=False, conf="device:cuda_vmm,offload:auto")
    assert r["allocator"] == "phasealloc", r
    assert r["offloads"] > 0 and r["restores"] > 0 and r["offloaded_peak"] > 0, r
    assert r["steps"] == r["cpu_steps"] == 3 and len(set(r["cpu_losses"])) == 3, r
    assert all(close(a, b) for a, b in zip(r["losses"], r["cpu_losses"])), r
    assert all(close(a, b) for a, b in zip(r["grad_norms"], r["cpu_grad_norms"])), r


def test_trls_grpo_trainer_needs_the_values():
    """With kernels skipped (values:off) it dies in its first step (completions cut at an EOS no
    comparison computed): what the value levels are for."""
    out = torch_harness.run(SCENARIOS, "trl_grpo_three_steps", env={"SIMCUDA_GPU": "quiet:1,values:off"},
                          expect_ok=False)
    assert out.returncode != 0 and "Error" in out.stderr, out.stderr[-2000:]


def test_without_values_kernels_leave_memory_as_it_was():
    r = torch_harness.run(SCENARIOS, "generate_stops_on_eos_by_value", env={"SIMCUDA_GPU": "quiet:1,values:off"})
    assert r["stops"] != [[1, 2, 3, 4, 7]], r["stops"]  # no value: generate() runs to the limit


def test_a_bad_value_level_is_refused_with_its_name():
    out = torch_harness.run(SCENARIOS, "data_dependent_sizes", env={"SIMCUDA_GPU": "quiet:1,values:fast"},
                          expect_ok=False)
    assert out.returncode != 0
    assert "values:fast" in out.stderr or "'fast' for values" in out.stderr, out.stderr[-2000:]


@pytest.mark.parametrize("quiet", [False, True], ids=["banner", "quiet"])
def test_the_value_level_note_is_a_start_up_line_that_quiet_silences(quiet):
    out = torch_harness.run(SCENARIOS, "data_dependent_sizes", env={"SIMCUDA_GPU": "quiet:1" if quiet else "count:1"},
                          expect_ok=False)
    torch_harness.result(out, "data_dependent_sizes")
    noted = [line for line in out.stderr.splitlines() if line.startswith("simcuda: values: observable")]
    assert len(noted) == (0 if quiet else 1), out.stderr
    assert ("simcuda: simulated" in out.stderr) == (not quiet), out.stderr
