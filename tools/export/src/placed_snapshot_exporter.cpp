#include "phasealloc/export/placed_snapshot_exporter.hpp"

#include <fstream>

#include <fmt/format.h>

#include "phasealloc/export/pickle_writer.hpp"

namespace phasealloc {
namespace {

void key_int(pickle_writer& w, std::string_view key, std::uint64_t value) {
  w.str(key);
  w.integer(static_cast<std::int64_t>(value));
}

void key_str(pickle_writer& w, std::string_view key, std::string_view value) {
  w.str(key);
  w.str(value);
}

void empty_frames(pickle_writer& w) {
  w.str("frames");
  w.begin_list();
  w.end_list();
}

void write_segment(pickle_writer& w, std::uint32_t device, const placed_segment& seg) {
  std::size_t total = 0, allocated = 0, active = 0, requested = 0;
  for (const placed_block& b : seg.blocks) {
    total += b.size;
    if (b.state == "active_allocated") allocated += b.size;
    if (b.state != "inactive") {
      active += b.size;
      requested += b.requested;
    }
  }
  w.begin_dict();
  key_int(w, "device", device);
  key_int(w, "address", seg.addr);
  key_int(w, "total_size", total);
  key_int(w, "allocated_size", allocated);
  key_int(w, "active_size", active);
  key_int(w, "requested_size", requested);
  key_int(w, "stream", seg.stream);
  key_str(w, "segment_type", seg.small ? "small" : "large");
  w.str("segment_pool_id");  // (0, 0): the default pool; phasealloc has no CUDA-graph private pools
  w.begin_tuple();
  w.integer(0);
  w.integer(0);
  w.end_tuple();
  w.str("is_expandable");
  w.boolean(seg.expandable);
  key_str(w, "pool", seg.pool);
  empty_frames(w);
  w.str("blocks");
  w.begin_list();
  for (const placed_block& b : seg.blocks) {
    w.begin_dict();
    key_int(w, "address", b.addr);
    key_int(w, "size", b.size);
    key_int(w, "requested_size", b.requested);
    key_str(w, "state", b.state);
    empty_frames(w);
    w.end_dict();
  }
  w.end_list();
  w.end_dict();
}

void write_entry(pickle_writer& w, const placed_trace_entry& e, bool phases) {
  w.begin_dict();
  key_str(w, "action", e.action);
  key_int(w, "addr", e.addr);
  key_int(w, "size", e.size);
  key_int(w, "stream", e.stream);
  key_int(w, "time_us", e.time_us);
  if (e.action == "oom") key_int(w, "device_free", e.device_free);
  if (phases) key_str(w, "user_metadata", e.phase);
  empty_frames(w);
  w.end_dict();
}

}  // namespace

std::string export_placed_snapshot(const placed_snapshot& s) {
  bool phases = false;
  for (const placed_trace_entry& e : s.entries) phases = phases || !e.phase.empty();
  pickle_writer w;
  w.begin_dict();
  w.str("segments");
  w.begin_list();
  for (const placed_segment& seg : s.segments) write_segment(w, s.device, seg);
  w.end_list();
  w.str("device_traces");
  w.begin_list();
  for (std::uint32_t d = 0; d < s.device; ++d) {
    w.begin_list();
    w.end_list();
  }
  w.begin_list();
  for (const placed_trace_entry& e : s.entries) write_entry(w, e, phases);
  w.end_list();
  w.end_list();
  w.str("allocator_settings");
  w.begin_dict();
  key_str(w, "PYTORCH_CUDA_ALLOC_CONF", s.allocator_settings);
  w.end_dict();
  w.str("external_annotations");
  w.begin_list();
  w.end_list();
  w.end_dict();
  return w.finish();
}

result<std::monostate, std::string> export_placed_snapshot_file(const placed_snapshot& s,
                                                                const std::filesystem::path& path) {
  const std::string bytes = export_placed_snapshot(s);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out) return fmt::format("{}: could not write the snapshot ({} bytes)", path.string(), bytes.size());
  return std::monostate{};
}

}  // namespace phasealloc
