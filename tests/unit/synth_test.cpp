#include "phasealloc/synth/synth.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "phasealloc/trace/trace_binary.hpp"
#include "phasealloc/trace/trace_summary.hpp"
#include "phasealloc/trace/trace_validate.hpp"
#include "synth_test_support.hpp"

namespace phasealloc {
namespace {

using ::testing::HasSubstr;
using namespace synth_test;

// A small job every structural test can afford: two iterations of a 2-layer model.
constexpr std::string_view small_job =
    "preset:ppo-125m,iterations:2,batch:4,generation_batch:2,prompt_len:16,gen_len:8,micro_batch:2,"
    "inference_micro_batch:2,ppo_epochs:2,models.layers:2";





// The phase names in event order ("" for events before the first phase).
std::vector<std::string> phase_sequence(const trace& t) {
  std::vector<std::string> names;
  for (const trace_event& e : t.events) {
    if (e.op == trace_event_op::phase) names.push_back(t.strings[e.name]);
  }
  return names;
}

// The phase each event belongs to (index into phase_sequence, -1 before the first).
std::vector<int> phase_index_of_events(const trace& t) {
  std::vector<int> index(t.events.size(), -1);
  int current = -1;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    if (t.events[i].op == trace_event_op::phase) ++current;
    index[i] = current;
  }
  return index;
}

std::map<std::uint64_t, std::uint32_t> tags_by_id(const trace& t) {
  std::map<std::uint64_t, std::uint32_t> tags;
  for (const trace_event& e : t.events) {
    if (e.op == trace_event_op::alloc) tags[e.alloc_id] = e.tag;
  }
  return tags;
}

std::uint64_t peak_live_bytes(const trace& t) { return summarize(t).peak_live_bytes; }


std::uint64_t param_bytes(const model_desc& d, model_role role) {
  return parameter_count(d, role) * d.bytes_per_param;
}

// "prompt_len=..,response_len=..,generate=2x7+2x8" -> {{2, 7}, {2, 8}}
std::vector<std::pair<std::size_t, std::size_t>> generate_calls(const trace& t, std::size_t iteration) {
  const std::string* shape = find_property(t.meta, "synth.iteration." + std::to_string(iteration));
  EXPECT_NE(shape, nullptr);
  std::vector<std::pair<std::size_t, std::size_t>> calls;
  if (shape == nullptr) return calls;
  std::string rest = shape->substr(shape->find("generate=") + 9);
  while (!rest.empty()) {
    const std::size_t plus = rest.find('+');
    const std::string call = rest.substr(0, plus);
    const std::size_t x = call.find('x');
    calls.emplace_back(std::stoul(call.substr(0, x)), std::stoul(call.substr(x + 1)));
    rest = plus == std::string::npos ? "" : rest.substr(plus + 1);
  }
  return calls;
}

TEST(SynthPresetTest, EveryPresetValidatesAndStaysReasonable) {
  ASSERT_GE(preset_names().size(), 4u);
  for (std::string_view name : preset_names()) {
    SCOPED_TRACE(std::string(name));
    auto job = preset(name);
    ASSERT_TRUE(job.has_value()) << job.error();
    EXPECT_EQ(job.value().name, name);
    const trace t = synth(job.value());
    auto valid = validate(t);
    EXPECT_TRUE(valid.has_value()) << valid.error().message();
    EXPECT_GT(t.events.size(), 10'000u);
    EXPECT_LE(t.events.size(), 5'000'000u);
    EXPECT_LT(peak_live_bytes(t), t.meta.device_capacity_bytes) << "the preset must fit its device";
    for (std::uint32_t tag = alloc_tag_first; tag <= alloc_tag_last; ++tag) {
      const std::string* recorded = find_property(t.meta, "tag." + std::to_string(tag));
      ASSERT_NE(recorded, nullptr);
      EXPECT_EQ(*recorded, to_string(static_cast<alloc_tag>(tag)));
    }
    ASSERT_NE(find_property(t.meta, "synth.job"), nullptr);
  }
}

TEST(SynthPresetTest, DefaultPresetIsSmallEnoughToBundle) {
  auto job = preset(default_preset_name);
  ASSERT_TRUE(job.has_value());
  const trace t = synth(job.value());
  EXPECT_LT(encode_trace(t).size(), 5'000'000u);
}

TEST(SynthPresetTest, UnknownPresetListsTheNames) {
  auto job = preset("ppo-70b");
  ASSERT_FALSE(job.has_value());
  EXPECT_THAT(job.error(), HasSubstr("ppo-70b"));
  EXPECT_THAT(job.error(), HasSubstr("ppo-125m"));
}

TEST(SynthTest, SameSeedSameTraceOtherSeedOtherTrace) {
  const trace a = synth(small_job);
  const trace b = synth(small_job);
  EXPECT_TRUE(a == b);
  const trace c = synth(std::string(small_job) + ",seed:2");
  EXPECT_FALSE(a.events == c.events);
  EXPECT_TRUE(validate(c).has_value());
}

TEST(SynthTest, RolloutShapesVaryAcrossIterations) {
  const trace t = synth("preset:ppo-125m,iterations:6,batch:4,micro_batch:2,models.layers:1,gen_len:64");
  std::set<std::string> shapes;
  for (std::size_t i = 1; i <= 6; ++i) {
    const std::string* shape = find_property(t.meta, "synth.iteration." + std::to_string(i));
    ASSERT_NE(shape, nullptr);
    shapes.insert(*shape);
  }
  EXPECT_GT(shapes.size(), 1u);
}

TEST(SynthTest, FourPhasesInOrderEveryIteration) {
  // batch 4, mini_batch 2, 2 epochs: 4 optimizer steps per iteration.
  const trace t = synth(std::string(small_job) + ",mini_batch:2");
  std::vector<std::string> expected;
  for (int it = 0; it < 2; ++it) {
    expected.insert(expected.end(), {"generation", "inference"});
    for (int step = 0; step < 4; ++step) expected.insert(expected.end(), {"training", "optimizer"});
  }
  EXPECT_EQ(phase_sequence(t), expected);
}

TEST(SynthTest, SetupHappensBeforeTheFirstPhase) {
  const trace t = synth(small_job);
  ASSERT_FALSE(t.events.empty());
  EXPECT_EQ(t.events.front().op, trace_event_op::alloc);
  EXPECT_EQ(t.events.front().tag, tag_of(alloc_tag::parameter));
}

// For every generate() call: 2 * layers tag-4 allocations at prefill (the prompt's K and V),
// then 2 * layers per decode step, each one token longer than the step before.
void expect_kv_grows_by_one_token(std::string_view conf, std::size_t kv_heads) {
  const rlhf_job job = job_of(conf);
  const trace t = synth(job);
  const std::size_t layers = job.actor.layers;
  const std::vector<int> phase_of = phase_index_of_events(t);
  const std::vector<std::string> phases = phase_sequence(t);
  std::size_t iteration = 0;
  for (int p = 0; p < static_cast<int>(phases.size()); ++p) {
    if (phases[p] != "generation") continue;
    ++iteration;
    std::vector<std::uint64_t> sizes;
    for (std::size_t i = 0; i < t.events.size(); ++i) {
      const trace_event& e = t.events[i];
      if (phase_of[i] == p && e.op == trace_event_op::alloc && e.tag == tag_of(alloc_tag::kv_cache)) {
        sizes.push_back(e.bytes);
      }
    }
    std::size_t at = 0;
    for (const auto& [sequences, new_tokens] : generate_calls(t, iteration)) {
      const std::uint64_t per_token = sequences * kv_heads * job.actor.head_dim() * job.actor.bytes_per_param;
      ASSERT_LE(at + new_tokens * 2 * layers, sizes.size());
      const std::uint64_t prefill = sizes[at];
      ASSERT_EQ(prefill % per_token, 0u);
      for (std::size_t step = 0; step < new_tokens; ++step) {
        for (std::size_t k = 0; k < 2 * layers; ++k) {
          EXPECT_EQ(sizes[at++], prefill + step * per_token) << "call step " << step << " tensor " << k;
        }
      }
    }
    EXPECT_EQ(at, sizes.size());
  }
  EXPECT_EQ(iteration, job.iterations);
}

TEST(SynthTest, KvCacheGrowsByOneTokenPerDecodeStep) {
  expect_kv_grows_by_one_token(small_job, 12);
}

TEST(SynthTest, GroupedQueryKvCacheGrowsByOneTokenPerDecodeStep) {
  expect_kv_grows_by_one_token(std::string(small_job) + ",models.family:llama,models.kv_heads:4,flash_attention:true",
                               4);
}

TEST(SynthTest, KvCacheIsFreedWhenGenerationEnds) {
  const trace t = synth(small_job);
  const std::vector<int> phase_of = phase_index_of_events(t);
  const std::vector<std::string> phases = phase_sequence(t);
  std::set<std::uint64_t> live_kv;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const trace_event& e = t.events[i];
    if (e.op == trace_event_op::phase && !phases.empty() && phase_of[i] > 0 && phases[phase_of[i] - 1] == "generation") {
      EXPECT_TRUE(live_kv.empty()) << "at event " << i;
    }
    if (e.op == trace_event_op::alloc && e.tag == tag_of(alloc_tag::kv_cache)) live_kv.insert(e.alloc_id);
    if (e.op == trace_event_op::free) live_kv.erase(e.alloc_id);
  }
}

TEST(SynthTest, ParametersAreLoadedOnceAndNeverFreed) {
  for (std::string_view conf : {small_job, std::string_view("preset:ppo-1.3b-offload,iterations:1,gen_len:8,"
                                                            "prompt_len:16,models.layers:2")}) {
    SCOPED_TRACE(std::string(conf));
    const rlhf_job job = job_of(conf);
    const trace t = synth(job);
    const auto tags = tags_by_id(t);
    std::uint64_t bytes = 0;
    for (const trace_event& e : t.events) {
      if (e.op == trace_event_op::alloc && e.tag == tag_of(alloc_tag::parameter)) bytes += e.bytes;
      if (e.op == trace_event_op::free) {
        EXPECT_NE(tags.at(e.alloc_id), tag_of(alloc_tag::parameter));
      }
    }
    std::uint64_t expected = param_bytes(job.actor, model_role::actor) + param_bytes(job.critic, model_role::critic);
    if (!job.offload_params) {
      expected += param_bytes(job.reference, model_role::reference) + param_bytes(job.reward, model_role::reward);
    }
    EXPECT_EQ(bytes, expected);
  }
}

TEST(SynthTest, GradientsAreFreedAtEveryOptimizerStep) {
  const trace t = synth(std::string(small_job) + ",mini_batch:2");
  const auto tags = tags_by_id(t);
  const std::vector<std::string> phases = phase_sequence(t);
  std::set<std::uint64_t> live_grads;
  std::string current;
  std::size_t steps_checked = 0;
  std::size_t grads_in_training = 0;
  for (const trace_event& e : t.events) {
    if (e.op == trace_event_op::phase) {
      if (current == "optimizer") {
        EXPECT_TRUE(live_grads.empty());
        ++steps_checked;
      }
      current = t.strings[e.name];
    } else if (e.op == trace_event_op::alloc && e.tag == tag_of(alloc_tag::gradient)) {
      live_grads.insert(e.alloc_id);
      if (current == "training") ++grads_in_training;
    } else if (e.op == trace_event_op::free) {
      live_grads.erase(e.alloc_id);
    }
  }
  EXPECT_TRUE(live_grads.empty()) << "zero_grad(set_to_none=True) at the last step";
  EXPECT_EQ(steps_checked + 1, static_cast<std::size_t>(std::count(phases.begin(), phases.end(), "optimizer")));
  EXPECT_GT(grads_in_training, 0u);
}

TEST(SynthTest, AdamStatesAreCreatedOnceAtTheFirstStep) {
  const rlhf_job job = job_of(small_job);
  const trace t = synth(job);
  const auto tags = tags_by_id(t);
  const std::vector<int> phase_of = phase_index_of_events(t);
  const std::vector<std::string> phases = phase_sequence(t);
  const int first_step = static_cast<int>(std::find(phases.begin(), phases.end(), "optimizer") - phases.begin());
  const std::uint64_t trained = parameter_count(job.actor, model_role::actor) +
                                parameter_count(job.critic, model_role::critic);
  std::uint64_t master_bytes = 0;
  std::uint64_t state_bytes = 0;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const trace_event& e = t.events[i];
    if (e.op == trace_event_op::free) {
      EXPECT_NE(tags.at(e.alloc_id), tag_of(alloc_tag::optimizer_state));
    }
    if (e.op != trace_event_op::alloc || e.tag != tag_of(alloc_tag::optimizer_state)) continue;
    if (phase_of[i] < 0) {
      master_bytes += e.bytes;
    } else {
      EXPECT_EQ(phase_of[i], first_step) << "optimizer state allocated after the first step, event " << i;
      state_bytes += e.bytes;
    }
  }
  EXPECT_EQ(master_bytes, trained * 4) << "fp32 master weights at setup";
  EXPECT_EQ(state_bytes, trained * 8) << "fp32 exp_avg + exp_avg_sq";
}

