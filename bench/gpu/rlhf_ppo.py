#!/usr/bin/env python3
"""A small RLHF PPO loop, to compare CUDA allocators on the memory pattern RLHF jobs have.

Four Hugging Face GPT-2-style models built from a config with random weights (nothing is
downloaded): the actor (trained), a frozen reference copy, a critic (GPT-2 body + value head,
trained) and a reward model (sequence classifier, frozen). One PPO step:

  generation  actor.generate() with a KV cache: prompt_len -> prompt_len + gen_len tokens
  inference   actor and reference log-probs, critic values, reward scores (no grad)
  training    PPO clipped policy loss + value loss, forward and backward (ppo_epochs x minibatches)
  optimizer   AdamW steps of actor and critic

Each allocator variant runs in a fresh subprocess (the allocator is chosen by environment
variables that must be set before torch is imported):

  native                         PyTorch's caching allocator
  native-expandable              PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True
  native-empty-cache-at-phases   native, plus torch.cuda.empty_cache() at every phase end
  phasealloc[:CONF]              PHASEALLOC=1 (the start-up hook swaps the allocator at import torch),
                                 PHASEALLOC_CONF=CONF; phases are marked with phasealloc.phase()

Per phase the benchmark resets the peak statistics at the start and reads them at the end, so
"peak reserved" of a phase is the most memory the allocator held during it; "device used" is
total - free from cudaMemGetInfo (every allocator, and the CUDA context, counted the same way).
Step time: the wall time of each PPO step between torch.cuda.synchronize() calls, and of each phase
inside it; the result has them all and their medians over the steps after the first --warmup-steps
of each process. --rounds R runs every variant R times, interleaved (round r starts at variant r
mod n), and merges a variant's rounds (medians over all their measured steps, the peaks' maximum).
Output: one JSON line per variant (prefixed "RESULT ") and a table; --markdown writes the table;
--json writes the run (settings, commit, host, results); --step-time-readme rewrites the README's
step-time section from it (bench/gpu/sim_step_time.sh runs the three variants on the simulated GPU).
--trace PATH: phasealloc variants record a phasealloc trace (PATH may hold %p); native variants
dump a PyTorch memory snapshot with history (pickle) to PATH, which phasealloc's importer reads.

  python bench/gpu/rlhf_ppo.py --allocator native --allocator phasealloc --model-size small --steps 4
"""

import argparse
import copy
import json
import os
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
PYTHON_DIR = os.path.join(REPO, "interpose", "python")

MODEL_SIZES = {  # GPT-2 family shapes: (layers, hidden, heads)
    "tiny": (2, 128, 4),
    "small": (12, 768, 12),     # 124M
    "medium": (24, 1024, 16),   # 355M
    "large": (36, 1280, 20),    # 774M
    "xl": (48, 1600, 25),       # 1.5B
}
sys.path.insert(0, HERE)
from step_time_readme import PHASES, STEP_PARTS, STEP_TIME, rewrite_readme, step_time_section  # noqa: E402
VARIANTS = ("native", "native-expandable", "native-empty-cache-at-phases", "phasealloc")


# --- the parent: one subprocess per allocator variant ----------------------------------------------

def find_library():
    env = os.environ.get("PHASEALLOC_LIBRARY")
    if env:
        return os.path.abspath(env)
    import glob

    found = glob.glob(os.path.join(REPO, "build*", "interpose", "libphasealloc_torch.so"))
    return max(found, key=os.path.getmtime) if found else None


