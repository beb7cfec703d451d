"""simcuda's Python side, for PyTorch jobs on the simulated GPU.

`phasealloc-run --sim-gpu` puts the folder above this package on PYTHONPATH (it lies beside
simcuda's libraries: `build/simcuda/lib/python/`, or `phasealloc/simcuda/python/` in an install).

- introspect: a ctypes view of libsimcuda's C introspection API (counters, mapped bytes, the
  configured value level), for the process the simulator runs in;
- values: the value mode, which computes PyTorch operations' outputs on the CPU into the simulated
  device memory at the level SIMCUDA_GPU names (values:off|observable|exact);
- torch_adapt: what a job on the simulator needs from PyTorch and transformers (the value mode,
  cuDNN attention off, generate()'s stop check at values:off), installed at start-up.
"""
