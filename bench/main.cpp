// phasealloc_bench: every allocation-pattern suite, each pattern run for each allocator.
//
//   phasealloc_bench [--allocators='phasealloc;pytorch;glibc'] [--check] [Google Benchmark flags]
//   phasealloc_torch_bench [--allocators='capi;torch;phasealloc;glibc'] ...   (on a CUDA device)
//
// phasealloc_torch_bench is the same binary built with PyTorch's allocator and phasealloc's C entry
// point (device_allocators.hpp): "torch" and "capi[:SPEC]" name them in --allocators.
// --allocators takes policy specs separated by ';' (a spec's own configuration uses ','), e.g.
// --allocators='pytorch;pytorch:expandable_segments:True;glibc'. "glibc" is malloc/free.
// --check runs the engines in strict mode with the invariant checker after every operation: it
// verifies that the patterns use the engine correctly (slow; not for timing).
#include "alloc_patterns.hpp"

int main(int argc, char** argv) {
  using namespace phasealloc::bench;
  constexpr std::string_view flag = "--allocators=";
  int kept = 1;
  bool allocators_given = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    if (arg.substr(0, flag.size()) == flag) {
      set_chosen_allocators(parse_allocators(arg.substr(flag.size())));
      allocators_given = true;
    } else if (arg == "--check") {
      set_checked_engines(true);
    } else {
      argv[kept++] = argv[i];
    }
  }
  argc = kept;

#ifdef PHASEALLOC_BENCH_DEVICE_ALLOCATORS
  if (!allocators_given) set_chosen_allocators(parse_allocators("capi;torch;phasealloc;glibc"));
#endif
  (void)allocators_given;
  register_hot_path();
  register_mixed();
  register_batch();
  register_kv_cache();
  register_rlhf_phases();
  register_pr193400();
  register_concurrency();

  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::AddCustomContext("build_type", PHASEALLOC_BENCH_BUILD_TYPE);
  benchmark::AddCustomContext("compiler", PHASEALLOC_BENCH_COMPILER);
  benchmark::AddCustomContext("allocators", [] {
    std::string names;
    for (const allocator_choice& c : chosen_allocators()) names += (names.empty() ? "" : ";") + c.name;
    return names;
  }());
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