def variant_env(allocator, trace):
    env = dict(os.environ)
    for key in ("PHASEALLOC", "PHASEALLOC_CONF", "PYTORCH_CUDA_ALLOC_CONF"):
        env.pop(key, None)
    name, _, conf = allocator.partition(":")
    if name == "native-expandable":
        env["PYTORCH_CUDA_ALLOC_CONF"] = "expandable_segments:True"
    elif name == "phasealloc":
        library = find_library()
        if library is None:
            raise SystemExit("rlhf_ppo: libphasealloc_torch.so not found; build it or set PHASEALLOC_LIBRARY")
        env["PHASEALLOC"] = "1"
        env["PHASEALLOC_LIBRARY"] = library
        env["PHASEALLOC_DETECT"] = "0"  # phases are marked explicitly here, as for the native variants
        if trace:
            conf = (conf + "," if conf else "") + "trace:[%s]" % trace
        if conf:
            env["PHASEALLOC_CONF"] = conf
        # What phasealloc-run does for an uninstalled package: the package and its start-up hook.
        env["PYTHONPATH"] = os.pathsep.join(
            [os.path.join(PYTHON_DIR, "phasealloc", "_bootstrap"), PYTHON_DIR] +
            [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    elif name not in ("native", "native-empty-cache-at-phases"):
        raise SystemExit("rlhf_ppo: unknown allocator %r (expected one of %s, or phasealloc:CONF)" %
                         (allocator, ", ".join(VARIANTS)))
    return env


def run_variant(args, allocator):
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", "--allocator", allocator,
           "--model-size", args.model_size, "--steps", str(args.steps), "--batch", str(args.batch),
           "--prompt-len", str(args.prompt_len), "--gen-len", str(args.gen_len), "--ppo-epochs",
           str(args.ppo_epochs), "--minibatches", str(args.minibatches), "--dtype", args.dtype,
           "--seed", str(args.seed), "--warmup-steps", str(args.warmup_steps)]
    if args.trace:
        cmd += ["--trace", args.trace]
    if args.profile:
        cmd += ["--profile", args.profile]
    print("rlhf_ppo: running %s" % allocator, file=sys.stderr, flush=True)
    out = subprocess.run(cmd, env=variant_env(allocator, args.trace), capture_output=True, text=True)
    sys.stderr.write(out.stderr)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[len("RESULT "):])
    return {"allocator": allocator, "error": "worker exited %d without a result; last stderr: %s" % (
        out.returncode, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "")}


def gib(n):
    return "%.2f" % (n / float(1 << 30)) if n is not None else "-"


def table(results, markdown=False):
    head = ["allocator", "status", "median step s"]
    for phase in PHASES:
        head += ["%s res GiB" % phase, "%s alloc GiB" % phase]
    head += ["peak res GiB", "peak alloc GiB", "peak dev used GiB"]
    rows = []
    for r in results:
        if "error" in r:
            rows.append([r["allocator"], "error: " + r["error"][:60]] + [""] * (len(head) - 2))
            continue
        status = "OOM in %s" % r["oom_phase"] if r.get("oom_phase") else "ok"
        row = [r["allocator"], status, "%.3f" % r["step_time_median_s"] if r.get("step_time_median_s") else "-"]
        for phase in PHASES:
            p = r["phases"].get(phase, {})
            row += [gib(p.get("peak_reserved_bytes")), gib(p.get("peak_allocated_bytes"))]
        o = r["overall"]
        row += [gib(o["peak_reserved_bytes"]), gib(o["peak_allocated_bytes"]), gib(o["peak_device_used_bytes"])]
        rows.append(row)
    if markdown:
        lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        lines += ["| " + " | ".join(row) + " |" for row in rows]
        return "\n".join(lines)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
    fmt = "  ".join("%%-%ds" % w for w in widths)
    return "\n".join([fmt % tuple(head)] + [fmt % tuple(row) for row in rows])


def run_rounds(args):
    """Every variant args.rounds times, interleaved: round r runs each variant once, in a fresh process,
    starting at variant r (mod n), so no variant always runs first or last. Returns one merged result
    per variant, in args.allocator's order."""
    n = len(args.allocator)
    by_variant = {a: [] for a in args.allocator}
    for r in range(args.rounds):
        if args.rounds > 1:
            print("rlhf_ppo: round %d/%d" % (r + 1, args.rounds), file=sys.stderr, flush=True)
        for i in range(n):
            allocator = args.allocator[(r + i) % n]
            by_variant[allocator].append(run_variant(args, allocator))
    return [merge_rounds(by_variant[a]) for a in args.allocator]