TEST(SynthTest, WithoutMastersAdamStatesTakeTheParamDtype) {
  const rlhf_job job = job_of(std::string(small_job) + ",master_weights:false");
  const trace t = synth(job);
  std::uint64_t state_bytes = 0;
  for (const trace_event& e : t.events) {
    if (e.op == trace_event_op::alloc && e.tag == tag_of(alloc_tag::optimizer_state)) state_bytes += e.bytes;
  }
  const std::uint64_t trained = parameter_count(job.actor, model_role::actor) +
                                parameter_count(job.critic, model_role::critic);
  EXPECT_EQ(state_bytes, trained * 2 * job.actor.bytes_per_param);
}

TEST(SynthTest, OffloadedOptimizerStreamsChunksEveryStep) {
  const rlhf_job job = job_of(std::string(small_job) + ",offload_optimizer:true,offload_chunk_bytes:8MiB");
  const trace t = synth(job);
  EXPECT_TRUE(validate(t).has_value());
  EXPECT_EQ(t.meta.stream_count, 2u);
  const std::vector<int> phase_of = phase_index_of_events(t);
  const std::vector<std::string> phases = phase_sequence(t);
  std::map<int, std::size_t> chunks_per_step;
  std::set<std::uint64_t> live_chunks;
  std::set<std::uint64_t> recorded;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const trace_event& e = t.events[i];
    EXPECT_FALSE(e.op == trace_event_op::alloc && e.tag == tag_of(alloc_tag::optimizer_state));
    if (e.op == trace_event_op::alloc && e.tag == tag_of(alloc_tag::offload_chunk)) {
      EXPECT_EQ(phases[phase_of[i]], "optimizer");
      ++chunks_per_step[phase_of[i]];
      live_chunks.insert(e.alloc_id);
    }
    if (e.op == trace_event_op::record_stream) recorded.insert(e.alloc_id);
    if (e.op == trace_event_op::free) live_chunks.erase(e.alloc_id);
    if (e.op == trace_event_op::phase) {
      EXPECT_TRUE(live_chunks.empty());
    }
  }
  EXPECT_EQ(chunks_per_step.size(), static_cast<std::size_t>(std::count(phases.begin(), phases.end(), "optimizer")));
  EXPECT_FALSE(recorded.empty());
}

