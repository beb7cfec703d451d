#include "phasealloc/import/snapshot_importer.hpp"

#include <fmt/format.h>

#include <cmath>
#include <optional>

#include "phasealloc/trace/file_bytes.hpp"
#include "import_builder.hpp"
#include "start_layout.hpp"

namespace phasealloc {
namespace {

constexpr std::size_t max_frames_scanned = 1024;
// Keys are looked up by a linear scan; a snapshot's dicts have about ten. A dict this large is not
// a snapshot's, and looking keys up in it once per shared reference would be quadratic.
constexpr std::size_t max_dict_entries = 64;
constexpr std::size_t max_layout_probe_blocks = 64;

std::size_t seeded_events(const trace& t) {
  std::size_t n = 0;
  for (const trace_event& e : t.events) {
    if ((e.flags & trace_flag::seeded) == 0) break;
    ++n;
  }
  return n;
}

class snapshot_walker {
 public:
  snapshot_walker(const pickle_document& doc, std::string_view source, const snapshot_import_options& options)
      : doc_(doc), source_(source), options_(options), builder_(trace_metadata{}) {
    // Work is elements visited. A real snapshot visits each a few times; a hostile one that shares
    // one huge list through the memo everywhere would multiply it.
    work_limit_ = 64 * static_cast<std::uint64_t>(doc.node_count()) + (std::uint64_t{1} << 22);
  }

  result<trace, trace_error> run() {
    const pickle_ref root = doc_.root();
    pickle_ref segments;
    pickle_ref device_traces;
    pickle_ref settings;
    std::string layout;
    if (root.kind() == pickle_kind::list) {
      segments = root;
      layout = "segments-only";
    } else if (root.is_dict()) {
      segments = root.get("segments");
      device_traces = root.get("device_traces");
      settings = root.get("allocator_settings");
      if (!segments.valid() && !device_traces.valid()) {
        return fail(root, "the snapshot", "a dict with 'segments' and 'device_traces'");
      }
    } else {
      return fail(root, "the snapshot", "a dict with 'segments' and 'device_traces', or a list of segments");
    }
    if (segments.valid() && segments.kind() != pickle_kind::list) {
      return fail(segments, "segments", "a list");
    }
    if (device_traces.valid() && device_traces.kind() != pickle_kind::list) {
      return fail(device_traces, "device_traces", "a list (one trace per device)");
    }
    if (layout.empty()) {
      layout = !device_traces.valid() ? "segments-only" : has_legacy_blocks(segments) ? "2.0" : "current";
    }
    const std::uint32_t device = choose_device(segments, device_traces);

    pickle_ref entries;
    if (device_traces.valid() && device < device_traces.size()) {
      entries = device_traces.at(device);
      if (entries.kind() != pickle_kind::list) {
        return fail(entries, fmt::format("device_traces[{}]", device), "a list of trace entries");
      }
    }
    if (entries.valid() && !walk_entries(entries, device)) {
      return std::move(*error_);
    }
    std::uint64_t reserved_at_end_bytes = 0;
    if (segments.valid() && !walk_segments(segments, device, reserved_at_end_bytes)) {
      return std::move(*error_);
    }

    if (!options_.recorded_layout) {
      // seeded segments and allocations only (version 1)
    } else if (segments.valid()) {
      auto start = layout_.build();
      if (start && !start.value().empty()) {
        builder_.set_layout(std::move(start).value());
      } else if (start) {
        builder_.layout_unknown("no segment was live when the history began");
      } else {
        builder_.layout_unknown(start.error());
      }
    } else {
      builder_.layout_unknown("the snapshot has no 'segments'");
    }
    trace t = builder_.finish();
    t.meta.source = fmt::format("pytorch snapshot {}", source_);
    set_property(t.meta, "pytorch.layout", layout);
    set_property(t.meta, "pytorch.device", std::to_string(device));
    set_property(t.meta, "pytorch.trace_entries", std::to_string(entries.size()));
    set_property(t.meta, "import.phase_source", phase_source_);
    set_property(t.meta, "import.ignored_actions", std::to_string(ignored_actions_));
    set_property(t.meta, "pytorch.deferred_frees", std::to_string(deferred_frees_ + pending_frees_));
    set_property(t.meta, "import.reserved_at_end_bytes", std::to_string(reserved_at_end_bytes));
    set_property(t.meta, "recorded.source", "snapshot segments and history");
    set_property(t.meta, "recorded.segments_at_end", std::to_string(segments_at_end_));
    set_property(t.meta, "pytorch.pending_free_blocks_at_end", std::to_string(pending_free_blocks_));
    const std::string* layout_note = find_property(t.meta, "import.layout");
    const bool from_layout = t.version >= trace_format_version_layout;
    set_property(t.meta, "snapshot.start",
                 entries.size() == 0 ? (from_layout ? "state only (no history): the pytorch model holds its segments"
                                                    : "state only (no history)")
                 : from_layout       ? "history begins with segments live: the pytorch model starts from the "
                                       "recorded layout"
                 : seeded_events(t) == 0
                     ? "history begins from an empty allocator"
                     : fmt::format("history begins with segments live; recorded layout {}",
                                   layout_note != nullptr ? *layout_note : "not used"));
    if (settings.is_dict()) {
      record_settings(settings, t.meta);
    }
    return detail::valid_import(std::move(t), source_);
  }

