// The job knobs that describe how real RLHF code differs from DeepSpeed-Chat's:
// each moves the phase it should, in the direction it should.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <string>
#include <string_view>

#include "phasealloc/synth/synth.hpp"
#include "synth_test_support.hpp"

namespace phasealloc {
namespace {

using ::testing::HasSubstr;
using namespace synth_test;

// The knobs that describe how rlhf_job.py-style code differs from DeepSpeed-Chat's: each moves the
// phase it should, in the direction it should.
constexpr std::string_view knob_job =
    "preset:ppo-125m,iterations:1,batch:4,generation_batch:4,prompt_len:64,gen_len:32,micro_batch:4,"
    "mini_batch:4,inference_micro_batch:4,models.layers:2,master_weights:false";

TEST(SynthKnobTest, Gpt2NewGeluKeepsMoreForBackwardThanRelu) {
  const std::string job(knob_job);
  const std::uint64_t opt = phase_peak(synth(job), "training");
  const std::uint64_t gpt2 = phase_peak(synth(job + ",models.family:gpt2"), "training");
  // Four more ffn-wide bf16 tensors per layer (2 layers, 4 x 96 tokens, ffn 3072) for one trained
  // model at a time; most of that is on top of the ReLU job's training peak.
  const std::uint64_t per_model = 4ull * 2 * (4 * 96) * 3072 * 2;
  EXPECT_GE(gpt2, opt + per_model / 2);
  // Setup (before the first phase) loads the same parameters, but GPT-2's wpe has no OPT offset
  // of 2 rows: 4 models x 2 rows x 768 x 2 bytes fewer.
  EXPECT_EQ(phase_peak(synth(job + ",models.family:gpt2"), ""), phase_peak(synth(job), "") - 4ull * 2 * 768 * 2);
}

TEST(SynthKnobTest, ResponseLogprobsShrinkTheVocabTransients) {
  const std::string job(knob_job);
  EXPECT_LT(phase_peak(synth(job + ",response_logprobs:true"), "inference"), phase_peak(synth(job), "inference"));
  EXPECT_LT(phase_peak(synth(job + ",response_logprobs:true"), "training"), phase_peak(synth(job), "training"));
}

TEST(SynthKnobTest, DroppingTheModelOutputFreesTheCacheBeforeLogprobs) {
  const std::string job(knob_job);
  EXPECT_LT(phase_peak(synth(job + ",keep_model_output:false"), "inference"), phase_peak(synth(job), "inference"));
}

TEST(SynthKnobTest, JointBackwardHoldsBothModelsActivations) {
  const std::string job(knob_job);
  EXPECT_GT(phase_peak(synth(job + ",joint_backward:true"), "training"), phase_peak(synth(job), "training"));
}

TEST(SynthKnobTest, SharedOptimizerTakesTheSqrtListOfBothModelsAtOnce) {
  const std::string job(knob_job);
  EXPECT_GT(phase_peak(synth(job + ",shared_optimizer:true"), "optimizer"), phase_peak(synth(job), "optimizer"));
}

TEST(SynthKnobTest, WithoutACriticNothingOfItIsAllocated) {
  const std::string job(knob_job);
  const trace with = synth(job);
  const trace without = synth(job + ",with_critic:false");
  const rlhf_job j = job_of(job);
  const std::uint64_t critic_bytes = parameter_count(j.critic, model_role::critic) * 2;
  EXPECT_EQ(phase_peak(without, "") + critic_bytes, phase_peak(with, ""));  // setup, before the first phase
  EXPECT_LT(phase_peak(without, "optimizer"), phase_peak(with, "optimizer"));
}

TEST(SynthKnobTest, OffloadedReferenceMovesInWholeForItsForwardOnly) {
  const std::string job(knob_job);
  const rlhf_job j = job_of(job);
  const std::uint64_t reference_bytes = parameter_count(j.reference, model_role::reference) * 2;
  const trace resident = synth(job);
  const trace offloaded = synth(job + ",offload_reference:true");
  // Setup still builds it on the GPU (then moves it out); generation runs without it.
  EXPECT_EQ(phase_peak(offloaded, ""), phase_peak(resident, ""));
  EXPECT_EQ(phase_peak(offloaded, "generation") + reference_bytes, phase_peak(resident, "generation"));
  // Inference moves it in for its forward: its embedding table is allocated there, once per
  // scoring micro-batch (one here), and never in the resident job.
  const auto embedding_allocs = [](const trace& t) {
    std::size_t n = 0;
    std::string phase;
    for (const trace_event& e : t.events) {
      if (e.op == trace_event_op::phase) phase = t.strings[e.name];
      if (e.op == trace_event_op::alloc && phase == "inference" && e.bytes == 50272u * 768 * 2) ++n;
    }
    return n;
  };
  EXPECT_EQ(embedding_allocs(resident), 0u);
  EXPECT_EQ(embedding_allocs(offloaded), 1u);
  EXPECT_LE(phase_peak(offloaded, "inference"), phase_peak(resident, "inference"));
  EXPECT_THAT(parse_job(job + ",offload_reference:true,offload_params:true").error(), HasSubstr("offload_reference"));
}

TEST(SynthKnobTest, OptimizerStatesOnHostLeaveTheGpuBetweenSteps) {
  std::string job(knob_job);
  job.replace(job.find("iterations:1"), 12, "iterations:2");
  const rlhf_job j = job_of(job);
  const std::uint64_t states = 2 * 2 * (parameter_count(j.actor, model_role::actor) +
                                        parameter_count(j.critic, model_role::critic));
  const trace resident = synth(job);
  const trace on_host = synth(job + ",optimizer_states_on_host:true");
  // Live bytes as the second iteration's generation begins: the states are on the host.
  const auto live_at_second_generation = [](const trace& t) {
    std::map<std::uint64_t, std::uint64_t> live;
    std::uint64_t now = 0;
    int seen = 0;
    for (const trace_event& e : t.events) {
      if (e.op == trace_event_op::phase && t.strings[e.name] == "generation" && ++seen == 2) return now;
      if (e.op == trace_event_op::alloc) now += live[e.alloc_id] = e.bytes;
      if (e.op == trace_event_op::free) now -= live[e.alloc_id];
    }
    return std::uint64_t{0};
  };
  EXPECT_EQ(live_at_second_generation(on_host) + states, live_at_second_generation(resident));
  EXPECT_EQ(phase_peak(on_host, "optimizer"), phase_peak(resident, "optimizer"));
  EXPECT_THAT(parse_job(job + ",optimizer_states_on_host:true,offload_optimizer:true").error(),
              HasSubstr("optimizer_states_on_host"));
}

// Bytes of the allocations tagged `tag` made while `phase_name` runs ("" = setup).
std::uint64_t tagged_bytes(const trace& t, alloc_tag tag, std::string_view phase_name) {
  std::uint64_t bytes = 0;
  std::string phase;
  for (const trace_event& e : t.events) {
    if (e.op == trace_event_op::phase) phase = t.strings[e.name];
    if (e.op == trace_event_op::alloc && e.tag == tag_of(tag) && phase == phase_name) bytes += e.bytes;
  }
  return bytes;
}

TEST(SynthKnobTest, LoraTrainsOnlyFp32AdaptersAndSharesTheActorBase) {
  // opt shapes: 2 layers of hidden 768, adapters of rank 8 on q and v.
  const std::string job = std::string(knob_job) + ",lora_rank:8,lora_targets:[q,v]";
  const rlhf_job full = job_of(knob_job);
  const trace t = synth(job);
  const std::uint64_t base = parameter_count(full.actor, model_role::actor) * 2;
  const std::uint64_t critic = parameter_count(full.critic, model_role::critic) * 2;
  const std::uint64_t reward = parameter_count(full.reward, model_role::reward) * 2;
  const std::uint64_t adapters_per_model = 2 /*layers*/ * 2 /*q, v*/ * (768 * 8 + 8 * 768) * 4 /*fp32*/;
  // Setup: actor, critic and reward (no reference: it is the actor's base), then the adapters.
  EXPECT_EQ(tagged_bytes(t, alloc_tag::parameter, ""), base + critic + reward + 2 * adapters_per_model);
  // Gradients: the adapters (fp32) and the critic's value head (768 x 1, bf16), once per step.
  EXPECT_EQ(tagged_bytes(t, alloc_tag::gradient, "training"), full.ppo_epochs * (2 * adapters_per_model + 768 * 2));
  // AdamW states: two per trained tensor, in its dtype, created at the first step.
  EXPECT_EQ(tagged_bytes(t, alloc_tag::optimizer_state, "optimizer"), 2 * (2 * adapters_per_model + 768 * 2));
  EXPECT_THAT(parse_job(job + ",lora_targets:[q,attn]").error(), HasSubstr("lora_targets"));
}

TEST(SynthKnobTest, PrefillCacheCopyAllocatesTheCacheAtPrefill) {
  const std::string job(knob_job);
  // With the copy, the prefill's K and V are new kv_cache allocations (2 per layer per model
  // call) besides the projections; without it the projections become the cache.
  EXPECT_GT(tagged_bytes(synth(job + ",prefill_cache_copy:true"), alloc_tag::kv_cache, "inference"),
            tagged_bytes(synth(job), alloc_tag::kv_cache, "inference"));
}

TEST(SynthKnobTest, DropoutKeepsAMaskPerElementInTrainModeOnly) {
  const std::string job(knob_job);
  // Training: one byte per hidden element after the embeddings and each projection, kept.
  EXPECT_GT(phase_peak(synth(job + ",dropout:true"), "training"), phase_peak(synth(job), "training"));
  // Llama has no dropout layers: nothing changes.
  const std::string llama = job + ",models.family:llama,models.kv_heads:12";
  EXPECT_EQ(phase_peak(synth(llama + ",dropout:true"), "training"), phase_peak(synth(llama), "training"));
}

TEST(SynthKnobTest, RlhfJobPresetsRoundTripTheirKnobs) {
  for (std::string_view name : {"ppo-gpt2-small", "ppo-gpt2-1.3b", "grpo-gpt2-small", "grpo-gpt2-1.3b",
                                "ppo-gpt2-1.3b-offload-reference", "ppo-gpt2-small-offload-optimizer",
                                "ppo-gpt2-small-lora", "ppo-llama-7b-lora"}) {
    const rlhf_job p = preset(name).value();
    EXPECT_EQ(p.actor.family, name.find("llama") == std::string_view::npos ? model_family::gpt2 : model_family::llama)
        << name;
    EXPECT_TRUE(p.response_logprobs && p.joint_backward && p.shared_optimizer && !p.keep_model_output) << name;
    EXPECT_EQ(p.with_critic, name.substr(0, 3) == "ppo") << name;
    const rlhf_job back = job_of(to_conf(p));
    EXPECT_EQ(to_conf(back), to_conf(p)) << name;
  }
}

}  // namespace
}  // namespace phasealloc
