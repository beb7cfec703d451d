#include "synth_context.hpp"

namespace phasealloc::detail::synth {

void enter_phase(synth_context& ctx, std::string_view name) {
  if (ctx.job.empty_cache_at_phases) ctx.builder.empty_cache();
  ctx.builder.phase(name);
}

void replace(graph& g, tensor& slot, tensor fresh) {
  tensor old = slot;
  slot = fresh;
  g.drop(old);
}

}  // namespace phasealloc::detail::synth