TEST(SynthTest, OffloadedParamsStreamPerLayerOnTheCopyStream) {
  const rlhf_job job = job_of("preset:ppo-1.3b-offload,iterations:1,gen_len:8,prompt_len:16,models.layers:3");
  const trace t = synth(job);
  const std::vector<int> phase_of = phase_index_of_events(t);
  const std::vector<std::string> phases = phase_sequence(t);
  std::set<std::uint64_t> inference_chunks;
  std::set<std::uint64_t> recorded_on_compute;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const trace_event& e = t.events[i];
    if (e.op == trace_event_op::alloc && e.tag == tag_of(alloc_tag::offload_chunk) && phase_of[i] >= 0 &&
        phases[phase_of[i]] == "inference") {
      EXPECT_EQ(e.stream, 1u);
      inference_chunks.insert(e.alloc_id);
    }
    if (e.op == trace_event_op::record_stream && e.stream == 0) recorded_on_compute.insert(e.alloc_id);
  }
  // reference and reward: (embeddings + 3 layers + head) chunks per scoring forward, 2 micro-batches.
  EXPECT_EQ(inference_chunks.size(), 2u * 2u * (1 + 3 + 1));
  for (std::uint64_t id : inference_chunks) EXPECT_TRUE(recorded_on_compute.count(id)) << id;
}