 private:
  trace_error make_error(pickle_ref at, std::string_view path, std::string_view expected,
                         std::optional<std::uint64_t> offset = std::nullopt) const {
    return trace_error{std::string(source_), offset.value_or(at.offset()), 0, fmt::format("{}: {}", path, expected),
                       at.describe()};
  }
  trace_error fail(pickle_ref at, std::string_view path, std::string_view expected) {
    error_ = make_error(at, path, expected);
    return *error_;
  }
  bool failed(pickle_ref at, std::string_view path, std::string_view expected,
              std::optional<std::uint64_t> offset = std::nullopt, std::optional<std::string> found = std::nullopt) {
    error_ = make_error(at, path, expected, offset);
    if (found) error_->found = *found;
    return false;
  }

  bool tick(pickle_ref at) {
    if (++work_ > work_limit_) {
      return failed(at, "the snapshot", "a snapshot whose shared sub-structures do not multiply the work");
    }
    return true;
  }

  bool small_dict(pickle_ref dict, std::string_view path, std::string_view what) {
    if (!dict.is_dict()) {
      return failed(dict, path, fmt::format("a {} dict", what));
    }
    if (dict.size() > max_dict_entries) {
      return failed(dict, path, fmt::format("a {} dict of at most {} keys ({} keys)", what, max_dict_entries,
                                            dict.size()));
    }
    return true;
  }

  // An int field; absent -> fallback (or an error when `fallback` is empty).
  bool int_field(pickle_ref dict, std::string_view key, std::string_view path, std::optional<std::int64_t> fallback,
                 std::int64_t& out) {
    const pickle_ref value = dict.get(key);
    if (!value.valid()) {
      if (!fallback) {
        return failed(dict, fmt::format("{}['{}']", path, key), "an int (the key is missing)");
      }
      out = *fallback;
      return true;
    }
    if (!value.is_int()) {
      return failed(value, fmt::format("{}['{}']", path, key), "an int");
    }
    out = value.as_int();
    return true;
  }
  bool size_field(pickle_ref dict, std::string_view key, std::string_view path, std::optional<std::int64_t> fallback,
                  std::uint64_t& out) {
    std::int64_t v = 0;
    if (!int_field(dict, key, path, fallback, v)) {
      return false;
    }
    if (v < 0) {
      return failed(dict.get(key), fmt::format("{}['{}']", path, key), "a non-negative int");
    }
    out = static_cast<std::uint64_t>(v);
    return true;
  }

  // Looks at the first blocks only: a snapshot has one layout throughout.
  static bool has_legacy_blocks(pickle_ref segments) {
    std::size_t probed = 0;
    for (std::size_t i = 0; i < segments.size() && probed < max_layout_probe_blocks; ++i) {
      const pickle_ref segment = segments.at(i);
      if (!segment.is_dict() || segment.size() > max_dict_entries) {
        continue;
      }
      const pickle_ref blocks = segment.get("blocks");
      for (std::size_t j = 0; j < blocks.size() && probed < max_layout_probe_blocks; ++j, ++probed) {
        const pickle_ref block = blocks.at(j);
        if (!block.is_dict() || block.size() > max_dict_entries) {
          continue;
        }
        if (block.get("history").valid()) {
          return true;
        }
        if (block.get("requested_size").valid()) {
          return false;
        }
      }
    }
    return false;
  }

  std::uint32_t choose_device(pickle_ref segments, pickle_ref device_traces) const {
    if (options_.device) {
      return *options_.device;
    }
    for (std::size_t i = 0; i < device_traces.size(); ++i) {
      if (device_traces.at(i).size() > 0) {
        return static_cast<std::uint32_t>(i);
      }
    }
    if (segments.size() > 0) {
      const std::int64_t device = segments.at(0).get("device").as_int();
      if (device >= 0 && device <= INT32_MAX) {
        return static_cast<std::uint32_t>(device);
      }
    }
    return 0;
  }

