"""The stand-in for flash-attn 2's compiled CUDA module (`flash_attn_2_cuda`), on the simulated GPU.

Rationale: flash-attn 2.8.3's package imports its CUDA module at import time
(flash_attn/flash_attn_interface.py), and frameworks import the package for its pure-Python helpers
alone (OpenRLHF 0.11's models import flash_attn.bert_padding at module level, whatever attention
they run). That module is built with nvcc from flash-attn's sources, for hours, and is a CUDA library
like the ones simcuda stands in for; installed without it (FLASH_ATTENTION_SKIP_CUDA_BUILD=TRUE), the
package cannot be imported at all.

Approach: this folder is on PYTHONPATH in every process phasealloc-run --sim-gpu starts, so
`import flash_attn_2_cuda` finds this module where the compiled one is missing (a compiled one
installed in site-packages comes later on the path and is shadowed: its kernels could not run here
either). It has the entry points flash_attn_interface calls, and each fails as simcuda's generated
stubs do: with an error naming the function and what to use instead.

Limitations: flash-attention's kernels are not emulated. A job that runs them (attn_implementation
"flash_attention_2", packed samples) fails at its first attention call with that error; a job that
asks for PyTorch's SDPA or eager attention runs.
"""


class NotEmulated(RuntimeError):
    pass


def _not_emulated(name):
    def call(*args, **kwargs):
        raise NotEmulated(
            "simcuda: flash_attn_2_cuda.%s is not emulated by the simulated GPU (flash-attn's CUDA kernels); "
            "run the model with attn_implementation='sdpa' or 'eager'" % name)

    call.__name__ = name
    return call


fwd = _not_emulated("fwd")
varlen_fwd = _not_emulated("varlen_fwd")
bwd = _not_emulated("bwd")
varlen_bwd = _not_emulated("varlen_bwd")
fwd_kvcache = _not_emulated("fwd_kvcache")