TEST(SynthTest, EmptyCacheAtPhasesIsOptIn) {
  auto count = [](const trace& t, trace_event_op op) {
    return std::count_if(t.events.begin(), t.events.end(), [&](const trace_event& e) { return e.op == op; });
  };
  const trace plain = synth(small_job);
  EXPECT_EQ(count(plain, trace_event_op::empty_cache), 0);
  const trace sprinkled = synth(std::string(small_job) + ",empty_cache_at_phases:true");
  EXPECT_EQ(count(sprinkled, trace_event_op::empty_cache), count(sprinkled, trace_event_op::phase));
  for (std::size_t i = 1; i < sprinkled.events.size(); ++i) {
    if (sprinkled.events[i].op == trace_event_op::phase) {
      EXPECT_EQ(sprinkled.events[i - 1].op, trace_event_op::empty_cache);
    }
  }
}

TEST(SynthTest, TimeAdvancesThroughEveryPhase) {
  const trace t = synth(small_job);
  std::uint64_t last = 0;
  std::uint64_t phase_start = 0;
  for (const trace_event& e : t.events) {
    EXPECT_GE(e.time_ns, last);
    last = e.time_ns;
    if (e.op == trace_event_op::phase) {
      EXPECT_GT(e.time_ns, phase_start);
      phase_start = e.time_ns;
    }
  }
}

