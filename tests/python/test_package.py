"""The Python package against a fake torch (tests/python/fakes): enable(), the patched torch.cuda
memory API, phases, phase detection and the known limits."""

import os
import pickle
import sys
import warnings

import pytest

from conftest import DEVICES, FAKES_DIR, LIBRARY, MAIN_CONF

DEVICE = DEVICES["package"]
MIB = 1 << 20
_PURGED = ("torch", "transformers", "vllm", "phasealloc")

# enable() warns that the model device hands out fake addresses: expected here.
pytestmark = pytest.mark.filterwarnings("ignore:phasealloc. device.model hands torch fake addresses")


def _purge():
    for name in list(sys.modules):
        if name.split(".")[0] in _PURGED:
            del sys.modules[name]
    sys.meta_path[:] = [f for f in sys.meta_path if type(f).__module__ != "phasealloc._import_hooks"]


@pytest.fixture
def fresh(lib):
    """A fresh fake torch and a fresh phasealloc package (the library itself stays loaded)."""
    _purge()
    sys.path.insert(0, FAKES_DIR)
    import phasealloc
    import torch

    yield phasealloc, torch
    for module in ("_phase_detect", "_limits", "_torch_api"):
        loaded = sys.modules.get("phasealloc." + module)
        if loaded is not None:
            loaded.uninstall()
    # Leave the process-wide phase where detection put it, and the stack balanced.
    assert phasealloc._phases.explicit_depth() == 0
    sys.path.remove(FAKES_DIR)
    _purge()


@pytest.fixture
def enabled(fresh):
    phasealloc, torch = fresh
    assert phasealloc.enable(library=LIBRARY) is True
    return phasealloc, torch


def test_enable_swaps_the_allocator_and_sets_the_hooks(fresh):
    phasealloc, torch = fresh
    from phasealloc import _library

    assert phasealloc.enable(library=LIBRARY) is True
    current = torch.cuda.memory._current_allocator
    assert current is not None and phasealloc.is_enabled()
    hooks = current._allocator
    assert hooks.init_fn == _library.function_address("phasealloc_init")
    assert hooks.reset_fn == _library.function_address("phasealloc_reset")
    assert hooks.memory_fraction_fn == _library.function_address("phasealloc_memory_fraction")
    assert hooks.record_stream_fn == _library.function_address("phasealloc_record_stream")
    assert current._alloc_fn == _library.function_address("phasealloc_malloc")
    assert phasealloc.enable(library=LIBRARY) is True  # idempotent: no second swap
    assert torch.cuda.memory._current_allocator is current
    torch.cuda.current_device()  # CUDA lazy init: the init hook gets the device count
    assert phasealloc.stats(DEVICE)["phasealloc"]["torch_device_count"] == 1


def test_enable_after_cuda_init_warns_and_keeps_the_native_allocator(fresh):
    phasealloc, torch = fresh
    torch.cuda._lazy_init()
    with pytest.warns(RuntimeWarning, match="CUDA is already initialised"):
        assert phasealloc.enable(library=LIBRARY) is False
    assert torch.cuda.memory._current_allocator is None
    assert not phasealloc.is_enabled()
    assert torch.cuda.memory_allocated() == 0  # torch's own function, unpatched


def test_enable_with_the_configuration_in_force(fresh):
    phasealloc, torch = fresh
    assert phasealloc.enable(conf=MAIN_CONF, library=LIBRARY) is True
    assert phasealloc.config().startswith("device:model,")


def test_enable_with_another_configuration_is_refused_once_the_library_read_its_own(fresh):
    phasealloc, torch = fresh
    with pytest.raises(phasealloc.PhaseallocError, match="too late"):
        phasealloc.enable(conf="device:model,strict:true", library=LIBRARY)
    assert torch.cuda.memory._current_allocator is None


