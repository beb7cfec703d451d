// Design note: the `pytorch` policy
// Rationale: every phasealloc number is reported against what PyTorch's own allocator would do,
//   so this policy must make the decisions of the native CUDACachingAllocator
//   (c10/cuda/CUDACachingAllocator.cpp, DeviceCachingAllocator) and read its configuration
//   (c10/core/AllocatorConfig.cpp) exactly; where it cannot, the difference is written below.
// Approach: each torch function maps onto one hook of the policy contract:
//   round_size                          -> round_bytes (pytorch_rounding.cpp)
//   get_pool (size <= kSmallSize)       -> pool_for: "small" (<= 1 MiB rounded) or "large"
//   get_allocation_size                 -> segment_bytes: 2 MiB small; < 10 MiB -> the large
//                                          segment size (20 MiB); else rounded up to 2 MiB
//   get_free_block oversize rules       -> may_use: a request < max_split never takes a block
//                                          >= max_split; a request >= max_split never takes a
//                                          block >= request + max_non_split_rounding
//   should_split                        -> should_split: small pool or expandable segments:
//                                          remainder >= 512; large: request < max_split and
//                                          remainder > 1 MiB
//   garbage_collect_cached_blocks       -> before_grow: with a memory limit and a threshold, when
//                                          reserved > threshold x limit, free unsplit large-pool
//                                          segments oldest first (release_order::aged) until
//                                          reserved - threshold x limit bytes are back
//   release_available_cached_blocks     -> on_oom step 1 (max_split set): this pool and stream,
//                                          segments >= max_split, the smallest single one >=
//                                          max(request, max_split), else largest first
//   release_cached_blocks               -> on_oom step 2 and empty_cache: synchronise pending
//                                          frees, then every idle segment, large pool then small,
//                                          each in (stream, size[, age], address) order
//                                          (release_order::size_index)
//   expandable_segments                 -> both pools expandable: 2 MiB pages (small) and
//                                          large_segment_size pages (large), with torch's
//                                          growth (growth_style::expandable_segments):
//                                          get_free_block's rank of a block by the unmapped
//                                          pages after it, find_expandable_block's chains of
//                                          free and unmapped blocks and extra reservations,
//                                          try_allocate_expandable_block's map of each run of
//                                          the chain, and the limit checked once against
//                                          get_allocation_size
//   per_process_memory_fraction         -> memory_fraction (the engine's limit on reserved)
//   BlockComparatorSize[CounterAddress]-> segment_age_order on both pools (block_order key):
//                                          equal-size free blocks go oldest segment first, then
//                                          by address, as torch 2.15 does (a counter taken at each
//                                          cudaMalloc and new expandable segment, inherited by the
//                                          segment's blocks: pytorch/pytorch#183591); with
//                                          block_order:address, by address alone (torch 2.11).
//                                          The two agree while every new segment sits above the
//                                          older ones; the CUDA driver places it below them
//                                          (model_device.hpp), and there they part: torch 2.11 then
//                                          takes the newest segment's block, 2.15 the oldest's.
//                                          Checked on both wheels on simcuda; 2.12-2.14 were not.
//   The engine does the rest as torch does: best fit in that order, no cross-stream reuse, a
//   rejected candidate ends the search, split keeps the front, eager merge, cross-stream frees
//   wait for events, one retry after each release step.
// Limitations (differences from torch; references are to CUDACachingAllocator.cpp unless named):
//   1. Differences in the engine's mechanism that the policy contract cannot express:
//      none left but (f): release_step::retry skips the retry when the oversize release freed
//      less than its key (only_if_target_met), does not count it (counted) and grows at once
//      with no search of the pool (search_pool_first); the engine's aged order frees every block
//      at least as old as the exact mean in a pass, checking the target between passes, as
//      garbage_collect_cached_blocks; expandable pools take torch's growth rules (above).
//      (f) The engine never counts oversize_allocations / oversize_segments (it does not know
//      max_split).
//   2. Ages for the garbage collector count the pool's best-fit lookups, one per allocation as
//      torch's get_free_block calls (it counts them only while GC is enabled, which for a replay
//      is the whole run or never).
//   3. Keys with no effect on a single-device replay are accepted and ignored:
//      release_lock_on_cudamalloc, pinned_use_cuda_host_register (and their _hip_ spellings),
//      pinned_use_background_threads, pinned_num_register_threads,
//      graph_capture_record_stream_reuse, backend (only "native": cudaMallocAsync is a different
//      allocator and is refused).
//   4. Value checks follow the code with whole-token numbers (torch's stoi accepts "20abc").
//      max_split_size_mb and max_non_split_rounding_mb must be >= 20 (older CUDAAllocatorConfig
//      said > 20; newer AcceleratorAllocatorConfig checks them against large_segment_size_mb as
//      parsed so far).
//      large_segment_size_mb must be > 10 (kMinLargeAlloc) as in the newest torch.
//   5. roundup_power2_divisions reads `>` as AllocatorConfig::parseRoundUpPower2Divisions does
//      (from the last key's interval on); newer torch (AcceleratorAllocatorConfig) starts after
//      it. parse_pytorch_divisions offers both (pytorch_gt_rule).
//   6. An expandable reservation whose pages are all unmapped is kept (torch frees the address
//      range, release_expandable_segment); reserved bytes agree, the segment count does not.
//   7. The engine rounds a segment up to the device granularity (2 MiB on CUDA): an odd
//      large_segment_size_mb (say 11) reserves 12 MiB here where torch's cudaMalloc reserves 11.
//   8. No private pools (CUDA graphs, MemPool) and no free-memory callbacks (CUDA IPC).
#include "phasealloc/policies/pytorch_policy.hpp"

