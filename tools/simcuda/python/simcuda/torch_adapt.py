"""What a PyTorch job running on simcuda, the simulated GPU, needs adapted (under phasealloc-run
--sim-gpu, simcuda's start-up, _startup/sitecustomize.py, calls install() in every Python process;
PHASEALLOC_SIM_ADAPT=0 keeps PyTorch's and transformers' own choices).

Rationale: on the simulator kernels do not run, so what a real job relies on breaks in seven places:
- **cuDNN attention.** On an sm90 device in bf16/fp16, PyTorch's scaled_dot_product_attention picks
  its cuDNN backend, and the simulator does not emulate cuDNN (it fails with
  "cuDNN error: CUDNN_STATUS_NOT_SUPPORTED"). The cuDNN backend is switched off, so SDPA uses
  PyTorch's own flash or memory-efficient kernels: launches that the simulator counts and skips.
- **Real values** (values.py) at simcuda's value level: by default (values:observable) what
  host code reads is computed, so generate() stops on EOS, TRL's trainers run, and so on.
- **Stopping on a device value at values:off.** That level leaves host memory untouched, so it is
  the one for jobs larger than this machine's memory. There `generate()` would stop on
  `unfinished_sequences.max() == 0`, a value no kernel computed: it would decode forever or stop
  at once. Greedy and sampling decoding stop at exactly max_length instead, the longest a real run
  can go, which is the memory a dry run must plan for. At the other levels generate() is left as
  it is.
- **vLLM's sampled token ids.** vLLM's model runner V2 (its default from 0.33) samples with a Triton
  kernel (`_gumbel_sample_kernel`: temperature, Gumbel noise, per-block maxima) into a buffer that
  nothing else writes; the simulator launches it but computes nothing, so the token ids are whatever
  that memory held before: zeros while it is fresh, then anything (a 4294967297 killed TRL's
  detokenizer in its third step). At the value levels that compute, `gumbel_sample` runs as it is
  (its allocations and launch unchanged) and its result is then computed on the CPU from the
  logits, written through the output's alias (no CUDA call, no allocation): the argmax of
  logits / temperature plus Gumbel noise (CPU draws), or of the logits where the temperature is 0.
  The ids are valid and follow the logits; they are not the GPU's draws. Logits a CUDA graph or a
  compiled kernel produced are not computed either, so sampling from them is arbitrary but valid.
- **Triton kernels at values:exact** (triton_values.py): Triton's interpreter runs each launch on
  the CPU into device memory, so vLLM's model runner (which builds its inputs with Triton kernels)
  computes what a GPU would.
- **A rank without its peers** (virtual_ranks.py): under nccl_peers:virtual, torch.distributed's
  rendezvous would wait for ranks that never start; it gets a store of this process alone.
- **A clean exit.** Every graph backward() runs keeps Python objects (the thread-local state it
  started under: the caller's contextvars, the value mode), and the device thread that ran its
  CUDA nodes may drop the last reference just after backward() has returned on the main thread.
  If the interpreter is finalizing by then, the GIL that the release needs ends the thread and the
  process aborts ("terminate called without an active exception"): 1 in ~6 two-rank FSDP2 jobs
  here, where kernels take no time and the job exits right after its last step. At exit (after
  the value mode is popped), one more graph per device, run by the engine directly so that it
  holds no Python object, returns only once that device's thread has finished every earlier graph.

Limitations: the attention backend changes the job's allocations a little (cuDNN attention takes a
workspace, the flash kernel a log-sum-exp buffer). Beam search and assisted decoding keep their
own stop checks.
"""

import atexit
import functools
import os
import sys
import threading

from . import introspect, triton_values, values, virtual_ranks

_state = threading.local()


def _say(message):
    try:
        print("simcuda: " + message, file=sys.stderr)
    except Exception:
        pass


def _gib(n):
    return "%.0f GiB" % (n / 2**30)