  // --- phases ------------------------------------------------------------------------------------
  bool any_user_metadata(pickle_ref entries, std::uint32_t device) {
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const pickle_ref entry = entries.at(i);
      if (!tick(entries) ||
          !small_dict(entry, fmt::format("device_traces[{}][{}]", device, i), "trace entry")) {
        return false;
      }
      if (!entry.get("user_metadata").as_str().empty()) {
        use_metadata_ = true;
        return true;
      }
    }
    return true;
  }

  bool apply_phase(pickle_ref entry, std::string_view path) {
    if (use_metadata_) {
      const pickle_ref md = entry.get("user_metadata");
      if (!md.valid()) {
        return true;
      }
      if (!md.is_str()) {
        return failed(md, fmt::format("{}['user_metadata']", path), "a str");
      }
      if (md.as_str() != current_phase_) {
        current_phase_ = md.as_str();
        builder_.phase(current_phase_);
      }
      return true;
    }
    if (options_.phase_rules.empty()) {
      return true;
    }
    const pickle_ref frames = entry.get("frames");
    const std::size_t n = std::min(frames.size(), max_frames_scanned);
    for (std::size_t f = 0; f < n; ++f) {
      const pickle_ref frame = frames.at(f);
      if (!tick(frame)) {
        return false;
      }
      if (!frame.is_dict() || frame.size() > max_dict_entries) {
        continue;  // not a frame dict: it names no function
      }
      const std::string_view name = frame.get("name").as_str();
      const std::string_view filename = frame.get("filename").as_str();
      for (const phase_rule& rule : options_.phase_rules) {
        if (rule.frame_substring.empty()) {
          continue;
        }
        if (name.find(rule.frame_substring) != std::string_view::npos ||
            filename.find(rule.frame_substring) != std::string_view::npos) {
          if (rule.phase != current_phase_) {
            current_phase_ = rule.phase;
            builder_.phase(current_phase_);
          }
          return true;
        }
      }
    }
    return true;
  }

  // --- device_traces[device] -----------------------------------------------------------------------
  bool walk_entries(pickle_ref entries, std::uint32_t device) {
    if (!any_user_metadata(entries, device)) {
      return false;
    }
    phase_source_ = use_metadata_ ? "user_metadata" : options_.phase_rules.empty() ? "none" : "frame_rules";
    for (std::size_t i = 0; i < entries.size(); ++i) {
      const pickle_ref entry = entries.at(i);
      const std::string path = fmt::format("device_traces[{}][{}]", device, i);
      if (!tick(entry)) {
        return false;
      }
      if (!small_dict(entry, path, "trace entry")) {
        return false;
      }
      const pickle_ref action_ref = entry.get("action");
      if (!action_ref.is_str()) {
        return failed(action_ref.valid() ? action_ref : entry, fmt::format("{}['action']", path), "a str");
      }
      const std::string_view action = action_ref.as_str();
      const pickle_ref time = entry.get("time_us");
      if (time.valid()) {
        if (!time.is_number()) {
          return failed(time, fmt::format("{}['time_us']", path), "a number");
        }
        const double us = time.as_float();
        if (!(us >= 0.0) || us > 1.8e16) {
          return failed(time, fmt::format("{}['time_us']", path), "a non-negative time in microseconds");
        }
        builder_.set_time_ns(time.kind() == pickle_kind::floating
                                 ? static_cast<std::uint64_t>(std::llround(us * 1000.0))
                                 : static_cast<std::uint64_t>(time.as_int()) * 1000);
      }
      if (!apply_phase(entry, path)) {
        return false;
      }
      std::int64_t stream = 0;
      if (!int_field(entry, "stream", path, 0, stream)) {
        return false;
      }
      const auto stream_handle = static_cast<std::uint64_t>(stream);
      std::uint64_t addr = 0;
      std::uint64_t size = 0;
      const bool has_address = action == "alloc" || action == "free_requested" || action == "segment_alloc" ||
                               action == "segment_free";
      if (has_address && !size_field(entry, "addr", path, std::nullopt, addr)) {
        return false;
      }
      const bool has_size = has_address || action == "segment_map" || action == "segment_unmap" || action == "oom";
      if (has_size && !size_field(entry, "size", path, std::nullopt, size)) {
        return false;
      }
      const bool completes_previous = action == "free_completed" && previous_free_requested_ &&
                                      *previous_free_requested_ == entry.get("addr").as_int();
      previous_free_requested_.reset();
      using act = detail::start_layout::action;
      const auto entry_addr = static_cast<std::uint64_t>(std::max<std::int64_t>(entry.get("addr").as_int(), 0));
      if (action == "alloc") layout_.history(act::alloc, addr, size, stream_handle, path);
      if (action == "free_requested") layout_.history(act::free_requested, addr, size, stream_handle, path);
      if (action == "segment_alloc") layout_.history(act::segment_alloc, addr, size, stream_handle, path);
      if (action == "segment_free") layout_.history(act::segment_free, addr, size, stream_handle, path);
      if (action == "segment_map") layout_.history(act::segment_map, entry_addr, size, stream_handle, path);
      if (action == "segment_unmap") layout_.history(act::segment_unmap, entry_addr, size, stream_handle, path);
      if (action == "alloc") {
        builder_.alloc(addr, size, stream_handle);
      } else if (action == "free_requested") {
        builder_.free(addr, size, stream_handle);
        previous_free_requested_ = static_cast<std::int64_t>(addr);
        ++pending_frees_;
      } else if (action == "free_completed") {
        // A free completes at once unless other streams still used the block (record_stream).
        if (!completes_previous) {
          ++deferred_frees_;
        }
        pending_frees_ -= pending_frees_ > 0 ? 1 : 0;
      } else if (action == "segment_alloc") {
        builder_.segment_alloc(addr, size, stream_handle);
      } else if (action == "segment_free") {
        builder_.segment_free(addr, size, stream_handle);
      } else if (action == "segment_map") {
        builder_.segment_map(size, stream_handle);
      } else if (action == "segment_unmap") {
        builder_.segment_unmap(size, stream_handle);
      } else if (action == "oom") {
        builder_.oom(size, stream_handle);
      } else if (action != "snapshot") {
        ++ignored_actions_;
      }
    }
    return true;
  }

