"""bench/gpu/sim_step_time.sh's README section, from fixed run documents (RESULTS_JSON: no run, no torch,
no simulator): the numbers and verdicts come from the JSON, the section goes between its markers (or
at the end), and nothing else in the README changes."""

import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "bench", "gpu", "sim_step_time.sh")
BEGIN, END = "<!-- step-time:begin -->", "<!-- step-time:end -->"
PHASES = ("generation", "inference", "training", "optimizer", "between")


def result(allocator, steps, phase_scale=1.0, warmup=1):
    measured = sorted(steps[warmup:])
    phase_steps = {p: [phase_scale * (i + 1) * 0.01 * t for t in steps] for i, p in enumerate(PHASES)}
    return {
        "allocator": allocator, "device_name": "NVIDIA H100 80GB HBM3 (simcuda)", "params_per_model": 124439808,
        "oom_phase": None, "warmup_steps": warmup, "step_times_s": steps, "phase_step_times_s": phase_steps,
        "measured_steps": len(measured),
        "step_time_median_s": measured[len(measured) // 2],  # odd counts here
        "step_time_min_s": measured[0], "step_time_max_s": measured[-1],
        "phase_step_time_median_s": {p: sorted(v[warmup:])[len(measured) // 2] for p, v in phase_steps.items()},
        "sys_cpu_median_s": 0.25 * phase_scale, "minor_faults_median": 1000 * phase_scale,
    }


def document(results):
    return {
        "command": "BUILD_DIR=build-x bench/gpu/sim_step_time.sh --steps 4",
        "settings": {"allocator": ["native", "native-expandable", "phasealloc"], "model_size": "small", "steps": 4,
                     "warmup_steps": 1, "rounds": 1, "batch": 16, "prompt_len": 128, "gen_len": 128,
                     "ppo_epochs": 1, "minibatches": 2, "dtype": "bf16", "seed": 0},
        "sim_gpu": "quiet:1,memory:80GiB",
        "git": {"commit": "abc1234", "dirty": True},
        "date": "2026-01-02 03:04 UTC",
        "host": {"nproc": 2, "cpu": "Test CPU", "loadavg_start": [0.5, 0.25, 0.125], "loadavg_end": [1.0, 0.5, 0.25]},
        "results": results,
    }


def render(tmp_path, readme_text, doc, expect_ok=True):
    readme = tmp_path / "README.md"
    readme.write_text(readme_text)
    run_json = tmp_path / "run.json"
    run_json.write_text(json.dumps(doc))
    env = dict(os.environ, RESULTS_JSON=str(run_json), README=str(readme), PYTHON=sys.executable)
    out = subprocess.run([SCRIPT], env=env, capture_output=True, text=True, timeout=60)
    if expect_ok:
        assert out.returncode == 0, out.stderr
    return out, readme.read_text()


def section_of(text):
    assert text.count(BEGIN) == 1 and text.count(END) == 1
    return text[text.index(BEGIN):text.index(END) + len(END)]


def row(section, variant):
    lines = [l for l in section.splitlines() if l.startswith("| %s |" % variant)]
    assert len(lines) == 1, section
    return [c.strip() for c in lines[0].strip("|").split("|")]


def test_the_section_is_appended_then_replaced_in_place(tmp_path):
    head = "# Benchmarks\n\nSome text.\n<!-- results:begin -->\nkept\n<!-- results:end -->\n"
    met = document([result("native", [0.9, 0.50, 0.52, 0.54]),
                    result("native-expandable", [0.9, 0.55, 0.56, 0.60]),
                    result("phasealloc", [0.9, 0.45, 0.49, 0.51], phase_scale=0.5)])
    met["results"][2]["phasealloc"] = {"totals": {
        "steps": 4, "released_bytes": 3 << 30, "num_device_map": 12, "num_device_unmap": 7,
        "training": {"released_bytes": 1 << 29, "num_device_map": 5, "num_device_unmap": 2, "intervals": 8}}}
    _, text = render(tmp_path, head, met)
    assert text.startswith(head)  # what was there is unchanged; the section follows it
    section = section_of(text)
    assert text.endswith(END + "\n")
    assert row(section, "native")[:5] == ["native", "0.520", "0.500–0.540", "1.000×", "(reference)"]
    assert row(section, "native-expandable")[1:5] == ["0.560", "0.550–0.600", "1.077×", "no target"]
    phasealloc = row(section, "phasealloc")
    assert phasealloc[1:5] == ["0.490", "0.450–0.510", "0.942×", "≤ 1.00×: met"]
    assert phasealloc[5] == "0.002 (0.47×)"  # generation: 0.5 x 0.01 x 0.49 against 0.01 x 0.52
    assert phasealloc[9:] == ["0.012 (0.47×)", "0.125", "500"]  # between; sys CPU; page faults
    assert row(section, "native")[9:] == ["0.026", "0.250", "1000"]
    assert ("- phasealloc (its first process, all 4 steps and the set-up): 3.00 GiB released to the device, 12 maps "
            "and 7 unmaps of device memory; in `training`: 0.50 GiB released, 5 maps, 2 unmaps over 8 intervals.\n"
            in section)
    assert "Commit abc1234 with uncommitted changes; 2026-01-02 03:04 UTC; host: 2 CPUs (Test CPU)" in section
    assert "load average 0.50/0.25/0.12 at the start and 1.00/0.50/0.25 at the end" in section
    assert "Command: `BUILD_DIR=build-x bench/gpu/sim_step_time.sh --steps 4`" in section
    assert "3 measured steps per variant" in section
    assert "phasealloc is 0.942× native's median step time (0.490 s against 0.520 s): met." in section

    # A second run replaces the section, and only it: the text after the end marker stays.
    tail = "\n## Later section\n\nmore text\n"
    slower = document([result("native", [0.9, 0.50, 0.52, 0.54]),
                       result("native-expandable", [0.9, 0.55, 0.56, 0.60]),
                       result("phasealloc", [0.9, 0.55, 0.572, 0.60])])
    _, again = render(tmp_path, text + tail, slower)
    assert again.startswith(head) and again.endswith(END + "\n" + tail)
    section = section_of(again)
    assert row(section, "phasealloc")[1:5] == ["0.572", "0.550–0.600", "1.100×", "≤ 1.00×: **not met**"]
    assert "phasealloc is 1.100× native's median step time (0.572 s against 0.520 s): **not met**." in section


def test_a_failed_variant_is_not_met(tmp_path):
    doc = document([result("native", [0.9, 0.50, 0.52, 0.54]),
                    result("native-expandable", [0.9, 0.55, 0.56, 0.60]),
                    {"allocator": "phasealloc", "error": "worker exited 1 without a result; last stderr: boom"}])
    _, text = render(tmp_path, "# B\n", doc)
    section = section_of(text)
    assert "| phasealloc | worker exited 1 without a result; last stderr: boom |" in section
    assert "phasealloc: no step time (worker exited 1 without a result; last stderr: boom): **not met**" in section
    assert " met." not in section.replace("**not met**", "")


def test_a_lone_marker_is_an_error(tmp_path):
    doc = document([result("native", [0.9, 0.5, 0.5, 0.5])])
    original = "# B\n" + BEGIN + "\nhalf a section\n"
    out, text = render(tmp_path, original, doc, expect_ok=False)
    assert out.returncode != 0 and "has only one of" in out.stderr
    assert text == original