#include <algorithm>
#include <bit>
#include <fmt/format.h>
#include <optional>

#include "phasealloc/conf.hpp"

namespace phasealloc {
namespace {

/// torch's boolean values are exactly "True" and "False".
std::optional<bool> get_true_false(conf_reader& reader, std::string_view key) {
  const auto v = reader.get_string(key);
  if (!v) return std::nullopt;
  if (*v == "True") return true;
  if (*v == "False") return false;
  reader.fail(key, fmt::format("\"{}\" is not True or False (torch accepts exactly these)", *v));
  return std::nullopt;
}

/// A size in MiB of at least `min_mib` (else `rule` is the error), clamped as torch clamps it.
std::optional<std::size_t> get_mib(conf_reader& reader, std::string_view key, std::uint64_t min_mib,
                                   std::string_view rule) {
  const auto v = reader.get_uint(key);
  if (!v) return std::nullopt;
  if (*v < min_mib) {
    reader.fail(key, fmt::format("{} MB is too small: {}", *v, rule));
    return std::nullopt;
  }
  return static_cast<std::size_t>(std::min<std::uint64_t>(*v, SIZE_MAX / mib)) * mib;
}

void read_ignored(conf_reader& reader) {
  // Accepted so a PYTORCH_CUDA_ALLOC_CONF pastes unchanged; none changes one device's replay.
  // torch reads the ROCm spellings too, whatever the build.
  for (const char* key : {"release_lock_on_cudamalloc", "release_lock_on_hipmalloc", "pinned_use_cuda_host_register",
                          "pinned_use_hip_host_register"}) {
    (void)get_true_false(reader, key);
  }
  (void)get_true_false(reader, "pinned_use_background_threads");
  (void)get_true_false(reader, "graph_capture_record_stream_reuse");
  if (const auto v = reader.get_uint("pinned_num_register_threads")) {
    if (!std::has_single_bit(*v) || *v > 128) {
      reader.fail("pinned_num_register_threads", fmt::format("{} is not a power of two up to 128", *v));
    }
  }
  if (const auto v = reader.get_string("backend"); v && *v != "native") {
    reader.fail("backend",
                fmt::format("\"{}\" is not modelled; only native is (cudaMallocAsync is another allocator)", *v));
  }
}

}  // namespace

pytorch_policy::pytorch_policy(options opts) : opts_(opts) {
  const bool es = opts_.expandable_segments;
  // Expandable segments grow as torch's do: get_free_block ranks a block by the unmapped pages
  // after it, find_expandable_block takes the lowest chain of free and unmapped blocks that holds
  // the request (or a new reservation at once), try_allocate_expandable_block maps the chain's
  // runs, and the memory limit is checked once against get_allocation_size.
  const growth_style growth = es ? growth_style::expandable_segments : growth_style::pages;
  pools_.push_back(pool_traits{.name = "small",
                               .small = true,
                               .expandable = es,
                               .page_bytes = small_buffer_bytes,
                               .growth = growth,
                               .segment_age_order = opts_.segment_age_order});
  pools_.push_back(pool_traits{.name = "large",
                               .expandable = es,
                               .page_bytes = opts_.large_segment_bytes,
                               .growth = growth,
                               .segment_age_order = opts_.segment_age_order});
}

result<pytorch_policy::options, std::string> pytorch_policy::parse(std::string_view conf) {
  auto entries = parse_conf(conf);
  if (!entries) return "pytorch: " + entries.error();
  conf_reader reader("pytorch", std::move(entries).value());
  options o;
  if (auto v = get_mib(reader, "large_segment_size_mb", 11, "must be > 10 (kMinLargeAlloc)")) {
    o.large_segment_bytes = *v;
  }
  if (auto v = get_mib(reader, "max_split_size_mb", 20, "must be >= 20 (kLargeBuffer)")) o.max_split_bytes = *v;
  if (auto v = get_mib(reader, "max_non_split_rounding_mb", 20, "must be >= 20 (kLargeBuffer)")) {
    o.max_non_split_rounding_bytes = *v;
  }
  if (auto v = reader.get_string("roundup_power2_divisions")) {
    auto d = parse_pytorch_divisions(*v);
    if (d) o.roundup_divisions = d.value();
    else reader.fail("roundup_power2_divisions", d.error());
  }
  if (auto v = reader.get_double("garbage_collection_threshold")) {
    if (*v > 0.0 && *v < 1.0) o.garbage_collection_threshold = *v;
    else reader.fail("garbage_collection_threshold", fmt::format("{} is not in (0.0, 1.0)", *v));
  }
  if (auto v = get_true_false(reader, "expandable_segments")) o.expandable_segments = *v;
  if (auto v = reader.get_string("block_order")) {
    if (*v == "segment_age" || *v == "address") o.segment_age_order = *v == "segment_age";
    else reader.fail("block_order", fmt::format("\"{}\" is not segment_age (torch 2.15) or address (torch 2.11)", *v));
  }
  if (auto v = reader.get_double("per_process_memory_fraction")) {
    if (*v > 0.0 && *v <= 1.0) o.memory_fraction = *v;
    else reader.fail("per_process_memory_fraction", fmt::format("{} is not in (0.0, 1.0]", *v));
  }
  read_ignored(reader);
  if (auto error = reader.finish()) return *error;
  return o;
}

result<std::unique_ptr<policy>, std::string> pytorch_policy::create(std::string_view conf) {
  auto o = parse(conf);
  if (!o) return o.error();
  return std::unique_ptr<policy>(std::make_unique<pytorch_policy>(o.value()));
}

std::string pytorch_policy::spec() const {
  std::vector<std::string> items;
  if (opts_.max_split_bytes != SIZE_MAX) {
    items.push_back(fmt::format("max_split_size_mb:{}", opts_.max_split_bytes / mib));
  }
  if (opts_.max_non_split_rounding_bytes != 20 * mib) {
    items.push_back(fmt::format("max_non_split_rounding_mb:{}", opts_.max_non_split_rounding_bytes / mib));
  }
  if (const std::string d = format_pytorch_divisions(opts_.roundup_divisions); !d.empty()) {
    items.push_back("roundup_power2_divisions:" + d);
  }
  if (opts_.garbage_collection_threshold > 0.0) {
    items.push_back(fmt::format("garbage_collection_threshold:{}", opts_.garbage_collection_threshold));
  }
  if (opts_.expandable_segments) items.push_back("expandable_segments:True");
  if (opts_.large_segment_bytes != 20 * mib) {
    items.push_back(fmt::format("large_segment_size_mb:{}", opts_.large_segment_bytes / mib));
  }
  if (opts_.memory_fraction != 1.0) items.push_back(fmt::format("per_process_memory_fraction:{}", opts_.memory_fraction));
  if (!opts_.segment_age_order) items.push_back("block_order:address");
  // Only what differs from torch's defaults, so reports stay readable; it parses back unchanged.
  return items.empty() ? std::string("pytorch") : fmt::format("pytorch:{}", fmt::join(items, ","));
}

std::size_t pytorch_policy::round_bytes(std::size_t requested_bytes) const noexcept {
  return pytorch_round_size(requested_bytes, opts_.roundup_divisions);
}

pool_id pytorch_policy::pool_for(const alloc_request& /*request*/, std::size_t rounded_bytes) const noexcept {
  return rounded_bytes <= small_size_bytes ? small_pool : large_pool;
}

std::size_t pytorch_policy::segment_bytes(pool_id pool, std::size_t rounded_bytes) const noexcept {
  if (pool == small_pool) return small_buffer_bytes;
  if (rounded_bytes < min_large_alloc_bytes) return opts_.large_segment_bytes;
  return round_up(rounded_bytes, round_large_bytes);
}

bool pytorch_policy::may_use(pool_id /*pool*/, std::size_t block_bytes, std::size_t rounded_bytes) const noexcept {
  // Do not return an oversized block for a smaller request...
  if (rounded_bytes < opts_.max_split_bytes && block_bytes >= opts_.max_split_bytes) return false;
  // ...and let an oversized request round up into a cached block only by so much.
  if (rounded_bytes >= opts_.max_split_bytes && block_bytes - rounded_bytes >= opts_.max_non_split_rounding_bytes) {
    return false;
  }
  return true;
}

bool pytorch_policy::should_split(pool_id pool, std::size_t block_bytes, std::size_t rounded_bytes) const noexcept {
  const std::size_t remaining = block_bytes - rounded_bytes;
  if (pool == small_pool || opts_.expandable_segments) return remaining >= pytorch_min_block_bytes;
  return rounded_bytes < opts_.max_split_bytes && remaining > small_size_bytes;
}

release_plan pytorch_policy::before_grow(const grow_context& context) {
  // garbage_collect_cached_blocks: only with a memory limit and a threshold; it never touches
  // expandable blocks, and with expandable_segments every block is one.
  if (opts_.garbage_collection_threshold <= 0.0 || context.limit_bytes == 0 || opts_.expandable_segments) return {};
  const auto threshold_bytes =
      static_cast<std::size_t>(opts_.garbage_collection_threshold * static_cast<double>(context.limit_bytes));
  if (context.reserved_bytes <= threshold_bytes) return {};
  release_step gc;
  gc.pool = large_pool;
  gc.target_bytes = context.reserved_bytes - threshold_bytes;
  gc.order = release_order::aged;
  return {gc};
}

release_plan pytorch_policy::on_oom(const grow_context& context) {
  release_plan plan;
  // release_available_cached_blocks: only with max_split set, and never expandable blocks.
  if (opts_.max_split_bytes != SIZE_MAX && !opts_.expandable_segments) {
    release_step oversize;
    oversize.pool = context.pool;
    oversize.stream = context.request.stream;
    oversize.min_segment_bytes = opts_.max_split_bytes;
    oversize.target_bytes = std::max(context.rounded_bytes, opts_.max_split_bytes);
    oversize.order = release_order::best_fit_then_largest;
    oversize.retry.only_if_target_met = true;  // torch skips the retry when it freed less than the key
    oversize.retry.counted = false;            // alloc_block(isRetry=false)
    oversize.retry.search_pool_first = false;  // alloc_block directly
    plan.push_back(oversize);
  }
  plan.push_back(release_cached_blocks());
  return plan;
}

release_plan pytorch_policy::on_empty_cache() { return {release_cached_blocks()}; }

release_step pytorch_policy::release_cached_blocks() {
  // Wait for pending frees, then every idle segment: release_blocks(large_blocks) then
  // release_blocks(small_blocks), each walking its set in (stream, size[, age], address) order.
  release_step all;
  all.synchronize = true;
  all.order = release_order::size_index;
  all.pool_order = {large_pool, small_pool};
  all.release_empty_reservations = true;     // release_expandable_segment
  all.retry.search_pool_first = false;  // alloc_block directly
  return all;
}

}  // namespace phasealloc
