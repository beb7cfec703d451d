#include "phasealloc/trace/trace_binary.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <istream>
#include <iterator>
#include <ostream>

#include "phasealloc/trace/file_bytes.hpp"
#include "prefault.hpp"
#include "varint.hpp"

namespace phasealloc {
namespace {

constexpr std::uint8_t head_op_mask = 0x0f;
constexpr std::uint8_t head_has_flags = 0x10;
constexpr std::uint8_t head_has_stream = 0x20;
constexpr std::uint8_t head_has_tag = 0x40;
constexpr std::uint8_t head_has_name = 0x80;
constexpr std::size_t min_event_bytes = 4;  // head, time, id, bytes

// Which id predictor an op uses: 0 none, 1 allocations, 2 segments.
int id_space(trace_event_op op) {
  switch (op) {
    case trace_event_op::alloc:
    case trace_event_op::free:
    case trace_event_op::record_stream:
    case trace_event_op::offload:
    case trace_event_op::restore: return 1;
    case trace_event_op::segment_alloc:
    case trace_event_op::segment_free:
    case trace_event_op::segment_map:
    case trace_event_op::segment_unmap: return 2;
    default: return 0;
  }
}
bool creates_id(trace_event_op op) { return op == trace_event_op::alloc || op == trace_event_op::segment_alloc; }

// Predicts ids so that sequential allocation ids cost one byte; writer and reader share it.
struct id_predictor {
  std::uint64_t last[3] = {0, 0, 0};
  bool any[3] = {false, false, false};

  std::uint64_t predict(trace_event_op op) const {
    const int space = id_space(op);
    if (space == 0) {
      return 0;
    }
    if (creates_id(op)) {
      return any[space] ? last[space] + 1 : 0;
    }
    return last[space];
  }
  void update(trace_event_op op, std::uint64_t id) {
    if (creates_id(op)) {
      const int space = id_space(op);
      last[space] = id;
      any[space] = true;
    }
  }
};

void put_string(std::string& out, std::string_view s) {
  detail::put_varint(out, s.size());
  out.append(s);
}

// What a field is called in an error message: a fixed name, or a pattern with one or two numbers
// ("event {} bytes"). Formatted only when a message is built, never on success: formatting every
// field's name of every event took 80% of the decoder's instructions.
class field_name {
 public:
  field_name(const char* text) : pattern_(text) {}  // NOLINT(google-explicit-constructor): a fixed name
  field_name(const char* pattern, std::uint64_t a) : pattern_(pattern), args_(1), a_(a) {}
  field_name(const char* pattern, std::uint64_t a, std::uint64_t b) : pattern_(pattern), args_(2), a_(a), b_(b) {}

  /// The same name with a prefix ("the length of " + name).
  field_name prefixed(const char* prefix) const {
    field_name out = *this;
    out.prefix_ = prefix;
    return out;
  }
  std::string str() const {
    std::string name = args_ == 0   ? std::string(pattern_)
                       : args_ == 1 ? fmt::format(fmt::runtime(pattern_), a_)
                                    : fmt::format(fmt::runtime(pattern_), a_, b_);
    return prefix_ == nullptr ? name : prefix_ + name;
  }

 private:
  const char* prefix_ = nullptr;
  const char* pattern_;
  int args_ = 0;
  std::uint64_t a_ = 0;
  std::uint64_t b_ = 0;
};

// A cursor over the input that turns every shortfall into a trace_error.
class byte_reader {
 public:
  byte_reader(std::string_view bytes, std::string_view source) : bytes_(bytes), source_(source) {}

  std::size_t offset() const { return pos_; }
  const std::uint8_t* here() const { return reinterpret_cast<const std::uint8_t*>(bytes_.data()) + pos_; }
  void skip(std::size_t n) { pos_ += std::min(n, remaining()); }
  std::size_t remaining() const { return bytes_.size() - pos_; }

  trace_error error(std::string expected, std::string found = {}, std::size_t at = SIZE_MAX) const {
    return trace_error{std::string(source_), at == SIZE_MAX ? pos_ : at, 0, std::move(expected), std::move(found)};
  }

  bool varint(std::uint64_t& value, const field_name& what, trace_error& err) {
    // With 10 bytes left (the longest varint) no byte needs a bounds check. A varint over 64
    // bits leaves pos_ as it was and takes the checked path below, which words its error.
    if (remaining() >= 10) [[likely]] {
      const auto* p = reinterpret_cast<const std::uint8_t*>(bytes_.data()) + pos_;
      std::uint64_t v = p[0];
      if (v < 0x80) {
        value = v;
        pos_ += 1;
        return true;
      }
      v &= 0x7f;
      for (std::size_t k = 1; k < 10; ++k) {
        const std::uint64_t b = p[k];
        if (k == 9 && b > 1) [[unlikely]] {
          break;
        }
        v |= (b & 0x7f) << (7 * k);
        if (b < 0x80) {
          value = v;
          pos_ += k + 1;
          return true;
        }
      }
    }
    return varint_checked(value, what, err);
  }