def parent_main(args):
    if args.from_json:
        with open(args.from_json) as f:
            document = json.load(f)
        if args.step_time_readme:
            rewrite_readme(args.step_time_readme, step_time_section(document))
        return 0
    meta = run_metadata(args)
    results = run_rounds(args)
    meta["host"]["loadavg_end"] = list(os.getloadavg())
    print(table(results))
    document = dict(meta, results=results)
    for r in results:
        if "error" not in r:
            print("RESULT " + json.dumps(r, sort_keys=True))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(document, f, indent=1, sort_keys=True)
            f.write("\n")
    if args.step_time_readme:
        rewrite_readme(args.step_time_readme, step_time_section(document))
    if args.markdown:
        with open(args.markdown, "w") as f:
            first = next((r for r in results if "error" not in r), {})
            f.write("# RLHF PPO allocator comparison\n\n")
            f.write("GPU: %s. Model size %s (%s params per model), batch %d, prompt %d + generate %d tokens, "
                    "%d steps, %s, PPO epochs %d x minibatches %d.\n\n" % (
                        first.get("device_name", "?"), args.model_size, first.get("params_per_model", "?"),
                        args.batch, args.prompt_len, args.gen_len, args.steps, args.dtype, args.ppo_epochs,
                        args.minibatches))
            f.write("Per phase: peak reserved / peak allocated (GiB) while the phase ran. Step time: median of the "
                    "steps after the first %d of each process.\n\n" % args.warmup_steps)
            f.write(table(results, markdown=True) + "\n\n")
            f.write("Raw results (one JSON object per variant):\n\n```\n")
            for r in results:
                f.write(json.dumps(r, sort_keys=True) + "\n")
            f.write("```\n")
    return 0 if all("error" not in r for r in results) else 1



# --- step times: per-process summaries, merged rounds, the README section ----------------------------

def step_summary(step_lists, phase_lists, warmup, sys_lists=(), fault_lists=()):
    """Median (and mean, min, max) of the steps after the first `warmup` of each process; per phase (and
    between phases), the median over the same steps of the time spent there; the medians of the process's
    system CPU time and minor page faults per measured step."""
    measured = [t for steps in step_lists for t in steps[warmup:]]
    phase_measured = {p: [t for lists in phase_lists for t in lists.get(p, [])[warmup:]] for p in STEP_PARTS}
    everything = [t for steps in step_lists for t in steps]
    sys_cpu = [t for steps in sys_lists for t in steps[warmup:]]
    faults = [n for steps in fault_lists for n in steps[warmup:]]
    return {
        "sys_cpu_median_s": statistics.median(sys_cpu) if sys_cpu else None,
        "minor_faults_median": statistics.median(faults) if faults else None,
        "measured_steps": len(measured),
        "step_time_median_s": statistics.median(measured) if measured else None,
        "step_time_min_s": min(measured) if measured else None,
        "step_time_max_s": max(measured) if measured else None,
        # mean of the measured steps (the only step time before medians; the first step when none is measured)
        "step_time_s": statistics.mean(measured) if measured else (everything[0] if everything else None),
        "phase_step_time_median_s": {p: statistics.median(v) if v else None for p, v in phase_measured.items()},
    }


def merge_rounds(rounds):
    """One result from a variant's rounds: the step times of every round (medians over all measured steps),
    the memory peaks' maximum, the first OOM. An error in any round is the result."""
    if len(rounds) == 1 or any("error" in r for r in rounds):
        return next((r for r in rounds if "error" in r), rounds[0])
    merged = copy.deepcopy(rounds[0])
    merged["rounds"] = len(rounds)
    merged["steps_done"] = sum(r["steps_done"] for r in rounds)
    merged["step_times_s"] = [t for r in rounds for t in r["step_times_s"]]
    merged["step_times_by_round_s"] = [r["step_times_s"] for r in rounds]
    merged["phase_step_times_s"] = {p: [t for r in rounds for t in r["phase_step_times_s"].get(p, [])]
                                    for p in STEP_PARTS}
    for key in ("step_sys_cpu_s", "step_minor_faults"):
        merged[key] = [t for r in rounds for t in r.get(key, [])]
    merged["oom_phase"] = next((r["oom_phase"] for r in rounds if r.get("oom_phase")), None)
    for phase in PHASES:
        for key, value in merged["phases"][phase].items():
            values = [r["phases"][phase][key] for r in rounds]
            merged["phases"][phase][key] = sum(values) if key == "time_s" else max(values)
    for key in merged["overall"]:
        merged["overall"][key] = max(r["overall"][key] for r in rounds)
    merged.update(step_summary([r["step_times_s"] for r in rounds], [r["phase_step_times_s"] for r in rounds],
                               rounds[0]["warmup_steps"], [r.get("step_sys_cpu_s", []) for r in rounds],
                               [r.get("step_minor_faults", []) for r in rounds]))
    return merged


