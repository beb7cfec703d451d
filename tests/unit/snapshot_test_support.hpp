// Builds PyTorch-snapshot-shaped pickles for the importer and exporter tests.
#pragma once

#include <cstdint>
#include <optional>
#include <utility>
#include <string>
#include <vector>

#include "phasealloc/export/pickle_writer.hpp"

namespace phasealloc::testing {

struct snap_entry {
  snap_entry(std::string action_, std::int64_t addr_, std::int64_t size_, std::int64_t stream_ = 0,
             std::optional<std::int64_t> time_us_ = std::nullopt, std::vector<std::string> frame_names_ = {})
      : action(std::move(action_)),
        addr(addr_),
        size(size_),
        stream(stream_),
        time_us(time_us_),
        frame_names(std::move(frame_names_)) {}

  std::string action;
  std::int64_t addr = 0;
  std::int64_t size = 0;
  std::int64_t stream = 0;
  std::optional<std::int64_t> time_us;
  std::vector<std::string> frame_names;
  std::optional<std::string> user_metadata;
};

struct snap_block {
  std::int64_t size = 0;
  std::int64_t requested = 0;
  std::string state = "inactive";
};

struct snap_segment {
  std::int64_t device = 0;
  std::int64_t address = 0;
  std::int64_t stream = 0;
  std::vector<snap_block> blocks;
  bool expandable = false;  ///< Written as is_expandable (PyTorch >= 2.1 snapshots).
};

struct snap_options {
  bool legacy_blocks = false;      ///< 2.0-era: blocks with history instead of requested_size / address.
  bool with_settings = true;
  std::string alloc_conf;
};

inline void write_segment(pickle_writer& w, const snap_segment& s, const snap_options& o) {
  std::int64_t total = 0;
  for (const auto& b : s.blocks) total += b.size;
  w.begin_dict();
  w.str("device");
  w.integer(s.device);
  w.str("address");
  w.integer(s.address);
  w.str("total_size");
  w.integer(total);
  w.str("stream");
  w.integer(s.stream);
  w.str("segment_type");
  w.str("large");
  if (s.expandable) {
    w.str("is_expandable");
    w.boolean(true);
  }
  w.str("blocks");
  w.begin_list();
  std::int64_t addr = s.address;
  for (const auto& b : s.blocks) {
    w.begin_dict();
    w.str("size");
    w.integer(b.size);
    w.str("state");
    w.str(b.state);
    if (o.legacy_blocks) {
      w.str("history");
      w.begin_list();
      w.begin_dict();
      w.str("addr");
      w.integer(addr);
      w.str("real_size");
      w.integer(b.requested);
      w.end_dict();
      w.end_list();
    } else {
      w.str("address");
      w.integer(addr);
      w.str("requested_size");
      w.integer(b.requested);
    }
    w.end_dict();
    addr += b.size;
  }
  w.end_list();
  w.end_dict();
}

inline void write_entry(pickle_writer& w, const snap_entry& e) {
  w.begin_dict();
  w.str("action");
  w.str(e.action);
  w.str("addr");
  w.integer(e.addr);
  w.str("size");
  w.integer(e.size);
  w.str("stream");
  w.integer(e.stream);
  if (e.time_us) {
    w.str("time_us");
    w.integer(*e.time_us);
  }
  w.str("frames");
  w.begin_list();
  for (const auto& name : e.frame_names) {
    w.begin_dict();
    w.str("name");
    w.str(name);
    w.str("filename");
    w.str("??");
    w.str("line");
    w.integer(0);
    w.end_dict();
  }
  w.end_list();
  if (e.user_metadata) {
    w.str("user_metadata");
    w.str(*e.user_metadata);
  }
  w.end_dict();
}

inline std::string make_snapshot(const std::vector<snap_segment>& segments,
                                 const std::vector<std::vector<snap_entry>>& device_traces, const snap_options& o = {}) {
  pickle_writer w;
  w.begin_dict();
  w.str("segments");
  w.begin_list();
  for (const auto& s : segments) write_segment(w, s, o);
  w.end_list();
  w.str("device_traces");
  w.begin_list();
  for (const auto& trace : device_traces) {
    w.begin_list();
    for (const auto& e : trace) write_entry(w, e);
    w.end_list();
  }
  w.end_list();
  if (o.with_settings) {
    w.str("allocator_settings");
    w.begin_dict();
    w.str("PYTORCH_CUDA_ALLOC_CONF");
    w.str(o.alloc_conf);
    w.str("expandable_segments");
    w.boolean(false);
    w.str("max_split_size");
    w.integer(-1);
    w.str("garbage_collection_threshold");
    w.floating(0.0);
    w.str("roundup_power2_divisions");
    w.begin_dict();
    w.str("1");
    w.integer(0);
    w.str("2");
    w.integer(4);
    w.end_dict();
    w.end_dict();
  }
  w.end_dict();
  return w.finish();
}

}  // namespace phasealloc::testing
