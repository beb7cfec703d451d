#include "phasealloc/synth/synthesize.hpp"

#include <fmt/format.h>

#include <string>
#include <vector>

#include "phasealloc/synth/job_conf.hpp"
#include "rollout_plan.hpp"
#include "synth_context.hpp"

namespace phasealloc {
namespace detail::synth {
namespace {

void describe(trace_metadata& meta, const rlhf_job& job, const std::vector<iteration_shape>& plan,
              const model_set& models, std::size_t peak_live_bytes) {
  meta.source = fmt::format("phasealloc synth {} (seed {})", job.name, job.seed);
  meta.device_capacity_bytes = job.device_capacity_bytes;
  for (std::uint32_t tag = alloc_tag_first; tag <= alloc_tag_last; ++tag) {
    set_property(meta, fmt::format("tag.{}", tag), to_string(static_cast<alloc_tag>(tag)));
  }
  set_property(meta, "synth.job", to_conf(job));
  set_property(meta, "synth.preset", job.name);
  set_property(meta, "synth.seed", fmt::format("{}", job.seed));
  for (const model_state& m : models) {
    set_property(meta, fmt::format("synth.{}.params", to_string(m.role)), fmt::format("{}", m.layout.total_numel()));
  }
  for (std::size_t i = 0; i < plan.size(); ++i) {
    std::string calls;
    for (const generate_call& c : plan[i].calls) {
      calls += fmt::format("{}{}x{}", calls.empty() ? "" : "+", c.sequences, c.new_tokens);
    }
    set_property(meta, fmt::format("synth.iteration.{}", i + 1),
                 fmt::format("prompt_len={},response_len={},generate={}", plan[i].prompt_len, plan[i].response_len,
                             calls));
  }
  set_property(meta, "synth.peak_live_bytes", fmt::format("{}", peak_live_bytes));
}

}  // namespace
}  // namespace detail::synth

result<trace, std::string> synthesize(const rlhf_job& job) {
  using namespace detail::synth;
  if (auto valid = validate_job(job); !valid) return valid.error();
  const std::vector<iteration_shape> plan = plan_rollouts(job);
  trace_builder builder(job.max_events);
  const cost_model cost;
  model_set models = make_models(job);
  synth_context ctx{builder, cost, job, models, {}};
  load_models(builder, cost, models);
  for (const iteration_shape& shape : plan) {
    run_generation(ctx, shape);
    run_inference(ctx, shape);
    run_training(ctx, shape);
    if (builder.overflowed()) {
      return fmt::format("job '{}' needs more than max_events = {} events; lower iterations, gen_len or batch "
                         "(or raise max_events)",
                         job.name, job.max_events);
    }
  }
  const std::size_t peak = builder.peak_live_bytes();
  trace t = builder.take();
  describe(t.meta, job, plan, models, peak);
  return t;
}

}  // namespace phasealloc