  bool varint_checked(std::uint64_t& value, const field_name& what, trace_error& err) {
    const std::size_t start = pos_;
    value = 0;
    for (int shift = 0; shift < 70; shift += 7) {
      if (pos_ >= bytes_.size()) [[unlikely]] {
        err = error(fmt::format("{} (a varint)", what.str()), "end of input", start);
        return false;
      }
      const auto byte = static_cast<std::uint8_t>(bytes_[pos_++]);
      if (shift == 63 && byte > 1) [[unlikely]] {
        err = error(fmt::format("{} (a varint of at most 64 bits)", what.str()), "a longer varint", start);
        return false;
      }
      value |= static_cast<std::uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) {
        return true;
      }
    }
    err = error(fmt::format("{} (a varint of at most 10 bytes)", what.str()), "a longer varint", start);
    return false;
  }

  bool byte(std::uint8_t& value, const field_name& what, trace_error& err) {
    if (pos_ < bytes_.size()) [[likely]] {
      value = static_cast<std::uint8_t>(bytes_[pos_++]);
      return true;
    }
    return end_of_input(what, err);
  }

  bool end_of_input(const field_name& what, trace_error& err) const {
    err = error(what.str(), "end of input");
    return false;
  }

  bool string(std::string& value, const field_name& what, trace_error& err) {
    const std::size_t start = pos_;
    std::uint64_t size = 0;
    if (!varint(size, what.prefixed("the length of "), err)) {
      return false;
    }
    if (size > remaining()) {
      err = error(fmt::format("{} ({} bytes)", what.str(), size), fmt::format("only {} bytes left", remaining()),
                  start);
      return false;
    }
    value.assign(bytes_.substr(pos_, size));
    pos_ += size;
    return true;
  }

  bool u32(std::uint32_t& value, const field_name& what, trace_error& err) {
    const std::size_t start = pos_;
    std::uint64_t v = 0;
    if (!varint(v, what, err)) {
      return false;
    }
    if (v > UINT32_MAX) [[unlikely]] {
      err = error(fmt::format("{} (at most {})", what.str(), UINT32_MAX), std::to_string(v), start);
      return false;
    }
    value = static_cast<std::uint32_t>(v);
    return true;
  }

 private:
  std::string_view bytes_;
  std::string_view source_;
  std::size_t pos_ = 0;
};

// The longest event: head, three 10-byte varints, flags, three 5-byte varints.
constexpr std::size_t max_event_bytes = 1 + 3 * 10 + 1 + 3 * 5;

// A varint at p (10 readable bytes), without bounds checks; false for one over 64 bits.
inline bool raw_varint(const std::uint8_t*& p, std::uint64_t& value) {
  std::uint64_t b = *p++;
  value = b & 0x7f;
  for (int shift = 7; b >= 0x80; shift += 7) {
    if (shift > 63) return false;
    b = *p++;
    if (shift == 63 && b > 1) return false;
    value |= (b & 0x7f) << shift;
  }
  return true;
}

inline bool raw_u32(const std::uint8_t*& p, std::uint32_t& value) {
  std::uint64_t v = 0;
  if (!raw_varint(p, v) || v > UINT32_MAX) return false;
  value = static_cast<std::uint32_t>(v);
  return true;
}

// One event from p (max_event_bytes readable) without bounds checks or error words: the bytes
// it took, or 0 when anything is off (then the checked decoder reads it again and words the error).
// Changes nothing but `e`.
inline std::size_t decode_event_fast(const std::uint8_t* p, std::uint64_t last_time_ns, const id_predictor& ids,
                                     trace_event& e) {
  const std::uint8_t* const start = p;
  const std::uint8_t head = *p++;
  const std::uint8_t op = head & head_op_mask;
  if (op >= trace_event_op_count) return 0;
  std::uint64_t dt = 0;
  std::uint64_t did = 0;
  if (!raw_varint(p, dt) || !raw_varint(p, did) || !raw_varint(p, e.bytes)) return 0;
  e.op = static_cast<trace_event_op>(op);
  e.time_ns = last_time_ns + detail::unzigzag(dt);
  e.alloc_id = ids.predict(e.op) + detail::unzigzag(did);
  e.flags = (head & head_has_flags) != 0 ? *p++ : 0;
  e.stream = 0;
  e.tag = 0;
  e.name = 0;
  if (((head & head_has_stream) != 0 && !raw_u32(p, e.stream)) || ((head & head_has_tag) != 0 && !raw_u32(p, e.tag)) ||
      ((head & head_has_name) != 0 && !raw_u32(p, e.name))) {
    return 0;
  }
  return static_cast<std::size_t>(p - start);
}

// Events read with decode_event_fast, one after another, while max_event_bytes are left.
struct fast_run {
  const std::uint8_t* p;
  std::size_t left;  // bytes from p to the end of the input
  std::uint64_t last_time_ns;
  id_predictor& ids;
  std::vector<trace_event>& out;
  std::size_t used = 0;  // bytes taken