  // --- segments (the state at the end) ---------------------------------------------------------------
  bool walk_segments(pickle_ref segments, std::uint32_t device, std::uint64_t& reserved_at_end_bytes) {
    for (std::size_t i = 0; i < segments.size(); ++i) {
      const pickle_ref seg = segments.at(i);
      const std::string path = fmt::format("segments[{}]", i);
      if (!tick(seg)) {
        return false;
      }
      if (!small_dict(seg, path, "segment")) {
        return false;
      }
      std::int64_t seg_device = 0;
      if (!int_field(seg, "device", path, static_cast<std::int64_t>(device), seg_device)) {
        return false;
      }
      if (seg_device != static_cast<std::int64_t>(device)) {
        continue;
      }
      std::uint64_t address = 0;
      std::uint64_t total_size = 0;
      std::int64_t stream = 0;
      if (!size_field(seg, "address", path, std::nullopt, address) ||
          !size_field(seg, "total_size", path, std::nullopt, total_size) ||
          !int_field(seg, "stream", path, 0, stream)) {
        return false;
      }
      reserved_at_end_bytes += total_size;
      ++segments_at_end_;
      builder_.live_at_end_segment(address, total_size, static_cast<std::uint64_t>(stream));
      const pickle_ref type = seg.get("segment_type");
      const bool small = type.is_str() ? type.as_str() == "small" : total_size <= (std::uint64_t{2} << 20);
      const pickle_ref expandable = seg.get("is_expandable");
      layout_.end_segment(address, total_size, static_cast<std::uint64_t>(stream), small,
                          expandable.valid() && expandable.as_int() != 0);
      seg_start_ = address;
      seg_end_ = address + total_size;
      const pickle_ref blocks = seg.get("blocks");
      if (!blocks.valid()) {
        continue;
      }
      if (blocks.kind() != pickle_kind::list) {
        return failed(blocks, fmt::format("{}['blocks']", path), "a list");
      }
      std::uint64_t running = address;
      for (std::size_t j = 0; j < blocks.size(); ++j) {
        if (!walk_block(blocks.at(j), fmt::format("{}['blocks'][{}]", path, j), static_cast<std::uint64_t>(stream),
                        running)) {
          return false;
        }
      }
    }
    return true;
  }

