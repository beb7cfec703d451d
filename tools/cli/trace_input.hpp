// Loads a trace from whatever the user points at: a phasealloc trace (binary or text), a PyTorch
// memory snapshot pickle, a PyTorch profiler (Kineto) JSON, an RMM log CSV, or "synth:<job>" for
// a synthesized RLHF trace (e.g. "synth:ppo-1.3b" or "synth:preset:ppo-7b,batch:8").
#pragma once

#include <string>
#include <string_view>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_format.hpp"

namespace phasealloc::cli {

result<trace, std::string> load_any_trace(std::string_view source);

/// A short display name for a source (the file name, or the synth spec).
std::string display_name(std::string_view source);

}  // namespace phasealloc::cli