  /// Reads up to `limit` events; how many (0 when the next one needs the checked reader).
  std::size_t decode(std::size_t limit) {
    std::size_t k = 0;
    for (; k < limit && left - used >= max_event_bytes; ++k) {
      trace_event e;
      const std::size_t n = decode_event_fast(p + used, last_time_ns, ids, e);
      if (n == 0) break;
      used += n;
      last_time_ns = e.time_ns;
      ids.update(e.op, e.alloc_id);
      out.push_back(e);
    }
    return k;
  }
};

}  // namespace

std::string encode_trace(const trace& t) {
  std::string out;
  out.reserve(64 + t.events.size() * 7);
  out.append(trace_binary_magic);
  detail::put_varint(out, t.version);
  detail::put_varint(out, 0);  // header flags
  put_string(out, t.meta.source);
  put_string(out, t.meta.allocator_settings);
  detail::put_varint(out, t.meta.device_capacity_bytes);
  detail::put_varint(out, t.meta.stream_count);
  detail::put_varint(out, t.meta.properties.size());
  for (const auto& p : t.meta.properties) {
    put_string(out, p.key);
    put_string(out, p.value);
  }
  detail::put_varint(out, t.strings.size());
  for (const auto& s : t.strings) {
    put_string(out, s);
  }
  detail::put_varint(out, t.events.size());
  id_predictor ids;
  std::uint64_t last_time_ns = 0;
  for (const auto& e : t.events) {
    std::uint8_t head = static_cast<std::uint8_t>(static_cast<std::uint8_t>(e.op) & head_op_mask);
    head |= e.flags != 0 ? head_has_flags : 0;
    head |= e.stream != 0 ? head_has_stream : 0;
    head |= e.tag != 0 ? head_has_tag : 0;
    head |= e.name != 0 ? head_has_name : 0;
    out.push_back(static_cast<char>(head));
    detail::put_varint(out, detail::zigzag(e.time_ns - last_time_ns));
    detail::put_varint(out, detail::zigzag(e.alloc_id - ids.predict(e.op)));
    detail::put_varint(out, e.bytes);
    if (e.flags != 0) {
      out.push_back(static_cast<char>(e.flags));
    }
    if (e.stream != 0) {
      detail::put_varint(out, e.stream);
    }
    if (e.tag != 0) {
      detail::put_varint(out, e.tag);
    }
    if (e.name != 0) {
      detail::put_varint(out, e.name);
    }
    last_time_ns = e.time_ns;
    ids.update(e.op, e.alloc_id);
  }
  return out;
}

result<std::monostate, trace_error> write_trace(const trace& t, std::ostream& out, std::string_view sink_name) {
  const std::string bytes = encode_trace(t);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  out.flush();
  if (!out) {
    return trace_error{std::string(sink_name), 0, 0, fmt::format("to write {} bytes", bytes.size()),
                       "a stream error"};
  }
  return std::monostate{};
}