def run_metadata(args):
    """What the README section names besides the numbers: settings, commit, date, host."""
    env = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}

    def git(*argv):
        try:
            return subprocess.run(("git", "-C", REPO) + argv, env=env, capture_output=True, text=True,
                                  check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return None

    cpu = None
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((l.split(":", 1)[1].strip() for l in f if l.startswith("model name")), None)
    except OSError:
        pass
    settings = {k: getattr(args, k) for k in ("allocator", "model_size", "steps", "warmup_steps", "rounds", "batch",
                                                "prompt_len", "gen_len", "ppo_epochs", "minibatches", "dtype", "seed")}
    status = git("status", "--porcelain")
    library = find_library() if any(a.partition(":")[0] == "phasealloc" for a in args.allocator) else None
    return {
        "library": {"path": os.path.relpath(library, REPO) if library.startswith(REPO + os.sep) else library,
                    "built": time.strftime("%Y-%m-%d %H:%M %Z", time.localtime(os.path.getmtime(library)))}
                   if library and os.path.exists(library) else None,
        "command": args.command or " ".join(["python", os.path.relpath(os.path.abspath(__file__))] +
                                            [a for a in sys.argv[1:]]),
        "settings": settings,
        "sim_gpu": os.environ.get("SIMCUDA_GPU", ""),
        "git": {"commit": git("rev-parse", "--short", "HEAD"), "dirty": bool(status) if status is not None else None},
        "date": time.strftime("%Y-%m-%d %H:%M %Z"),
        "host": {"nproc": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
                 "cpu": cpu, "loadavg_start": list(os.getloadavg())},
    }


# --- the worker: one allocator, in this process -------------------------------------------------

def worker_main(args):
    name = args.allocator[0].partition(":")[0]
    import torch  # with PHASEALLOC=1 the start-up hook swaps the allocator here

    use_phasealloc = name == "phasealloc"
    phasealloc = None
    if use_phasealloc:
        import phasealloc

        if not phasealloc.is_enabled():
            raise SystemExit("rlhf_ppo: PHASEALLOC=1 did not enable phasealloc (see the line above)")
    if args.trace and not use_phasealloc:
        torch.cuda.memory._record_memory_history(max_entries=1_000_000)

    import transformers
    from transformers import GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel, GPT2Model

    transformers.logging.set_verbosity_error()
    torch.manual_seed(args.seed)
    dtype = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[args.dtype]
    layers, hidden, heads = MODEL_SIZES[args.model_size]
    vocab = 1000 if args.model_size == "tiny" else 50257
    config = GPT2Config(n_layer=layers, n_embd=hidden, n_head=heads, vocab_size=vocab,
                        n_positions=max(1024, args.prompt_len + args.gen_len), pad_token_id=vocab - 1,
                        bos_token_id=vocab - 1, eos_token_id=vocab - 1)
    device = torch.device("cuda")

    class Critic(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.body = GPT2Model(config)
            self.value_head = torch.nn.Linear(hidden, 1)

        def forward(self, input_ids, attention_mask):
            h = self.body(input_ids=input_ids, attention_mask=attention_mask).last_hidden_state
            return self.value_head(h).squeeze(-1)

    actor = GPT2LMHeadModel(config).to(device, dtype)
    reference = GPT2LMHeadModel(config).to(device, dtype).eval().requires_grad_(False)
    reference.load_state_dict(actor.state_dict())
    critic = Critic().to(device, dtype)
    reward_config = copy.deepcopy(config)
    reward_config.num_labels = 1
    reward = GPT2ForSequenceClassification(reward_config).to(device, dtype).eval().requires_grad_(False)
    actor_opt = torch.optim.AdamW(actor.parameters(), lr=1e-6)
    critic_opt = torch.optim.AdamW(critic.parameters(), lr=1e-6)
    params_per_model = sum(p.numel() for p in actor.parameters())

    phases = {p: {"peak_reserved_bytes": 0, "peak_allocated_bytes": 0, "peak_device_used_bytes": 0, "time_s": 0.0,
                  "peak_reserved_bytes_by_step": []}
              for p in PHASES}
    state = {"oom_phase": None}
    step_phase_time = {p: 0.0 for p in PHASES}  # this step's time inside each phase

    class measured(object):
        """One phase interval: peaks reset at the start, read at the end (same for every allocator)."""

        def __init__(self, phase):
            self.phase = phase
            self.explicit = phasealloc.phase(phase) if use_phasealloc else None

        def __enter__(self):
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            state["current"] = self.phase
            if self.explicit is not None:
                self.explicit.__enter__()
            self.start = time.perf_counter()
            return self

        def __exit__(self, exc_type, exc, tb):
            torch.cuda.synchronize()
            elapsed = time.perf_counter() - self.start
            if self.explicit is not None:
                self.explicit.__exit__(exc_type, exc, tb)
            p = phases[self.phase]
            free, total = torch.cuda.mem_get_info()
            p["peak_reserved_bytes"] = max(p["peak_reserved_bytes"], torch.cuda.max_memory_reserved())
            by_step = p["peak_reserved_bytes_by_step"]  # the phase's peak in each step (a step may enter it twice)
            while len(by_step) <= state.get("step", 0):
                by_step.append(0)
            by_step[state.get("step", 0)] = max(by_step[state.get("step", 0)], torch.cuda.max_memory_reserved())
            p["peak_allocated_bytes"] = max(p["peak_allocated_bytes"], torch.cuda.max_memory_allocated())
            p["peak_device_used_bytes"] = max(p["peak_device_used_bytes"], total - free)
            p["time_s"] += elapsed
            step_phase_time[self.phase] += elapsed
            if name == "native-empty-cache-at-phases":
                torch.cuda.empty_cache()
            return False

    def logprobs_of(logits, tokens):
        return torch.log_softmax(logits.float(), dim=-1).gather(-1, tokens.unsqueeze(-1)).squeeze(-1)

    def ppo_step():
        prompts = torch.randint(0, vocab - 1, (args.batch, args.prompt_len), device=device)
        prompt_mask = torch.ones_like(prompts)
        with measured("generation"):
            with torch.no_grad():
                sequences = actor.generate(input_ids=prompts, attention_mask=prompt_mask, do_sample=True, top_k=0,
                                           max_new_tokens=args.gen_len, min_new_tokens=args.gen_len,
                                           use_cache=True, pad_token_id=config.pad_token_id)
        mask = torch.ones_like(sequences)
        response = sequences[:, args.prompt_len:]
        start = args.prompt_len - 1
        with measured("inference"):
            with torch.no_grad():
                old_logprobs = logprobs_of(actor(sequences, attention_mask=mask).logits[:, start:-1], response)
                ref_logprobs = logprobs_of(reference(sequences, attention_mask=mask).logits[:, start:-1], response)
                old_values = critic(sequences, mask)[:, start:-1].float()
                scores = reward(sequences, attention_mask=mask).logits.squeeze(-1).float()
                rewards = -0.05 * (old_logprobs - ref_logprobs)
                rewards[:, -1] += scores
                advantages = torch.zeros_like(rewards)  # GAE, gamma = 1, lambda = 0.95
                last = torch.zeros(args.batch, device=device)
                for t in reversed(range(rewards.shape[1])):
                    next_value = old_values[:, t + 1] if t + 1 < rewards.shape[1] else 0.0
                    delta = rewards[:, t] + next_value - old_values[:, t]
                    last = delta + 0.95 * last
                    advantages[:, t] = last
                returns = advantages + old_values
                advantages = (advantages - advantages.mean()) / (advantages.std() + 1e-8)
        size = args.batch // args.minibatches
        for _ in range(args.ppo_epochs):
            for m in range(args.minibatches):
                rows = slice(m * size, (m + 1) * size)
                with measured("training"):
                    logits = actor(sequences[rows], attention_mask=mask[rows]).logits[:, start:-1]
                    new_logprobs = logprobs_of(logits, response[rows])
                    ratio = torch.exp(new_logprobs - old_logprobs[rows])
                    policy_loss = -torch.min(ratio * advantages[rows],
                                             ratio.clamp(0.8, 1.2) * advantages[rows]).mean()
                    values = critic(sequences[rows], mask[rows])[:, start:-1].float()
                    value_loss = 0.5 * (values - returns[rows]).pow(2).mean()
                    (policy_loss + value_loss).backward()
                    del logits, new_logprobs, ratio, values, policy_loss, value_loss
                with measured("optimizer"):
                    actor_opt.step()
                    critic_opt.step()
                    actor_opt.zero_grad(set_to_none=True)
                    critic_opt.zero_grad(set_to_none=True)

    step_times = []
    phase_step_times = {p: [] for p in STEP_PARTS}
    step_sys_cpu, step_minor_faults = [], []  # of this process (all its threads), per step
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    oom_types = tuple(t for t in (getattr(torch.cuda, "OutOfMemoryError", None),) if t is not None)
    try:
        for step in range(args.steps):
            for p in PHASES:
                step_phase_time[p] = 0.0
            state["step"] = step
            profiling = profiler is not None and step >= args.warmup_steps
            if profiling:
                profiler.enable()
            torch.cuda.synchronize()
            usage0 = resource.getrusage(resource.RUSAGE_SELF)
            t0 = time.perf_counter()
            ppo_step()
            torch.cuda.synchronize()
            step_times.append(time.perf_counter() - t0)
            usage1 = resource.getrusage(resource.RUSAGE_SELF)
            if profiling:
                profiler.disable()
            step_sys_cpu.append(usage1.ru_stime - usage0.ru_stime)
            step_minor_faults.append(usage1.ru_minflt - usage0.ru_minflt)
            for p in PHASES:
                phase_step_times[p].append(step_phase_time[p])
            phase_step_times["between"].append(step_times[-1] - sum(step_phase_time.values()))
    except Exception as e:  # an OOM is a result, not a crash
        if not (isinstance(e, oom_types) or "out of memory" in str(e)):
            raise
        state["oom_phase"] = state.get("current", "?")
        print("rlhf_ppo: out of memory in phase %s: %s" % (state["oom_phase"], str(e).splitlines()[0]),
              file=sys.stderr)

    result = {
        "allocator": args.allocator[0],
        "device_name": torch.cuda.get_device_name(),
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "model_size": args.model_size,
        "params_per_model": params_per_model,
        "dtype": args.dtype,
        "batch": args.batch,
        "prompt_len": args.prompt_len,
        "gen_len": args.gen_len,
        "steps_done": len(step_times),
        "first_step_time_s": step_times[0] if step_times else None,
        "warmup_steps": args.warmup_steps,
        "step_times_s": step_times,
        "phase_step_times_s": phase_step_times,
        "step_sys_cpu_s": step_sys_cpu,
        "step_minor_faults": step_minor_faults,
        "oom_phase": state["oom_phase"],
        "phases": phases,
        "overall": {
            "peak_reserved_bytes": max(p["peak_reserved_bytes"] for p in phases.values()),
            "peak_allocated_bytes": max(p["peak_allocated_bytes"] for p in phases.values()),
            "peak_device_used_bytes": max(p["peak_device_used_bytes"] for p in phases.values()),
        },
    }
    result.update(step_summary([step_times], [phase_step_times], args.warmup_steps, [step_sys_cpu],
                               [step_minor_faults]))
    if profiler is not None:
        import pstats

        path = args.profile.replace("%a", name).replace("%p", str(os.getpid()))
        profiler.dump_stats(path)
        result["profile"] = path
        stats = pstats.Stats(profiler, stream=sys.stderr)
        stats.sort_stats("tottime").print_stats(25)
    if use_phasealloc:
        s = phasealloc.stats()
        result["phasealloc"] = {
            "config": phasealloc.config(),
            "phases": {p["name"]: {k: p[k] for k in ("peak_allocated_bytes", "peak_reserved_bytes", "fragmentation",
                                                      "num_device_alloc", "num_device_free", "num_device_map",
                                                      "num_device_unmap", "released_bytes", "intervals") if k in p}
                       for p in s["phases"] if p["intervals"]},
            "totals": dict({k: sum(p.get(k, 0) for p in s["phases"])
                            for k in ("released_bytes", "num_device_map", "num_device_unmap")},
                           steps=len(step_times),
                           training={k: sum(p.get(k, 0) for p in s["phases"] if p["name"] == "training")
                                     for k in ("released_bytes", "num_device_map", "num_device_unmap", "intervals")}),
        }
        print(phasealloc.summary(), file=sys.stderr)
    if args.trace and not use_phasealloc:
        path = args.trace.replace("%p", str(os.getpid()))
        torch.cuda.memory._dump_snapshot(path)
        result["snapshot"] = path
    print("RESULT " + json.dumps(result, sort_keys=True), flush=True)
    return 0


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--allocator", action="append",
                        help="native | native-expandable | native-empty-cache-at-phases | phasealloc[:CONF] "
                             "(repeatable; default: all four)")
    parser.add_argument("--model-size", default="small", choices=sorted(MODEL_SIZES))
    parser.add_argument("--steps", type=int, default=4, help="PPO steps per process")
    parser.add_argument("--warmup-steps", type=int, default=1,
                        help="first steps of each process left out of the step-time medians (default 1)")
    parser.add_argument("--rounds", type=int, default=1,
                        help="run every variant this many times, interleaved (a fresh process each time); "
                             "the step-time medians are over all rounds' measured steps")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--prompt-len", type=int, default=128)
    parser.add_argument("--gen-len", type=int, default=128)
    parser.add_argument("--ppo-epochs", type=int, default=1)
    parser.add_argument("--minibatches", type=int, default=2)
    parser.add_argument("--dtype", default="bf16", choices=("bf16", "fp16", "fp32"))
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--trace", help="phasealloc: trace path pattern (%%p = pid); native: snapshot pickle path")
    parser.add_argument("--markdown", help="also write the table (and raw results) to this Markdown file")
    parser.add_argument("--json", help="also write the run (settings, commit, host, merged results) to this file")
    parser.add_argument("--step-time-readme", metavar="README",
                        help="rewrite the %s section of README (between its markers; appended when absent)" % STEP_TIME)
    parser.add_argument("--from-json", metavar="FILE",
                        help="run nothing: take the run from FILE (written by --json), for --step-time-readme")
    parser.add_argument("--command", help="the command line to name in the README section (default: this one)")
    parser.add_argument("--profile", metavar="PATH",
                        help="cProfile the measured steps of each worker; stats to PATH (%%a = allocator, %%p = pid), "
                             "top 25 by own time on stderr (slows the steps: not for the step-time table)")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if not args.allocator:
        args.allocator = list(VARIANTS)
    if args.batch % args.minibatches:
        parser.error("--batch must be a multiple of --minibatches")
    if args.warmup_steps < 0 or args.rounds < 1 or args.steps < 1:
        parser.error("--steps and --rounds must be >= 1, --warmup-steps >= 0")
    return args


if __name__ == "__main__":
    arguments = parse_args(sys.argv[1:])
    sys.exit(worker_main(arguments) if arguments.worker else parent_main(arguments))