TEST(SynthTest, PeakLiveBytesScaleWithModelSize) {
  const std::string shape = "iterations:1,gen_len:16,prompt_len:32,batch:4,micro_batch:2";
  const std::uint64_t narrow = peak_live_bytes(synth("preset:ppo-125m," + shape));
  const std::uint64_t wide = peak_live_bytes(synth("preset:ppo-125m,models.hidden:1536,models.ffn_hidden:6144," + shape));
  const std::uint64_t deep = peak_live_bytes(synth("preset:ppo-125m,models.layers:24," + shape));
  EXPECT_GT(wide, narrow * 3 / 2);
  EXPECT_GT(deep, narrow * 3 / 2);

  // Resident AdamW training costs ~16 bytes per trained parameter (bf16 param and grad, fp32
  // master, exp_avg, exp_avg_sq); frozen models add their bf16 weights.
  const rlhf_job job = job_of("preset:ppo-1.3b," + shape);
  const std::uint64_t trained = parameter_count(job.actor, model_role::actor) +
                                parameter_count(job.critic, model_role::critic);
  const std::uint64_t frozen = param_bytes(job.reference, model_role::reference) +
                               param_bytes(job.reward, model_role::reward);
  const std::uint64_t big = peak_live_bytes(synth(job));
  EXPECT_GT(big, trained * 16 + frozen);
  EXPECT_LT(big, trained * 32 + frozen);
  EXPECT_GT(big, narrow * 4);

  const std::uint64_t offloaded = peak_live_bytes(synth("preset:ppo-1.3b-offload," + shape));
  EXPECT_LT(offloaded, big / 2);
}

