#include "phasealloc/export/snapshot_exporter.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>
#include <unordered_map>
#include <vector>

#include "phasealloc/export/pickle_writer.hpp"
#include "phasealloc/trace/trace_validate.hpp"

namespace phasealloc {
namespace {

constexpr std::uint64_t synthetic_base = 0x7f0000000000ULL;
constexpr std::uint64_t block_alignment = 512;  // PyTorch's minimum block size

std::uint64_t block_bytes(std::uint64_t requested) {
  const std::uint64_t b = std::max<std::uint64_t>(requested, 1);
  return (b + block_alignment - 1) / block_alignment * block_alignment;
}

struct placed {
  std::uint64_t addr = 0;
  std::uint64_t requested = 0;
  bool live = true;
};

void write_segment(pickle_writer& w, std::uint32_t device, std::uint64_t lo, std::uint64_t hi,
                   std::vector<placed> live) {
  std::sort(live.begin(), live.end(), [](const placed& a, const placed& b) { return a.addr < b.addr; });
  struct block {
    std::uint64_t addr, size, requested;
    bool allocated;
  };
  std::vector<block> blocks;
  std::uint64_t cursor = lo;
  std::uint64_t allocated = 0;
  std::uint64_t requested = 0;
  for (const placed& p : live) {
    const std::uint64_t size = std::min(block_bytes(p.requested), hi - p.addr);
    if (p.addr < cursor) {
      continue;  // overlaps the previous block (inconsistent addresses): leave it out
    }
    if (p.addr > cursor) {
      blocks.push_back({cursor, p.addr - cursor, 0, false});
    }
    blocks.push_back({p.addr, size, p.requested, true});
    allocated += size;
    requested += p.requested;
    cursor = p.addr + size;
  }
  if (cursor < hi) {
    blocks.push_back({cursor, hi - cursor, 0, false});
  }

  w.begin_dict();
  w.str("device");
  w.integer(device);
  w.str("address");
  w.integer(static_cast<std::int64_t>(lo));
  w.str("total_size");
  w.integer(static_cast<std::int64_t>(hi - lo));
  w.str("allocated_size");
  w.integer(static_cast<std::int64_t>(allocated));
  w.str("active_size");
  w.integer(static_cast<std::int64_t>(allocated));
  w.str("requested_size");
  w.integer(static_cast<std::int64_t>(requested));
  w.str("stream");
  w.integer(0);
  w.str("segment_type");
  w.str("large");
  w.str("segment_pool_id");
  w.begin_tuple();
  w.integer(0);
  w.integer(0);
  w.end_tuple();
  w.str("is_expandable");
  w.boolean(false);
  w.str("frames");
  w.begin_list();
  w.end_list();
  w.str("blocks");
  w.begin_list();
  for (const block& b : blocks) {
    w.begin_dict();
    w.str("address");
    w.integer(static_cast<std::int64_t>(b.addr));
    w.str("size");
    w.integer(static_cast<std::int64_t>(b.size));
    w.str("requested_size");
    w.integer(static_cast<std::int64_t>(b.requested));
    w.str("state");
    w.str(b.allocated ? "active_allocated" : "inactive");
    w.str("frames");
    w.begin_list();
    w.end_list();
    w.end_dict();
  }
  w.end_list();
  w.end_dict();
}

void write_entry(pickle_writer& w, std::string_view action, std::uint64_t addr, const trace_event& e,
                 const std::string* phase) {
  w.begin_dict();
  w.str("action");
  w.str(action);
  w.str("addr");
  w.integer(static_cast<std::int64_t>(addr));
  w.str("size");
  w.integer(static_cast<std::int64_t>(e.bytes));
  w.str("stream");
  w.integer(e.stream);
  w.str("time_us");
  w.integer(static_cast<std::int64_t>(e.time_ns / 1000));
  if (action == "oom") {
    w.str("device_free");
    w.integer(0);
  }
  w.str("frames");
  w.begin_list();
  w.end_list();
  if (phase != nullptr) {
    w.str("user_metadata");
    w.str(*phase);
  }
  w.end_dict();
}

}  // namespace

result<std::string, trace_error> export_snapshot(const trace& t, const snapshot_export_options& options) {
  if (auto valid = validate(t); !valid) {
    return trace_error{"<trace>", 0, 0, "a valid trace", valid.error().message()};
  }
  // Place every allocation.
  std::unordered_map<std::uint64_t, placed> where;
  std::uint64_t cursor = synthetic_base;
  std::uint64_t lo = UINT64_MAX;
  std::uint64_t hi = 0;
  bool has_phases = false;
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    const trace_event& e = t.events[i];
    if (e.op == trace_event_op::phase) {
      has_phases = true;
    } else if (e.op == trace_event_op::alloc) {
      std::uint64_t addr = cursor;
      if (options.alloc_addresses.empty()) {
        cursor += block_bytes(e.bytes);
      } else if (e.alloc_id < options.alloc_addresses.size()) {
        addr = options.alloc_addresses[e.alloc_id];
      } else {
        return trace_error{"<trace>", 0, 0,
                           fmt::format("an address for allocation id {} (event {})", e.alloc_id, i),
                           fmt::format("{} addresses", options.alloc_addresses.size())};
      }
      if (addr > UINT64_MAX - block_bytes(e.bytes)) {
        return trace_error{"<trace>", 0, 0, fmt::format("a usable address for allocation id {}", e.alloc_id),
                           fmt::format("{:#x}", addr)};
      }
      where[e.alloc_id] = placed{addr, e.bytes, true};
      lo = std::min(lo, addr);
      hi = std::max(hi, addr + block_bytes(e.bytes));
    } else if (e.op == trace_event_op::free) {
      where[e.alloc_id].live = false;
    }
  }