def test_torch_memory_api_answers_from_phasealloc_books(enabled, tmp_path):
    phasealloc, torch = enabled
    base = phasealloc.stats(DEVICE)["allocated_bytes.all.current"]
    ptrs = [(torch.cuda._test_malloc(n), n) for n in (1000, 5000, 3 * MIB)]
    s = phasealloc.stats(DEVICE)
    grown = s["allocated_bytes.all.current"] - base
    assert grown >= 1024 + 5120 + 3 * MIB
    for module in (torch.cuda, torch.cuda.memory):
        assert module.memory_allocated() == s["allocated_bytes.all.current"]
        assert module.memory_allocated(DEVICE) == s["allocated_bytes.all.current"]
        assert module.memory_allocated("cuda:0") == s["allocated_bytes.all.current"]
        assert module.memory_reserved() == s["reserved_bytes.all.current"]
        assert module.max_memory_allocated() == s["allocated_bytes.all.peak"]
        assert module.max_memory_reserved() == s["reserved_bytes.all.peak"]
    assert torch.cuda.memory.max_memory_cached() == s["reserved_bytes.all.peak"]  # torch's alias follows

    stats = torch.cuda.memory_stats()
    assert list(stats) == sorted(stats)
    assert stats["allocated_bytes.all.current"] == s["allocated_bytes.all.current"]
    assert stats["max_split_size"] == -1
    assert {"oversize_allocations.peak", "oversize_segments.freed"} <= set(stats)
    assert "phases" not in stats and "phasealloc" not in stats
    nested = torch.cuda.memory_stats_as_nested_dict()
    assert nested["allocated_bytes"]["all"]["current"] == s["allocated_bytes.all.current"]
    assert nested["num_ooms"] == 0

    summary = torch.cuda.memory_summary()
    assert "fake torch memory summary" in summary and "peak alloc" in summary

    for ptr, n in ptrs:
        torch.cuda._test_free(ptr, n)
    torch.cuda.reset_peak_memory_stats()
    after = torch.cuda.memory_stats()
    assert after["allocated_bytes.all.peak"] == after["allocated_bytes.all.current"]
    torch.cuda.reset_accumulated_memory_stats()
    assert torch.cuda.memory_stats()["allocation.all.allocated"] == 0

    torch.cuda.empty_cache()  # through the reset hook
    assert torch.cuda.memory_reserved() == 0

    torch.cuda.set_per_process_memory_fraction(0.5, DEVICE)  # through the memory-fraction hook
    assert phasealloc.stats(DEVICE)["phasealloc"]["limit_bytes"] == 32 << 30
    torch.cuda.set_per_process_memory_fraction(1.0, DEVICE)


def test_snapshot_functions(enabled, tmp_path):
    phasealloc, torch = enabled
    ptr = torch.cuda._test_malloc(4096)
    snap = torch.cuda.memory._snapshot()
    assert set(snap) >= {"segments", "device_traces", "allocator_settings"}
    assert any(seg["device"] == DEVICE for seg in snap["segments"])
    assert all(isinstance(seg["segment_pool_id"], tuple) for seg in snap["segments"])
    assert snap["allocator_settings"]["phasealloc"].startswith("device:model")
    assert torch.cuda.memory_snapshot() == snap["segments"]
    path = tmp_path / "snap.pickle"
    torch.cuda.memory._dump_snapshot(str(path))
    with open(path, "rb") as f:
        assert pickle.load(f)["segments"] == snap["segments"]
    with pytest.warns(RuntimeWarning, match="_record_memory_history records nothing"):
        torch.cuda.memory._record_memory_history(max_entries=1000)
    torch.cuda.memory._record_memory_history(None)  # turning it off: silent
    torch.cuda._test_free(ptr, 4096)


def test_record_stream_hook(enabled):
    phasealloc, torch = enabled
    from phasealloc import _library

    ptr = torch.cuda._test_malloc(4096, stream=0x11)
    lib = _library.load()
    lib.phasealloc_clear_last_error()
    torch.cuda._test_record_stream(ptr, 0x22)
    assert _library.last_error() == ""
    torch.cuda._test_free(ptr, 4096, stream=0x11)