  bool walk_block(pickle_ref block, const std::string& path, std::uint64_t stream, std::uint64_t& running) {
    if (!tick(block)) {
      return false;
    }
    if (!small_dict(block, path, "block")) {
      return false;
    }
    std::uint64_t size = 0;
    std::uint64_t address = running;
    if (!size_field(block, "size", path, std::nullopt, size) ||
        !size_field(block, "address", path, static_cast<std::int64_t>(running), address)) {
      return false;
    }
    if (address < running || address > seg_end_ || size > seg_end_ - address) {
      return failed(block, path,
                    fmt::format("a block inside its segment [{:#x}, +{}) after the block before it (ending at {:#x})",
                                seg_start_, seg_end_ - seg_start_, running),
                    std::nullopt, fmt::format("a block of {} bytes at {:#x}", size, address));
    }
    running = address + size;
    const std::string_view state = block.get("state").as_str();
    pending_free_blocks_ += state == "active_pending_free" ? 1 : 0;
    if (state != "active_allocated") {
      return true;
    }
    std::uint64_t requested = size;
    if (block.get("requested_size").valid()) {
      if (!size_field(block, "requested_size", path, std::nullopt, requested)) {
        return false;
      }
    } else if (const pickle_ref history = block.get("history"); history.size() > 0) {
      // 2.0-era: history[0] is the most recent allocation of the block.
      const pickle_ref latest = history.at(0);
      if (latest.is_dict() && latest.size() <= max_dict_entries && latest.get("real_size").is_int() &&
          latest.get("real_size").as_int() >= 0) {
        requested = static_cast<std::uint64_t>(latest.get("real_size").as_int());
      }
    }
    builder_.live_at_end_alloc(address, requested, stream);
    layout_.end_block(address, size, requested);
    return true;
  }

  void record_settings(pickle_ref settings, trace_metadata& meta) {
    for (std::size_t i = 0; i < settings.size() && i < max_dict_entries; ++i) {
      const pickle_ref key = settings.key_at(i);
      const pickle_ref value = settings.value_at(i);
      if (!key.is_str()) {
        continue;
      }
      const std::string name = fmt::format("pytorch.{}", key.as_str());
      if (key.as_str() == "PYTORCH_CUDA_ALLOC_CONF" && value.is_str()) {
        meta.allocator_settings = std::string(value.as_str());
      }
      switch (value.kind()) {
        case pickle_kind::boolean: set_property(meta, name, value.as_int() != 0 ? "True" : "False"); break;
        case pickle_kind::integer: set_property(meta, name, std::to_string(value.as_int())); break;
        case pickle_kind::floating: set_property(meta, name, fmt::format("{}", value.as_float())); break;
        case pickle_kind::string: set_property(meta, name, value.as_str()); break;
        case pickle_kind::dict: {  // roundup_power2_divisions: {"1": 0, "2": 0, ...}
          std::string joined;
          for (std::size_t j = 0; j < value.size() && j < 256; ++j) {
            const pickle_ref k = value.key_at(j);
            const pickle_ref v = value.value_at(j);
            if (k.is_str() && v.is_int()) {
              joined += fmt::format("{}{}:{}", joined.empty() ? "" : ",", k.as_str(), v.as_int());
            }
          }
          set_property(meta, name, joined);
          break;
        }
        default: break;
      }
    }
  }

  const pickle_document& doc_;
  std::string_view source_;
  const snapshot_import_options& options_;
  detail::import_builder builder_;
  std::uint64_t work_ = 0;
  std::uint64_t work_limit_ = 0;
  std::uint64_t ignored_actions_ = 0;
  std::uint64_t deferred_frees_ = 0;  // free_completed later than right after its free_requested
  std::uint64_t pending_frees_ = 0;   // free_requested not completed (yet)
  std::optional<std::int64_t> previous_free_requested_;
  bool use_metadata_ = false;
  std::string current_phase_;
  std::string phase_source_ = "none";
  std::optional<trace_error> error_;
  detail::start_layout layout_;
  std::uint64_t seg_start_ = 0;
  std::uint64_t seg_end_ = UINT64_MAX;
  std::size_t segments_at_end_ = 0;
  std::size_t pending_free_blocks_ = 0;
};

}  // namespace

result<trace, trace_error> import_snapshot(const pickle_document& doc, std::string_view source_name,
                                           const snapshot_import_options& options) {
  return snapshot_walker(doc, source_name, options).run();
}

result<trace, trace_error> import_snapshot(std::string_view pickle_bytes, std::string_view source_name,
                                           const snapshot_import_options& options) {
  auto doc = read_pickle(pickle_bytes, source_name, options.limits);
  if (!doc) {
    return doc.error();
  }
  return import_snapshot(doc.value(), source_name, options);
}

result<trace, trace_error> import_snapshot_file(const std::filesystem::path& path,
                                                const snapshot_import_options& options) {
  auto bytes = read_file_bytes(path);
  if (!bytes) {
    return bytes.error();
  }
  return import_snapshot(bytes.value(), path.string(), options);
}

}  // namespace phasealloc