  pickle_writer w;
  w.begin_dict();
  w.str("segments");
  w.begin_list();
  if (!where.empty()) {
    std::vector<placed> live;
    for (const auto& [id, p] : where) {
      if (p.live) {
        live.push_back(p);
      }
    }
    write_segment(w, options.device, lo, hi, std::move(live));
  }
  w.end_list();

  w.str("device_traces");
  w.begin_list();
  for (std::uint32_t d = 0; d < options.device; ++d) {
    w.begin_list();
    w.end_list();
  }
  w.begin_list();
  std::string phase;
  const std::string* phase_ptr = has_phases ? &phase : nullptr;
  for (const trace_event& e : t.events) {
    switch (e.op) {
      case trace_event_op::phase: phase = t.strings[e.name]; break;
      case trace_event_op::alloc: write_entry(w, "alloc", where[e.alloc_id].addr, e, phase_ptr); break;
      case trace_event_op::free:
        write_entry(w, "free_requested", where[e.alloc_id].addr, e, phase_ptr);
        write_entry(w, "free_completed", where[e.alloc_id].addr, e, phase_ptr);
        break;
      case trace_event_op::oom: write_entry(w, "oom", 0, e, phase_ptr); break;
      default: break;  // segment events, record_stream, empty_cache: see the header
    }
  }
  w.end_list();
  w.end_list();

  w.str("allocator_settings");
  w.begin_dict();
  w.str("PYTORCH_CUDA_ALLOC_CONF");
  w.str(t.meta.allocator_settings);
  w.end_dict();
  w.str("external_annotations");
  w.begin_list();
  w.end_list();
  w.end_dict();
  return w.finish();
}

result<std::monostate, trace_error> export_snapshot_file(const trace& t, const std::filesystem::path& path,
                                                         const snapshot_export_options& options) {
  auto bytes = export_snapshot(t, options);
  if (!bytes) {
    return bytes.error();
  }
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.value().data(), static_cast<std::streamsize>(bytes.value().size()));
  out.flush();
  if (!out) {
    return trace_error{path.string(), 0, 0, "a writable file", "a write error"};
  }
  return std::monostate{};
}

}  // namespace phasealloc