TEST(SynthTest, SevenBillionFitsEightyGigabytesOnlyWithOffload) {
  const std::string shape = ",iterations:1,gen_len:8,batch:4,inference_micro_batch:2";
  const std::uint64_t offloaded = peak_live_bytes(synth("preset:ppo-7b" + shape));
  EXPECT_LT(offloaded, std::uint64_t{80} << 30);
  const rlhf_job resident = job_of("preset:ppo-7b,offload_optimizer:false,offload_params:false" + shape);
  EXPECT_GT(peak_live_bytes(synth(resident)), parameter_count(resident.actor, model_role::actor) * 16);
}

TEST(SynthTest, GradientCheckpointingLowersTheTrainingPeak) {
  const std::string job = "preset:ppo-125m,iterations:1,gen_len:64,prompt_len:256,batch:4,micro_batch:4";
  const auto training_peak = [](const trace& t) { return phase_peak(t, "training"); };
  EXPECT_LT(training_peak(synth(job + ",gradient_checkpointing:true")), training_peak(synth(job)));
  EXPECT_LT(training_peak(synth(job + ",flash_attention:true")), training_peak(synth(job)));
}

TEST(SynthModelTest, ParameterCountsMatchTheRealModels) {
  rlhf_job seven = preset("ppo-7b").value();
  EXPECT_EQ(parameter_count(seven.actor, model_role::actor), 6'738'415'616u);  // Llama-2-7b
  rlhf_job small = preset("ppo-125m").value();
  EXPECT_EQ(parameter_count(small.actor, model_role::actor), 125'239'296u);    // OPT-125m
  rlhf_job one = preset("ppo-1.3b").value();
  EXPECT_EQ(parameter_count(one.actor, model_role::actor), 1'315'758'080u);    // OPT-1.3b
}

TEST(SynthJobTest, ParseJobStartsFromAPresetAndOverrides) {
  auto job = parse_job(
      "preset:ppo-1.3b,batch:32,gen_len:64,iterations:3,gradient_checkpointing:true,actor.layers:4,"
      "models.vocab:1000,seed:9,offload_chunk_bytes:32MiB,reward.family:llama");
  ASSERT_TRUE(job.has_value()) << job.error();
  const rlhf_job& j = job.value();
  const rlhf_job base = preset("ppo-1.3b").value();
  EXPECT_EQ(j.name, "ppo-1.3b");
  EXPECT_EQ(j.batch, 32u);
  EXPECT_EQ(j.gen_len, 64u);
  EXPECT_EQ(j.iterations, 3u);
  EXPECT_TRUE(j.gradient_checkpointing);
  EXPECT_EQ(j.actor.layers, 4u);
  EXPECT_EQ(j.critic.layers, base.critic.layers);
  for (model_role role : {model_role::actor, model_role::critic, model_role::reference, model_role::reward}) {
    EXPECT_EQ(model_of(j, role).vocab, 1000u);
  }
  EXPECT_EQ(j.reward.family, model_family::llama);
  EXPECT_EQ(j.seed, 9u);
  EXPECT_EQ(j.offload_chunk_bytes, std::size_t{32} << 20);
  EXPECT_EQ(j.prompt_len, base.prompt_len);
  EXPECT_EQ(j.micro_batch, base.micro_batch);
}

TEST(SynthJobTest, ParseJobDefaultsToTheDefaultPreset) {
  auto job = parse_job("");
  ASSERT_TRUE(job.has_value()) << job.error();
  EXPECT_EQ(job.value().name, default_preset_name);
}

TEST(SynthJobTest, ParseJobTakesABarePresetName) {
  auto bare = parse_job("ppo-7b");
  ASSERT_TRUE(bare.has_value()) << bare.error();
  EXPECT_EQ(to_conf(bare.value()), to_conf(preset("ppo-7b").value()));
  auto with_overrides = parse_job("ppo-1.3b, batch:32,iterations:1");
  ASSERT_TRUE(with_overrides.has_value()) << with_overrides.error();
  EXPECT_EQ(with_overrides.value().name, "ppo-1.3b");
  EXPECT_EQ(with_overrides.value().batch, 32u);
  EXPECT_THAT(parse_job("ppo-7b,preset:ppo-125m").error(), HasSubstr("twice"));
  EXPECT_THAT(parse_job("ppo-70b").error(), HasSubstr("ppo-70b"));
}

TEST(SynthJobTest, PhaseNamesAreTheFourRlhfPhases) {
  EXPECT_EQ(rlhf_phase::generation, "generation");
  EXPECT_EQ(rlhf_phase::inference, "inference");
  EXPECT_EQ(rlhf_phase::training, "training");
  EXPECT_EQ(rlhf_phase::optimizer, "optimizer");
}

TEST(SynthJobTest, ParseJobErrorsNameTheKey) {
  EXPECT_THAT(parse_job("preset:ppo-125m,bacth:4").error(), HasSubstr("'bacth'"));
  EXPECT_THAT(parse_job("actor.layerz:4").error(), HasSubstr("'actor.layerz'"));
  EXPECT_THAT(parse_job("batch:many").error(), HasSubstr("'batch'"));
  EXPECT_THAT(parse_job("offload_params:maybe").error(), HasSubstr("'offload_params'"));
  EXPECT_THAT(parse_job("actor.family:gpt").error(), HasSubstr("'actor.family'"));
  EXPECT_THAT(parse_job("preset:ppo-70b").error(), HasSubstr("'preset'"));
  EXPECT_THAT(parse_job("micro_batch:3").error(), HasSubstr("micro_batch"));
  EXPECT_THAT(parse_job("critic.heads:7").error(), HasSubstr("critic.heads"));
  EXPECT_THAT(parse_job("gen_len:4096").error(), HasSubstr("max_positions"));
  EXPECT_THAT(parse_job("batch:4,micro").error(), HasSubstr("micro"));
}

TEST(SynthJobTest, ToConfRoundTrips) {
  for (std::string_view name : preset_names()) {
    const rlhf_job job = preset(name).value();
    auto back = parse_job(to_conf(job));
    ASSERT_TRUE(back.has_value()) << back.error();
    EXPECT_EQ(to_conf(back.value()), to_conf(job));
    EXPECT_EQ(back.value().name, job.name);
  }
  const rlhf_job custom = job_of(std::string(small_job) + ",seed:77,models.family:llama,models.kv_heads:4");
  EXPECT_EQ(to_conf(job_of(to_conf(custom))), to_conf(custom));
}

TEST(SynthJobTest, SynthesizeRejectsAnInvalidJob) {
  rlhf_job job = preset("ppo-125m").value();
  job.micro_batch = 0;
  auto t = synthesize(job);
  ASSERT_FALSE(t.has_value());
  EXPECT_THAT(t.error(), HasSubstr("micro_batch"));
}

TEST(SynthJobTest, SynthesizeRefusesAJobOverItsEventBudget) {
  auto t = synthesize(job_of(std::string(small_job) + ",max_events:1000"));
  ASSERT_FALSE(t.has_value());
  EXPECT_THAT(t.error(), HasSubstr("max_events"));
}

}  // namespace
}  // namespace phasealloc
