"""simcuda's value mode (SIMCUDA_GPU=values:exact): PyTorch operations on the simulated GPU give
the values the same operations give on the CPU, data-dependent sizes included, so host code that
reads device values (generate() stopping on EOS, .item(), boolean masks) takes the real path.
Each test runs one scenario of values_scenarios.py in a fresh process under PyTorch's allocator."""

import os
import subprocess
import sys

import sim_harness

SCENARIOS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "values_scenarios.py")
EXACT = {"SIMCUDA_GPU": "quiet:1,values:exact"}


def test_data_dependent_sizes_and_python_answers_are_the_cpus():
    r = sim_harness.run(SCENARIOS, "data_dependent_sizes", env=EXACT)
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
    assert r["strided_to_host"] is True


def test_a_training_step_gives_the_cpus_losses_and_parameters():
    r = sim_harness.run(SCENARIOS, "training_step_matches_the_cpu", env=EXACT)
    assert all(abs(a - b) < 1e-5 for a, b in zip(r["gpu_losses"], r["cpu_losses"])), r
    assert r["gpu_losses"][2] < r["gpu_losses"][0], r  # it learns
    assert r["params_close"] is True


def test_generate_stops_on_eos_by_value_and_runs_to_the_limit_without_it():
    r = sim_harness.run(SCENARIOS, "generate_stops_on_eos_by_value", env=EXACT)
    assert r["stops"] == [[1, 2, 3, 4, 7]], r["stops"]  # EOS forced by the head's bias: one token
    assert r["runs"] == [[1, 2, 3, 4] + [5] * 12], r["runs"]  # never EOS: max_new_tokens
    assert all(0 <= t < 97 for t in r["sampled"][0]), r["sampled"]  # sampling: valid token ids


def test_gpt2_small_forward_equals_the_cpu_forward():
    r = sim_harness.run(SCENARIOS, "gpt2_forward_matches_the_cpu", env=EXACT)
    assert r["max_abs_diff"] <= 1e-4 * max(1.0, r["scale"]), r
    assert r["argmax_equal"] is True


def test_a_tiny_moe_routes_tokens_by_value_as_on_the_cpu():
    r = sim_harness.run(SCENARIOS, "moe_routes_by_value", env=EXACT)
    assert r["counts_gpu"] == r["counts_cpu"] and sum(r["counts_cpu"]) == 2 * 24, r
    assert r["logits_diff"] < 1e-4, r


def test_attention_forward_and_gradients_equal_the_cpus_grouped_and_causal_too():
    r = sim_harness.run(SCENARIOS, "attention_gradients_match_the_cpu", env=EXACT)
    assert all(diff < 1e-5 for diff in r.values()), r


def test_trls_grpo_trainer_runs_three_steps_under_both_allocators_with_the_same_losses():
    native = sim_harness.run(SCENARIOS, "trl_grpo_three_steps", env=EXACT)
    ours = sim_harness.run(SCENARIOS, "trl_grpo_three_steps", env=EXACT, native=False)
    assert native["steps"] == ours["steps"] == 3, (native, ours)
    assert native["allocator"] == "native" and ours["allocator"] == "phasealloc", (native, ours)
    assert len(native["losses"]) == 3 and native["losses"] == ours["losses"], (native, ours)


def test_trls_rloo_sft_and_dpo_trainers_run_three_steps_under_both_allocators():
    for trainer in ("rloo", "sft", "dpo"):
        native = sim_harness.run(SCENARIOS, "trl_%s_three_steps" % trainer, env=EXACT)
        ours = sim_harness.run(SCENARIOS, "trl_%s_three_steps" % trainer, env=EXACT, native=False)
        assert native["steps"] == ours["steps"] == 3, (trainer, native, ours)
        assert ours["allocator"] == "phasealloc", (trainer, ours)
        assert native["losses"] == ours["losses"] and len(native["losses"]) == 3, (trainer, native, ours)
        assert all(loss == loss for loss in native["losses"]), (trainer, native)  # no NaN


def test_the_dry_run_of_trls_grpo_job_shows_its_phases_with_values():
    sim_harness.skip_or_fail()
    env = dict(os.environ, PHASEALLOC_SIMCUDA_DIR=sim_harness.sim_dir(), SIMCUDA_GPU="quiet:1",
               PYTHONPATH=sim_harness.HERE + os.pathsep + os.environ.get("PYTHONPATH", ""))
    out = subprocess.run([sim_harness.phasealloc_cli(), "dryrun", "--values", "exact", "--gpu", "24GiB", "--html", "",
                          "-q", "--", sys.executable, SCENARIOS, "trl_grpo_three_steps"],
                         env=env, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    phases = {line.split()[0] for line in out.stdout.splitlines() if line.split()[:1]
              and line.split()[0] in ("generation", "inference", "training", "optimizer")}
    assert {"generation", "training", "optimizer"} <= phases, out.stdout[-3000:]
    assert "phasealloc:release:adaptive        fits" in out.stdout, out.stdout[-3000:]


def test_trls_grpo_trainer_needs_the_values():
    """Without values it dies in its first step, as the issue reported (completions cut at an EOS no
    comparison computed): what the value mode is for."""
    out = sim_harness.run(SCENARIOS, "trl_grpo_three_steps", env={"SIMCUDA_GPU": "quiet:1"}, expect_ok=False)
    assert out.returncode != 0 and "Error" in out.stderr, out.stderr[-2000:]


def test_without_values_kernels_leave_memory_as_it_was():
    r = sim_harness.run(SCENARIOS, "generate_stops_on_eos_by_value", env={"SIMCUDA_GPU": "quiet:1"})
    assert r["stops"] != [[1, 2, 3, 4, 7]], r["stops"]  # no value: generate() runs to the limit


def test_a_bad_value_level_is_refused_with_its_name():
    out = sim_harness.run(SCENARIOS, "data_dependent_sizes", env={"SIMCUDA_GPU": "quiet:1,values:fast"},
                          expect_ok=False)
    assert out.returncode != 0
    assert "values:fast" in out.stderr or "'fast' for values" in out.stderr, out.stderr[-2000:]