def test_uninstall_restores_torch_whose_api_then_raises_like_pytorch(enabled):
    phasealloc, torch = enabled
    from phasealloc import _torch_api

    torch.cuda._test_malloc(512)  # initialises CUDA
    _torch_api.uninstall()
    with pytest.raises(RuntimeError, match="does not yet support getDeviceStats"):
        torch.cuda.memory_allocated()


def test_phase_context_manager_and_decorator(enabled):
    phasealloc, torch = enabled
    before = phasealloc.current_phase()
    with phasealloc.phase("rollout") as p:
        assert phasealloc.current_phase() == "rollout"
        with phasealloc.phase("scoring"):
            assert phasealloc.current_phase() == "scoring"
        assert phasealloc.current_phase() == "rollout"
        assert repr(p) == "phasealloc.phase('rollout')"
    assert phasealloc.current_phase() == before

    @phasealloc.phase("train_step")
    def step(x):
        assert phasealloc.current_phase() == "train_step"
        return x * 2

    assert step(21) == 42 and step(1) == 2
    assert phasealloc.current_phase() == before

    with pytest.raises(KeyError):
        with phasealloc.phase("failing"):
            raise KeyError("boom")
    assert phasealloc.current_phase() == before
    with pytest.raises(ValueError):
        phasealloc.phase("")

    # Phases are counted in the books of the engine.
    with phasealloc.phase("counted"):
        torch.cuda._test_free(torch.cuda._test_malloc(2048), 2048)
    phases = {p["name"]: p for p in phasealloc.stats(DEVICE)["phases"]}
    assert phases["counted"]["num_allocs"] >= 1 and phases["counted"]["num_frees"] >= 1


def test_phase_is_a_no_op_without_the_library(fresh, monkeypatch):
    phasealloc, torch = fresh
    from phasealloc import _library

    monkeypatch.setattr(_library, "_lib", None)
    with phasealloc.phase("anything"):
        assert phasealloc.current_phase() == ""


def _make_model(torch, transformers):
    seen = []

    class Model(torch.nn.Module, transformers.GenerationMixin):
        def forward(self, *args, **kwargs):
            import phasealloc

            seen.append(phasealloc.current_phase())

    return Model(), seen


def test_phase_detection(enabled):
    phasealloc, torch = enabled
    assert "transformers" not in sys.modules  # enable() never imports it
    import transformers  # imported after enable(): wrapped by the post-import hook

    model, seen = _make_model(torch, transformers)
    model.generate()
    assert seen == ["generation"]  # the forward inside generate() did not switch to inference

    with torch.no_grad():
        model()
    assert phasealloc.current_phase() == "inference"
    model()
    assert phasealloc.current_phase() == "training"

    inside = []
    torch.autograd._on_backward.append(lambda: inside.append(phasealloc.current_phase()))
    phasealloc.set_phase("elsewhere")  # an explicit set: the next detection point sets its phase again
    torch.Tensor().backward()
    torch.autograd.backward(torch.Tensor())
    assert inside == ["training", "training"]

    opt = torch.optim.AdamW()
    opt.step()
    assert opt.steps == 1 and phasealloc.current_phase() == "optimizer"

    # Explicit phases override detection.
    seen.clear()
    with phasealloc.phase("custom"):
        model.generate()
        with torch.no_grad():
            model()
        opt.step()
        torch.Tensor().backward()
        assert phasealloc.current_phase() == "custom"
    assert seen == ["custom", "custom"]
    assert phasealloc.current_phase() == "optimizer"  # back to the detected phase
    torch.autograd._on_backward.clear()


def test_vllm_detection_when_imported_before_enable(fresh):
    phasealloc, torch = fresh
    import vllm  # before enable(): wrapped at enable()

    assert phasealloc.enable(library=LIBRARY) is True
    llm = vllm.LLM()
    llm.wake_up()
    llm.generate(["p"])
    llm.chat([])
    llm.sleep()
    assert llm.observed == [("wake_up", "generation"), ("generate", "generation"), ("generate", "generation"),
                            ("sleep", "generation")]
    assert phasealloc.current_phase() == "sleep"


