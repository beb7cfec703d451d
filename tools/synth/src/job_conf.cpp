#include "phasealloc/synth/job_conf.hpp"

#include <fmt/format.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "phasealloc/conf.hpp"
#include "phasealloc/synth/presets.hpp"

namespace phasealloc {
namespace {

constexpr model_role roles[] = {model_role::actor, model_role::critic, model_role::reference, model_role::reward};

// Every size field of a model, by key suffix.
template <class Desc, class Visit>
void visit_model_sizes(Desc& d, Visit&& visit) {
  visit("layers", d.layers);
  visit("hidden", d.hidden);
  visit("heads", d.heads);
  visit("kv_heads", d.kv_heads);
  visit("ffn_hidden", d.ffn_hidden);
  visit("vocab", d.vocab);
  visit("max_positions", d.max_positions);
  visit("bytes_per_param", d.bytes_per_param);
}

// Every job-level field, by key.
template <class Job, class Sizes, class Flags, class Bytes>
void visit_job_fields(Job& j, Sizes&& size, Flags&& flag, Bytes&& bytes) {
  size("batch", j.batch);
  size("generation_batch", j.generation_batch);
  size("prompt_len", j.prompt_len);
  size("gen_len", j.gen_len);
  size("iterations", j.iterations);
  size("ppo_epochs", j.ppo_epochs);
  size("mini_batch", j.mini_batch);
  size("micro_batch", j.micro_batch);
  size("inference_micro_batch", j.inference_micro_batch);
  size("max_events", j.max_events);
  flag("gradient_checkpointing", j.gradient_checkpointing);
  flag("flash_attention", j.flash_attention);
  flag("master_weights", j.master_weights);
  flag("offload_optimizer", j.offload_optimizer);
  flag("offload_params", j.offload_params);
  flag("empty_cache_at_phases", j.empty_cache_at_phases);
  flag("response_logprobs", j.response_logprobs);
  flag("joint_backward", j.joint_backward);
  flag("shared_optimizer", j.shared_optimizer);
  flag("with_critic", j.with_critic);
  flag("keep_model_output", j.keep_model_output);
  flag("offload_reference", j.offload_reference);
  flag("optimizer_states_on_host", j.optimizer_states_on_host);
  flag("prefill_cache_copy", j.prefill_cache_copy);
  flag("dropout", j.dropout);
  size("lora_rank", j.lora_rank);
  bytes("offload_chunk_bytes", j.offload_chunk_bytes);
  bytes("device_capacity", j.device_capacity_bytes);
}

void read_model(conf_reader& reader, rlhf_job& job, std::string_view prefix, const std::vector<model_role>& targets) {
  visit_model_sizes(job.actor, [&](std::string_view field, const std::size_t&) {
    if (auto v = reader.get_uint(fmt::format("{}.{}", prefix, field))) {
      for (model_role role : targets) {
        visit_model_sizes(model_of(job, role), [&](std::string_view f, std::size_t& slot) {
          if (f == field) slot = static_cast<std::size_t>(*v);
        });
      }
    }
  });
  const std::string family_key = fmt::format("{}.family", prefix);
  if (auto name = reader.get_string(family_key)) {
    if (auto family = parse_model_family(*name)) {
      for (model_role role : targets) model_of(job, role).family = *family;
    } else {
      reader.fail(family_key, fmt::format("\"{}\" is not a model family (expected llama, opt or gpt2)", *name));
    }
  }
}

// "ppo-7b,batch:8": a first item without ':' names the preset.
std::pair<std::string_view, std::string_view> split_bare_preset(std::string_view conf) {
  const std::size_t comma = conf.find(',');
  std::string_view first = conf.substr(0, comma);
  while (!first.empty() && first.front() == ' ') first.remove_prefix(1);
  while (!first.empty() && first.back() == ' ') first.remove_suffix(1);
  if (first.empty() || first.find(':') != std::string_view::npos || first.find('[') != std::string_view::npos) {
    return {{}, conf};
  }
  return {first, comma == std::string_view::npos ? std::string_view{} : conf.substr(comma + 1)};
}

}  // namespace

result<rlhf_job, std::string> parse_job(std::string_view conf) {
  const auto [bare_preset, rest] = split_bare_preset(conf);
  auto entries = parse_conf(rest);
  if (!entries) return fmt::format("synth job: {}", entries.error());
  conf_reader reader("synth job", std::move(entries.value()));
  const std::optional<std::string> preset_key = reader.get_string("preset");
  if (preset_key && !bare_preset.empty()) {
    return fmt::format("synth job: the preset is given twice ('{}' and 'preset:{}')", bare_preset, *preset_key);
  }
  const std::string preset_name =
      preset_key ? *preset_key : std::string(bare_preset.empty() ? default_preset_name : bare_preset);
  auto base = preset(preset_name);
  if (!base) return fmt::format("synth job: bad value for 'preset': {}", base.error());
  rlhf_job job = std::move(base.value());

  visit_job_fields(
      job,
      [&](std::string_view key, std::size_t& slot) {
        if (auto v = reader.get_uint(key)) slot = static_cast<std::size_t>(*v);
      },
      [&](std::string_view key, bool& slot) {
        if (auto v = reader.get_bool(key)) slot = *v;
      },
      [&](std::string_view key, std::size_t& slot) {
        if (auto v = reader.get_bytes(key)) slot = *v;
      });
  if (auto v = reader.get_uint("seed")) job.seed = *v;
  if (auto v = reader.get_string("lora_targets")) {
    std::string_view text = *v;
    if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
    job.lora_targets.clear();
    while (!text.empty()) {
      const std::size_t comma = text.find(',');
      if (comma != 0) job.lora_targets.emplace_back(text.substr(0, comma));
      if (comma == std::string_view::npos) break;
      text.remove_prefix(comma + 1);
    }
  }
  read_model(reader, job, "models", {roles, roles + 4});
  for (model_role role : roles) read_model(reader, job, to_string(role), {role});

  if (auto problem = reader.finish()) return *problem;
  if (auto valid = validate_job(job); !valid) return fmt::format("synth job: {}", valid.error());
  return job;
}

std::string to_conf(const rlhf_job& job) {
  std::vector<std::string> items;
  if (preset(job.name)) items.push_back(fmt::format("preset:{}", job.name));
  visit_job_fields(
      job, [&](std::string_view key, std::size_t v) { items.push_back(fmt::format("{}:{}", key, v)); },
      [&](std::string_view key, bool v) { items.push_back(fmt::format("{}:{}", key, v)); },
      [&](std::string_view key, std::size_t v) { items.push_back(fmt::format("{}:{}", key, v)); });
  items.push_back(fmt::format("seed:{}", job.seed));
  items.push_back(fmt::format("lora_targets:[{}]", fmt::join(job.lora_targets, ",")));
  for (model_role role : roles) {
    const model_desc& d = model_of(job, role);
    items.push_back(fmt::format("{}.family:{}", to_string(role), to_string(d.family)));
    visit_model_sizes(d, [&](std::string_view field, std::size_t v) {
      items.push_back(fmt::format("{}.{}:{}", to_string(role), field, v));
    });
  }
  return fmt::format("{}", fmt::join(items, ","));
}

}  // namespace phasealloc