result<trace, trace_error> decode_trace(std::string_view bytes, std::string_view source_name) {
  byte_reader in(bytes, source_name);
  if (bytes.substr(0, trace_binary_magic.size()) != trace_binary_magic) {
    return in.error("the binary trace magic \\x89PAT\\r\\n\\x1a\\n", "other bytes", 0);
  }
  in.skip(trace_binary_magic.size());

  trace t;
  trace_error err;
  std::uint64_t header_flags = 0;
  const std::size_t version_at = in.offset();
  if (!in.u32(t.version, "the format version", err)) {
    return err;
  }
  if (t.version == 0 || t.version > trace_format_version) {
    return in.error(fmt::format("a trace format version from 1 to {}", trace_format_version),
                    fmt::format("version {}", t.version), version_at);
  }
  const std::size_t flags_at = in.offset();
  if (!in.varint(header_flags, "the header flags", err)) {
    return err;
  }
  if (header_flags != 0) {
    return in.error("header flags 0", fmt::format("{:#x}", header_flags), flags_at);
  }
  if (!in.string(t.meta.source, "the source string", err) ||
      !in.string(t.meta.allocator_settings, "the allocator settings string", err) ||
      !in.varint(t.meta.device_capacity_bytes, "the device capacity", err) ||
      !in.u32(t.meta.stream_count, "the stream count", err)) {
    return err;
  }
  std::uint64_t count = 0;
  if (!in.varint(count, "the property count", err)) {
    return err;
  }
  t.meta.properties.reserve(std::min<std::uint64_t>(count, in.remaining() / 2));
  for (std::uint64_t i = 0; i < count; ++i) {
    trace_property p;
    if (!in.string(p.key, field_name("property {} key", i), err) ||
        !in.string(p.value, field_name("property {} value", i), err)) {
      return err;
    }
    t.meta.properties.push_back(std::move(p));
  }
  if (!in.varint(count, "the string count", err)) {
    return err;
  }
  t.strings.reserve(std::min<std::uint64_t>(count, in.remaining()));
  for (std::uint64_t i = 0; i < count; ++i) {
    std::string s;
    if (!in.string(s, field_name("string {}", i), err)) {
      return err;
    }
    t.strings.push_back(std::move(s));
  }
  if (!in.varint(count, "the event count", err)) {
    return err;
  }
  t.events.reserve(std::min<std::uint64_t>(count, in.remaining() / min_event_bytes));
  // Large reservations are mapped in ahead of the decoder a chunk at a time: one system call per
  // 1.25 MB instead of a page fault per 4 KiB, and the zeroed pages are still in cache when written.
  constexpr std::size_t prefault_chunk = std::size_t{1} << 15;  // events
  const bool prefault = t.events.capacity() >= 4 * prefault_chunk;
  std::size_t prefaulted = 0;  // events mapped in so far
  id_predictor ids;
  std::uint64_t last_time_ns = 0;
  for (std::uint64_t i = 0; i < count; ++i) {
    if (prefault && i >= prefaulted && prefaulted < t.events.capacity()) {
      const std::size_t n = std::min<std::size_t>(prefault_chunk, t.events.capacity() - prefaulted);
      detail::prefault_for_write(t.events.data() + prefaulted, n * sizeof(trace_event));
      prefaulted += n;
    }
    // A run of events the fast reader takes (up to the mapped-in ones), then at most one checked.
    const std::size_t run_limit = static_cast<std::size_t>(
        prefault && i < prefaulted ? std::min<std::uint64_t>(count - i, prefaulted - i) : count - i);
    fast_run run{in.here(), in.remaining(), last_time_ns, ids, t.events};
    if (const std::size_t took = run.decode(run_limit); took > 0) {
      in.skip(run.used);
      last_time_ns = run.last_time_ns;
      i += took - 1;
      continue;
    }
    const std::size_t event_at = in.offset();
    std::uint8_t head = 0;
    if (!in.byte(head, field_name("event {} of {} (its head byte)", i, count), err)) {
      return err;
    }
    const std::uint8_t op = head & head_op_mask;
    if (op >= trace_event_op_count) {
      return in.error(fmt::format("event {}: an op below {}", i, trace_event_op_count), std::to_string(op), event_at);
    }
    // Fields into locals, the event built whole at the end: a default-constructed event was
    // zeroed (rep stos) and then overwritten, a fifth of the decoder's own time.
    const auto kind = static_cast<trace_event_op>(op);
    std::uint64_t dt = 0;
    std::uint64_t did = 0;
    std::uint64_t bytes = 0;
    if (!in.varint(dt, field_name("event {} time delta", i), err) ||
        !in.varint(did, field_name("event {} id delta", i), err) ||
        !in.varint(bytes, field_name("event {} bytes", i), err)) {
      return err;
    }
    const std::uint64_t time_ns = last_time_ns + detail::unzigzag(dt);
    const std::uint64_t id = ids.predict(kind) + detail::unzigzag(did);
    std::uint8_t flags = 0;
    std::uint32_t stream = 0;
    std::uint32_t tag = 0;
    std::uint32_t name = 0;
    if ((head & (head_has_flags | head_has_stream | head_has_tag | head_has_name)) != 0) {
      if ((head & head_has_flags) != 0 && !in.byte(flags, field_name("event {} flags", i), err)) {
        return err;
      }
      if (((head & head_has_stream) != 0 && !in.u32(stream, field_name("event {} stream", i), err)) ||
          ((head & head_has_tag) != 0 && !in.u32(tag, field_name("event {} tag", i), err)) ||
          ((head & head_has_name) != 0 && !in.u32(name, field_name("event {} name", i), err))) {
        return err;
      }
    }
    last_time_ns = time_ns;
    ids.update(kind, id);
    t.events.push_back(trace_event{kind, flags, stream, time_ns, id, bytes, tag, name});
  }
  if (in.remaining() != 0) {
    return in.error("the end of the trace after the last event", fmt::format("{} more bytes", in.remaining()));
  }
  return t;
}

result<trace, trace_error> read_trace(std::istream& in, std::string_view source_name) {
  auto bytes = read_stream_bytes(in, source_name);
  if (!bytes) return bytes.error();
  return decode_trace(bytes.value(), source_name);
}

}  // namespace phasealloc