def test_observers_are_told_each_detected_phase_without_the_allocator(fresh):
    phasealloc, torch = fresh
    import transformers
    import vllm
    from phasealloc import _phase_detect

    told = []
    _phase_detect.install()  # what a measuring harness does under PyTorch's allocator
    _phase_detect.add_observer(told.append)
    assert not phasealloc.is_enabled()
    model, _ = _make_model(torch, transformers)
    with torch.no_grad():
        model()
    model()
    model()  # the same phase again: not told twice
    torch.optim.AdamW().step()
    llm = vllm.LLM()
    llm.wake_up()
    llm.generate(["p"])
    llm.sleep()
    assert told == ["inference", "training", "optimizer", "generation", "sleep"]
    _phase_detect.remove_observer(told.append)
    model()
    assert len(told) == 5


def test_detection_install_is_idempotent_and_uninstall_restores(enabled):
    phasealloc, torch = enabled
    import transformers
    from phasealloc import _phase_detect

    wrapped = transformers.GenerationMixin.__dict__["generate"]
    original = wrapped.__phasealloc_original__
    _phase_detect.install()
    _phase_detect._installed = False
    _phase_detect.install()  # a second pass must not wrap the wrapper
    assert transformers.GenerationMixin.__dict__["generate"].__phasealloc_original__ is original
    hooks = torch.nn.modules.module._global_forward_pre_hooks
    assert len(hooks) == 2
    _phase_detect.uninstall()
    _phase_detect.uninstall()
    assert transformers.GenerationMixin.__dict__["generate"] is original
    assert len(hooks) == 0
    assert not torch.optim.optimizer._global_optimizer_pre_hooks


def test_detection_waits_for_modules_that_are_never_imported(enabled):
    phasealloc, torch = enabled
    from phasealloc import _import_hooks

    assert "vllm.entrypoints.llm" in _import_hooks._callbacks
    assert "vllm" not in sys.modules


def test_known_limits_fail_clearly(enabled):
    phasealloc, torch = enabled
    with pytest.raises(RuntimeError, match="CUDA graph capture is not supported"):
        torch.cuda.CUDAGraph().capture_begin()
    with pytest.raises(RuntimeError, match="reduce-overhead"):
        with torch.cuda.graph(torch.cuda.CUDAGraph()):
            pass
    assert torch.cuda.CUDAGraph.captures == 0
    with pytest.raises(RuntimeError, match="CUDA IPC"):
        torch.UntypedStorage()._share_cuda_()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with torch.cuda.use_mem_pool(object()):
            pass
        with torch.cuda.use_mem_pool(object()):
            pass
    assert sum("use_mem_pool is not honoured" in str(w.message) for w in caught) == 1


def test_cudnn_benchmark_warning(fresh):
    phasealloc, torch = fresh
    torch.backends.cudnn.benchmark = True
    with pytest.warns(RuntimeWarning, match="cudnn.benchmark"):
        phasealloc.enable(library=LIBRARY)


def test_stats_summary_and_trace_from_the_package(enabled, tmp_path):
    phasealloc, torch = enabled
    with phasealloc.trace(str(tmp_path / "pkg.%p.%d.txt")):
        with phasealloc.phase("traced"):
            torch.cuda._test_free(torch.cuda._test_malloc(1 << 20), 1 << 20)
    assert (tmp_path / ("pkg.%d.%d.txt" % (os.getpid(), DEVICE))).exists()
    text = phasealloc.summary(DEVICE)
    assert "traced" in text and "peak reserved" in text and "fragmentation" in text
    everything = phasealloc.summary()
    assert "device %d" % DEVICE in everything
    assert phasealloc.stats(-1)["devices"][str(DEVICE)]["phasealloc"]["engine"] is True
    phasealloc.empty_cache()
