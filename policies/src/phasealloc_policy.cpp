#include "phasealloc/policies/phasealloc_policy.hpp"

#include <algorithm>
#include <charconv>

#include <fmt/format.h>

#include "phasealloc/conf.hpp"
#include "phasealloc/policies/size_classes.hpp"

namespace phasealloc {
namespace {

constexpr pool_id small_pool = 0;
constexpr pool_id large_pool = 1;
constexpr pool_id pinned_pool = 2;
constexpr pool_id rollout_pool = 3;
/// The first tag_pool_count named tags (named_tag_base on) get a pool each, after the four above: such
/// a block shares no page with a block of another tag or none, so offloading its tag moves whole
/// pages (nothing kept).
constexpr pool_id first_tag_pool = 4;

constexpr std::size_t min_block_bytes = 512;
/// Growing back toward a phase's learned need maps at most this many times the request at once.
constexpr std::size_t map_ahead_requests = 16;

/// "[a,b,c]" -> {"a","b","c"}; a bare value is a list of one.
std::vector<std::string> split_list(std::string_view text) {
  if (text.size() >= 2 && text.front() == '[' && text.back() == ']') text = text.substr(1, text.size() - 2);
  std::vector<std::string> out;
  while (!text.empty()) {
    const std::size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    if (!item.empty()) out.emplace_back(item);
    if (comma == std::string_view::npos) break;
    text.remove_prefix(comma + 1);
  }
  return out;
}

std::string_view to_string(transition_release r) {
  switch (r) {
    case transition_release::none: return "none";
    case transition_release::all: return "all";
    case transition_release::adaptive: return "adaptive";
  }
  return "?";
}

}  // namespace

phasealloc_policy::phasealloc_policy(phasealloc_policy_options options) : options_(std::move(options)) {
  pools_.push_back(pool_traits{"small", true, true, size_classes[0].page_bytes, false, options_.small_grow_bytes});
  pools_.push_back(pool_traits{"large", false, true, options_.page_bytes, false, options_.grow_bytes});
  pools_.push_back(pool_traits{"pinned", false, true, options_.page_bytes, true, 0});
  pools_.push_back(pool_traits{"rollout", false, true, options_.page_bytes, false, options_.grow_bytes});
  for (std::uint32_t tag = 1; tag <= tag_pool_count; ++tag) {
    pools_.push_back(
        pool_traits{fmt::format("named tag {}", tag), false, true, options_.page_bytes, false, options_.grow_bytes});
  }
}

result<std::unique_ptr<policy>, std::string> phasealloc_policy::create(std::string_view conf) {
  auto entries = parse_conf(conf);
  if (!entries) return "phasealloc: " + entries.error();
  conf_reader reader("phasealloc", std::move(entries).value());
  phasealloc_policy_options o;
  if (auto v = reader.get_string("release")) {
    if (*v == "none") o.release = transition_release::none;
    else if (*v == "all") o.release = transition_release::all;
    else if (*v == "adaptive") o.release = transition_release::adaptive;
    else reader.fail("release", fmt::format("\"{}\" is not one of none, all, adaptive", *v));
  }
  if (auto v = reader.get_bytes("release_threshold")) o.release_threshold_bytes = *v;
  if (auto v = reader.get_bool("reclaim")) o.reclaim = *v;
  if (auto v = reader.get_bytes("reclaim_min_run")) o.reclaim_min_run_bytes = *v;
  if (auto v = reader.get_bytes("page")) {
    if (*v < 2 * mib || *v % (2 * mib) != 0) reader.fail("page", "must be a positive multiple of 2MiB");
    else o.page_bytes = *v;
  }
  if (auto v = reader.get_bytes("grow")) o.grow_bytes = *v;
  if (auto v = reader.get_bool("grow_whole")) o.grow_whole = *v;
  if (auto v = reader.get_bytes("small_grow")) {
    if (*v % size_classes[0].page_bytes != 0) reader.fail("small_grow", "must be a multiple of 2MiB (0: one page)");
    else o.small_grow_bytes = *v;
  }
  if (auto v = reader.get_bool("map_ahead")) o.map_ahead = *v;
  if (auto v = reader.get_bool("need_from_entry")) o.need_from_entry = *v;
  if (auto v = reader.get_bool("keep_for_step")) o.keep_for_step = *v;
  if (auto v = reader.get_bool("lifetime")) o.lifetime = *v;
  if (auto v = reader.get_bool("phase_pools")) o.phase_pools = *v;
  if (auto v = reader.get_string("rollout_phases")) {
    o.rollout_phases.clear();
    for (std::string& item : split_list(*v)) o.rollout_phases.push_back(std::move(item));
    if (o.rollout_phases.empty()) reader.fail("rollout_phases", "names no phase");
  }
  if (auto v = reader.get_string("pin_tags")) {
    for (const std::string& item : split_list(*v)) {
      std::uint32_t tag = 0;
      const auto [ptr, ec] = std::from_chars(item.data(), item.data() + item.size(), tag);
      if (ec != std::errc{} || ptr != item.data() + item.size() || tag == 0) {
        reader.fail("pin_tags", fmt::format("\"{}\" is not a tag (a positive integer)", item));
      } else {
        o.pin_tags.push_back(tag);
      }
    }
  }
  if (auto v = reader.get_string("pin_sizes")) {
    for (const std::string& item : split_list(*v)) {
      if (auto bytes = parse_bytes(item); bytes && *bytes > 0) o.pin_sizes.push_back(*bytes);
      else reader.fail("pin_sizes", fmt::format("\"{}\" is not a byte size", item));
    }
  }
  if (auto v = reader.get_double("memory_fraction")) {
    if (!(*v > 0.0 && *v <= 1.0)) reader.fail("memory_fraction", fmt::format("{} is not in (0, 1]", *v));
    else o.memory_fraction = *v;
  }
  if (auto error = reader.finish()) return *error;
  return std::unique_ptr<policy>(std::make_unique<phasealloc_policy>(std::move(o)));
}

std::string phasealloc_policy::spec() const {
  std::string s = fmt::format("phasealloc:release:{}", to_string(options_.release));
  if (options_.release_threshold_bytes != gib) s += fmt::format(",release_threshold:{}", options_.release_threshold_bytes);
  if (!options_.reclaim) s += ",reclaim:false";
  if (options_.reclaim_min_run_bytes != 128 * mib) s += fmt::format(",reclaim_min_run:{}", options_.reclaim_min_run_bytes);
  if (options_.page_bytes != 2 * mib) s += fmt::format(",page:{}", options_.page_bytes);
  if (options_.grow_bytes != 20 * mib) s += fmt::format(",grow:{}", options_.grow_bytes);
  if (options_.grow_whole) s += ",grow_whole:true";
  if (options_.small_grow_bytes != 4 * mib) s += fmt::format(",small_grow:{}", options_.small_grow_bytes);
  if (!options_.map_ahead) s += ",map_ahead:false";
  if (options_.need_from_entry != phasealloc_policy_options{}.need_from_entry) {
    s += fmt::format(",need_from_entry:{}", options_.need_from_entry);
  }
  if (options_.keep_for_step != phasealloc_policy_options{}.keep_for_step) {
    s += fmt::format(",keep_for_step:{}", options_.keep_for_step);
  }
  if (options_.lifetime) s += ",lifetime:true";
  if (options_.phase_pools != phasealloc_policy_options{}.phase_pools) {
    s += fmt::format(",phase_pools:{}", options_.phase_pools);
  }
  if (options_.rollout_phases != phasealloc_policy_options{}.rollout_phases) {
    s += fmt::format(",rollout_phases:[{}]", fmt::join(options_.rollout_phases, ","));
  }
  if (!options_.pin_tags.empty()) s += fmt::format(",pin_tags:[{}]", fmt::join(options_.pin_tags, ","));
  if (!options_.pin_sizes.empty()) s += fmt::format(",pin_sizes:[{}]", fmt::join(options_.pin_sizes, ","));
  if (options_.memory_fraction != 1.0) s += fmt::format(",memory_fraction:{}", options_.memory_fraction);
  return s;
}

std::size_t phasealloc_policy::round_bytes(std::size_t requested_bytes) const noexcept {
  return round_to_class(requested_bytes);
}

pool_id phasealloc_policy::pool_for(const alloc_request& request, std::size_t rounded_bytes) const noexcept {
  const auto& tags = options_.pin_tags;
  const auto& sizes = options_.pin_sizes;
  if ((request.tag != 0 && std::find(tags.begin(), tags.end(), request.tag) != tags.end()) ||
      std::find(sizes.begin(), sizes.end(), request.requested_bytes) != sizes.end()) {
    return pinned_pool;
  }
  if (request.tag >= named_tag_base && request.tag - named_tag_base < tag_pool_count) {
    return first_tag_pool + (request.tag - named_tag_base);
  }
  const bool small = size_class_of(rounded_bytes) == 0;
  if (small) return small_pool;
  return in_rollout_ ? rollout_pool : large_pool;
}

placement phasealloc_policy::placement_for(const alloc_request& request, std::size_t rounded_bytes) const noexcept {
  if (!options_.lifetime) return placement::best_fit;
  if (before_first_phase_) return placement::lowest_address;  // model load: weights, buffers
  if (lifetimes_now_ == nullptr) return placement::best_fit;
  const lifetime_key key{rounded_bytes, request.stream};
  return lifetimes_now_->long_lived.count(key) != 0 || lifetimes_now_->mid_lived.count(key) != 0
             ? placement::lowest_address
             : placement::best_fit;
}

std::size_t phasealloc_policy::segment_bytes(pool_id pool, std::size_t rounded_bytes) const noexcept {
  // Used only on devices without virtual memory (the pools are expandable elsewhere).
  return round_up(rounded_bytes, pools_[pool].page_bytes);
}

bool phasealloc_policy::should_split(pool_id /*pool*/, std::size_t block_bytes,
                                     std::size_t rounded_bytes) const noexcept {
  // Every pool is expandable: a remainder merges with the pages mapped next to it, so keep it.
  return block_bytes - rounded_bytes >= min_block_bytes;
}

std::size_t phasealloc_policy::need_from(const phase_need& need, const transition_context& c,
                                          bool less_held) const noexcept {
  if (!options_.need_from_entry) return need.bytes();
  if (!less_held) return c.allocated_bytes + need.growth_bytes();
  // What that interval made and still holds (weights loaded in a phase's first interval, a state
  // kept across the step) is in what is allocated now and in what it added: count it once.
  const std::size_t held_bytes =
      need.interval < c.live_bytes_by_interval.size() ? c.live_bytes_by_interval[need.interval] : 0;
  return c.allocated_bytes + need.growth_bytes() - std::min(need.growth_bytes(), held_bytes);
}

release_step phasealloc_policy::page_release(std::size_t target_bytes, std::size_t min_run_bytes) const {
  release_step step;
  step.what = release_what::free_pages;
  step.order = release_order::largest_first;  // most bytes per unmap call
  step.target_bytes = target_bytes;
  step.min_run_bytes = min_run_bytes;
  return step;
}

release_plan phasealloc_policy::before_grow(const grow_context& c) {
  high_water_bytes_ = std::max(high_water_bytes_, c.reserved_bytes);
  if (!options_.reclaim || c.pool == pinned_pool) return {};
  const std::size_t after = c.reserved_bytes + c.grow_bytes;
  if (after <= high_water_bytes_) return {};
  // Growing would set a new peak for the run: take the memory of holes back first, so the growth
  // reuses it. Only as much as keeps us at the high-water mark. Below the peak, growth is free:
  // it cannot raise what the job needs from the device.
  release_step step = page_release(after - high_water_bytes_, options_.reclaim_min_run_bytes);
  step.stale_min_run_bytes = options_.page_bytes;
  return {step};
}

std::size_t phasealloc_policy::map_ahead_bytes(const grow_context& c) const {
  std::size_t ahead = pools_[c.pool].grow_bytes;
  // Whole steps (as expandable segments map whole 20 MiB pages): the rest of the last step is left
  // free for the next requests, half a step on average, instead of what rounding to a page leaves.
  if (options_.grow_whole && ahead != 0) ahead = round_up(std::max<std::size_t>(c.grow_bytes, 1), ahead);
  if (!options_.map_ahead || c.pool == pinned_pool) return ahead;
  // Growing back toward what this phase needed last time (after a transition release, typically):
  // map it in a few large calls rather than one step at a time. Never past the run's high-water
  // mark, so that mapping ahead cannot raise the peak; and at most a few times the request, so that
  // a phase of small growing blocks (KV caches regrown by torch.cat) still grows by small steps,
  // which keeps its freed blocks next to the free top where they merge into the next growth.
  if (need_now_bytes_ != 0) {
    const std::size_t target = std::min(need_now_bytes_, high_water_bytes_);
    if (target > c.reserved_bytes) {
      ahead = std::max(ahead, std::min(target - c.reserved_bytes, map_ahead_requests * c.rounded_bytes));
    }
  }
  return ahead;
}

release_plan phasealloc_policy::on_oom(const grow_context& /*context*/) {
  release_step everything = page_release(SIZE_MAX, 1);
  everything.synchronize = true;
  release_step pinned_too = everything;
  pinned_too.include_pinned = true;
  return {everything, pinned_too};
}

void phasealloc_policy::learn_lifetimes(const transition_context& c) {
  // A visit of a phase is its run of consecutive intervals (micro-batches of one training phase are
  // one visit): it ends only when another phase starts.
  if (c.from_name == c.to_name) return;
  const auto in = [](const live_block& b, std::uint32_t first, std::uint32_t last) {
    return b.birth_interval >= first && b.birth_interval <= last;
  };
  phase_lifetimes& ending = lifetimes_[std::string(c.from_name)];
  ending.survived.clear();
  for (const live_block& b : c.live_blocks) {
    if (in(b, visit_first_interval_, c.interval)) ending.survived.insert({round_bytes(b.requested_bytes), b.stream});
  }
  ending.last_visit = {visit_first_interval_, c.interval};
  visit_first_interval_ = c.interval + 1;
  phase_lifetimes& starting = lifetimes_[std::string(c.to_name)];
  lifetimes_now_ = &starting;
  if (!starting.last_visit) return;  // its first visit: no history
  // What its last visit made and is still allocated now outlived the whole cycle.
  const auto [first, last] = *starting.last_visit;
  starting.long_lived.clear();
  for (const live_block& b : c.live_blocks) {
    if (in(b, first, last)) starting.long_lived.insert({round_bytes(b.requested_bytes), b.stream});
  }
  starting.mid_lived.clear();
  for (const lifetime_key& k : starting.survived) {
    if (starting.long_lived.count(k) == 0) starting.mid_lived.insert(k);
  }
}

void phasealloc_policy::follow_step(std::string_view to) {
  if (cycle_start_.empty()) cycle_start_ = to;  // the phase the job's cycle begins with
  if (to == cycle_start_) {
    last_step_phases_ = std::move(step_phases_);
    step_phases_.clear();
  }
  if (step_phases_.empty() || step_phases_.back() != to) step_phases_.emplace_back(to);
}

std::size_t phasealloc_policy::rest_of_step_need(std::string_view to) const noexcept {
  // The phases that came after `to` in the last step, each at what it needed then. A phase of this
  // step that begins later finds the memory mapped, instead of mapping what this release unmapped.
  const auto here = std::find(last_step_phases_.begin(), last_step_phases_.end(), to);
  if (here == last_step_phases_.end()) return 0;
  std::size_t need = 0;
  for (auto it = std::next(here); it != last_step_phases_.end(); ++it) {
    if (const auto learned = learned_.find(*it); learned != learned_.end()) need = std::max(need, learned->second.bytes());
  }
  return need;
}

release_plan phasealloc_policy::on_transition(const transition_context& c) {
  if (options_.keep_for_step) follow_step(c.to_name);
  learned_[std::string(c.from_name)] = phase_need{c.interval_peak_allocated_bytes, c.interval_peak_reserved_bytes,
                                                  entered_trimmed_, entry_allocated_bytes_, c.interval};
  entry_allocated_bytes_ = c.allocated_bytes;
  const auto starting = learned_.find(c.to_name);
  need_now_bytes_ = starting != learned_.end() ? need_from(starting->second, c, true) : 0;
  successors_[std::string(c.from_name)].insert(std::string(c.to_name));
  entered_trimmed_ = false;
  phase_ = c.to_name;
  before_first_phase_ = false;
  if (options_.lifetime) learn_lifetimes(c);
  const auto& rollout = options_.rollout_phases;
  in_rollout_ = options_.phase_pools && std::find(rollout.begin(), rollout.end(), phase_) != rollout.end();
  std::size_t keep = c.allocated_bytes;
  switch (options_.release) {
    case transition_release::none:
      return {};
    case transition_release::all:
      break;
    case transition_release::adaptive: {
      // No prediction yet (the first time this phase runs): keep the cache; it may well be used.
      if (starting == learned_.end()) return {};
      keep = std::max(keep, need_now_bytes_);
      // Ping-pong: when the phase that starts has been seen to hand back to the one that ends
      // (training -> optimizer -> training, once per minibatch), what the ending phase needs is
      // regrown right after a short interval; releasing it would only pay a release and a regrowth.
      // Other transitions (into generation, whose memory a colocated engine may want) are unchanged.
      if (const auto next = successors_.find(c.to_name); next != successors_.end() && next->second.count(c.from_name)) {
        if (const auto need = learned_.find(c.from_name); need != learned_.end()) {
          keep = std::max(keep, need_from(need->second, c, false));
        }
      }
      // Within a step (not at its start, where a colocated rollout engine wants the memory): keep
      // what the phases still to come in this step needed last step, so that none of them maps
      // again what this release would unmap.
      if (options_.keep_for_step && c.to_name != cycle_start_) keep = std::max(keep, rest_of_step_need(c.to_name));
      break;
    }
  }
  // The phase starts trimmed: released to the target, or already within the threshold of it, so
  // the reserved peak it reaches is its need from a trimmed start.
  entered_trimmed_ = true;
  if (c.reserved_bytes <= keep || c.reserved_bytes - keep < options_.release_threshold_bytes) return {};
  // Largest runs first: the fewest unmap calls for the bytes, and the phase that starts grows back
  // toward its need in one map (map_ahead_bytes) if the runs it kept do not fit its blocks.
  return {page_release(c.reserved_bytes - keep, options_.page_bytes)};
}

}  // namespace phasealloc