def _settle_autograd_device_threads():
    import torch

    if not torch.cuda.is_initialized():
        return
    engine = torch.autograd.Variable._execution_engine
    for index in range(torch.cuda.device_count()):
        if not torch._C._cuda_hasPrimaryContext(index):
            continue
        device = torch.device("cuda", index)
        try:
            with torch.enable_grad():
                leaf = torch.ones(1, device=device, requires_grad=True)
                out = leaf * 2
            # tensors, grad_tensors, keep_graph, create_graph, inputs, allow_unreachable, accumulate_grad
            engine.run_backward((out,), (torch.ones(1, device=device),), False, False, (), True, True)
        except Exception as error:  # a job ending on a CUDA error: the exit may still race
            _say("at exit, device %d's autograd thread was not settled (%s: %s)" % (index, type(error).__name__, error))


def _adapt_torch(torch):
    torch.backends.cuda.enable_cudnn_sdp(False)
    atexit.register(_settle_autograd_device_threads)  # before values': runs after its mode is popped
    level = values.install(torch)
    if level != "off" and not introspect.quiet():
        host_bytes = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
        _say("values: %s (operations' outputs computed on the CPU into device memory: a job that fills "
             "%s of simulated GPU memory needs as much of this machine's %s; values:off leaves it untouched)" %
             (level, _gib(introspect.simulated_bytes()), _gib(host_bytes)))


def _adapt_generation(utils):
    stop_check = getattr(utils, "StopCheck", None)
    mixin = getattr(utils, "GenerationMixin", None)
    if stop_check is None or mixin is None or not hasattr(mixin, "_sample"):
        _say("transformers' decoding loop is not the one expected; generate() is not adapted")
        return
    original_sample = mixin._sample

    def sample(self, *args, **kwargs):
        criteria = kwargs.get("stopping_criteria")
        if criteria is None and len(args) >= 3:
            criteria = args[2]
        previous = getattr(_state, "max_length", None)
        _state.max_length = getattr(criteria, "max_length", None)
        try:
            return original_sample(self, *args, **kwargs)
        finally:
            _state.max_length = previous

    original_call = stop_check.__call__

    def call(self, unfinished_sequences, tokens, length):
        max_length = getattr(_state, "max_length", None)
        if max_length is None:
            return original_call(self, unfinished_sequences, tokens, length)
        if self.streamer is not None:
            self.streamer.put(tokens.cpu())
        return length >= max_length

    mixin._sample = sample
    stop_check.__call__ = call


def _adapt_vllm_sampling(gumbel):
    import torch

    original = getattr(gumbel, "gumbel_sample", None)
    if original is None:
        _say("vLLM's gumbel_sample is not where it is expected; its sampled ids are not computed")
        return

    @functools.wraps(original)
    def gumbel_sample(logits, expanded_idx_mapping, temperature, seed, pos, apply_temperature, *args, **kwargs):
        sampled = original(logits, expanded_idx_mapping, temperature, seed, pos, apply_temperature, *args, **kwargs)
        if sampled.numel() == 0 or torch.cuda.is_current_stream_capturing():
            return sampled
        torch.cuda.current_stream().synchronize()
        scores = values.cpu_alias(logits).float()
        if apply_temperature:
            rows = values.cpu_alias(expanded_idx_mapping).long()
            t = values.cpu_alias(temperature)[rows].float().unsqueeze(1)
            noise = -torch.log(-torch.log(torch.rand(scores.shape).clamp_(1e-20, 1.0)))
            scores = torch.where(t == 0, scores, scores / torch.where(t == 0, 1.0, t) + noise)
        values.cpu_alias(sampled).copy_(scores.argmax(dim=-1).view(sampled.shape))
        return sampled

    gumbel.gumbel_sample = gumbel_sample


def install(when_imported):
    """Adapts torch, vLLM's sampling at the levels that compute values, transformers' decoding at
    values:off and, for a rank with virtual peers, torch.distributed's rendezvous, when each is imported:
    `when_imported(module_name, callback)` is the caller's post-import hook."""
    when_imported("torch", _adapt_torch)
    if introspect.value_level() != "off":  # what a Triton kernel samples, computed as the values are
        when_imported("vllm.v1.worker.gpu.sample.gumbel", _adapt_vllm_sampling)
    if introspect.value_level() == "exact":  # every Triton kernel, by Triton's interpreter
        when_imported("triton", lambda triton: triton_values.install())
    if introspect.value_level() == "off":  # real values stop generate() by themselves
        when_imported("transformers.generation.utils", _adapt_generation)
    virtual_ranks.when_imported(when_imported)
