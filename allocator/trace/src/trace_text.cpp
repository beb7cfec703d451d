#include "phasealloc/trace/trace_text.hpp"

#include <fmt/format.h>

#include <charconv>
#include <istream>
#include <iterator>
#include <ostream>
#include <vector>

#include "phasealloc/trace/file_bytes.hpp"

namespace phasealloc {
namespace {

void append_quoted(std::string& out, std::string_view s) {
  out.push_back('"');
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (u < 0x20 || u == 0x7f) {
          out += fmt::format("\\x{:02x}", u);
        } else {
          out.push_back(c);
        }
    }
  }
  out.push_back('"');
}

struct token {
  std::string text;
  bool quoted = false;
};

// Splits one line into tokens; quoted tokens are unescaped. An unquoted '#' ends the line.
bool tokenize(std::string_view line, std::vector<token>& tokens, std::string& problem) {
  tokens.clear();
  std::size_t i = 0;
  while (i < line.size()) {
    const char c = line[i];
    if (c == ' ' || c == '\t' || c == '\r') {
      ++i;
      continue;
    }
    if (c == '#') {
      break;
    }
    token tok;
    if (c != '"') {
      const std::size_t start = i;
      while (i < line.size() && line[i] != ' ' && line[i] != '\t' && line[i] != '\r' && line[i] != '#') {
        ++i;
      }
      tok.text.assign(line.substr(start, i - start));
      tokens.push_back(std::move(tok));
      continue;
    }
    tok.quoted = true;
    ++i;
    bool closed = false;
    while (i < line.size()) {
      const char d = line[i++];
      if (d == '"') {
        closed = true;
        break;
      }
      if (d != '\\') {
        tok.text.push_back(d);
        continue;
      }
      if (i >= line.size()) {
        break;
      }
      const char e = line[i++];
      switch (e) {
        case '"': tok.text.push_back('"'); break;
        case '\\': tok.text.push_back('\\'); break;
        case 'n': tok.text.push_back('\n'); break;
        case 'r': tok.text.push_back('\r'); break;
        case 't': tok.text.push_back('\t'); break;
        case 'x': {
          unsigned value = 0;
          const char* first = line.data() + i;
          const char* last = line.data() + std::min(line.size(), i + 2);
          const auto [ptr, ec] = std::from_chars(first, last, value, 16);
          if (ec != std::errc{} || ptr != last || last - first != 2) {
            problem = "a \\x escape with two hex digits";
            return false;
          }
          tok.text.push_back(static_cast<char>(value));
          i += 2;
          break;
        }
        default: problem = fmt::format("a known escape (\\\" \\\\ \\n \\r \\t \\xHH), found \\{}", e); return false;
      }
    }
    if (!closed) {
      problem = "a closing '\"'";
      return false;
    }
    tokens.push_back(std::move(tok));
  }
  return true;
}

template <class T>
bool parse_number(const token& tok, T& value) {
  if (tok.quoted || tok.text.empty()) {
    return false;
  }
  const char* first = tok.text.data();
  const char* last = first + tok.text.size();
  const auto [ptr, ec] = std::from_chars(first, last, value, 10);
  return ec == std::errc{} && ptr == last;
}

class text_parser {
 public:
  text_parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  result<trace, trace_error> parse() {
    bool header_seen = false;
    bool events_started = false;
    std::size_t pos = 0;
    while (pos < text_.size()) {
      const std::size_t eol = text_.find('\n', pos);
      const std::size_t end = eol == std::string_view::npos ? text_.size() : eol;
      line_start_ = pos;
      ++line_;
      const std::string_view line = text_.substr(pos, end - pos);
      pos = end + (eol == std::string_view::npos ? 0 : 1);

      if (!header_seen) {
        if (is_blank(line)) {
          continue;
        }
        if (auto err = parse_header(line); !err.expected.empty()) {
          return err;
        }
        header_seen = true;
        continue;
      }
      std::string problem;
      if (!tokenize(line, tokens_, problem)) {
        return error(problem);
      }
      if (tokens_.empty()) {
        continue;
      }
      const token& first = tokens_[0];
      const bool is_event = !first.quoted && !first.text.empty() && first.text[0] >= '0' && first.text[0] <= '9';
      if (is_event) {
        events_started = true;
        if (auto err = parse_event(); !err.expected.empty()) {
          return err;
        }
        continue;
      }
      if (events_started) {
        return error("an event line (header lines come before the first event)", fmt::format("'{}'", first.text));
      }
      if (auto err = parse_header_line(); !err.expected.empty()) {
        return err;
      }
    }
    if (!header_seen) {
      return error(fmt::format("the header line '{} v{}'", trace_text_header, trace_format_version), "no lines");
    }
    return std::move(t_);
  }

 private:
  static bool is_blank(std::string_view line) {
    return line.find_first_not_of(" \t\r") == std::string_view::npos;
  }

  trace_error error(std::string expected, std::string found = {}) const {
    return trace_error{std::string(source_), line_start_, line_, std::move(expected), std::move(found)};
  }

  trace_error parse_header(std::string_view line) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) {
      line.remove_suffix(1);
    }
    const std::string expected = fmt::format("the header line '{} v{}'", trace_text_header, trace_format_version);
    if (line.substr(0, trace_text_header.size()) != trace_text_header) {
      return error(expected, fmt::format("'{}'", line.substr(0, 60)));
    }
    std::string_view rest = line.substr(trace_text_header.size());
    if (rest.size() < 3 || rest[0] != ' ' || rest[1] != 'v') {
      return error(expected, fmt::format("'{}'", line.substr(0, 60)));
    }
    rest.remove_prefix(2);
    std::uint32_t version = 0;
    const auto [ptr, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), version);
    if (ec != std::errc{} || ptr != rest.data() + rest.size()) {
      return error(expected, fmt::format("'{}'", line.substr(0, 60)));
    }
    if (version == 0 || version > trace_format_version) {
      return error(fmt::format("a trace format version from 1 to {}", trace_format_version),
                   fmt::format("version {}", version));
    }
    t_.version = version;
    return {};
  }

  trace_error parse_header_line() {
    const std::string& key = tokens_[0].text;
    auto want = [&](std::size_t n, std::string_view shape) -> trace_error {
      if (tokens_.size() != n) {
        return error(fmt::format("'{}'", shape), fmt::format("{} fields", tokens_.size()));
      }
      return {};
    };
    if (key == "source" || key == "allocator_settings") {
      if (auto err = want(2, key + " \"text\""); !err.expected.empty()) {
        return err;
      }
      if (!tokens_[1].quoted) {
        return error(fmt::format("a quoted string after {}", key), fmt::format("'{}'", tokens_[1].text));
      }
      (key == "source" ? t_.meta.source : t_.meta.allocator_settings) = tokens_[1].text;
      return {};
    }
    if (key == "device_capacity_bytes") {
      if (auto err = want(2, "device_capacity_bytes <integer>"); !err.expected.empty()) {
        return err;
      }
      if (!parse_number(tokens_[1], t_.meta.device_capacity_bytes)) {
        return error("an unsigned integer after device_capacity_bytes", fmt::format("'{}'", tokens_[1].text));
      }
      return {};
    }
    if (key == "stream_count") {
      if (auto err = want(2, "stream_count <integer>"); !err.expected.empty()) {
        return err;
      }
      if (!parse_number(tokens_[1], t_.meta.stream_count)) {
        return error("a 32-bit unsigned integer after stream_count", fmt::format("'{}'", tokens_[1].text));
      }
      return {};
    }
    if (key == "property") {
      if (auto err = want(3, "property \"key\" \"value\""); !err.expected.empty()) {
        return err;
      }
      if (!tokens_[1].quoted || !tokens_[2].quoted) {
        return error("'property \"key\" \"value\"' with quoted key and value");
      }
      t_.meta.properties.push_back({tokens_[1].text, tokens_[2].text});
      return {};
    }
    if (key == "string") {
      if (auto err = want(3, "string <index> \"text\""); !err.expected.empty()) {
        return err;
      }
      std::size_t index = 0;
      if (!parse_number(tokens_[1], index) || index != t_.strings.size()) {
        return error(fmt::format("string index {} (indices count up from 0)", t_.strings.size()),
                     fmt::format("'{}'", tokens_[1].text));
      }
      if (!tokens_[2].quoted) {
        return error("a quoted string after the string index", fmt::format("'{}'", tokens_[2].text));
      }
      t_.strings.push_back(tokens_[2].text);
      return {};
    }
    return error(
        "an event line or a header line (source, allocator_settings, device_capacity_bytes, stream_count, "
        "property, string)",
        fmt::format("'{}'", key));
  }

  trace_error parse_event() {
    static constexpr std::string_view shape = "t_ns op alloc_id bytes stream tag name [flags]";
    if (tokens_.size() != 7 && tokens_.size() != 8) {
      return error(fmt::format("an event with 7 or 8 columns ({})", shape), fmt::format("{} columns", tokens_.size()));
    }
    trace_event e;
    if (!parse_number(tokens_[0], e.time_ns)) {
      return error("t_ns (an unsigned integer) in column 1", fmt::format("'{}'", tokens_[0].text));
    }
    const auto op = tokens_[1].quoted ? std::nullopt : parse_trace_event_op(tokens_[1].text);
    if (!op) {
      return error(
          "an op in column 2 (alloc, free, phase, empty_cache, record_stream, segment_alloc, segment_free, "
          "segment_map, segment_unmap, oom, seed_block)",
          fmt::format("'{}'", tokens_[1].text));
    }
    e.op = *op;
    if (!parse_number(tokens_[2], e.alloc_id)) {
      return error("alloc_id (an unsigned integer) in column 3", fmt::format("'{}'", tokens_[2].text));
    }
    if (!parse_number(tokens_[3], e.bytes)) {
      return error("bytes (an unsigned integer) in column 4", fmt::format("'{}'", tokens_[3].text));
    }
    if (!parse_number(tokens_[4], e.stream)) {
      return error("stream (a 32-bit unsigned integer) in column 5", fmt::format("'{}'", tokens_[4].text));
    }
    if (!parse_number(tokens_[5], e.tag)) {
      return error("tag (a 32-bit unsigned integer) in column 6", fmt::format("'{}'", tokens_[5].text));
    }
    if (!parse_number(tokens_[6], e.name)) {
      return error("name (a 32-bit unsigned integer) in column 7", fmt::format("'{}'", tokens_[6].text));
    }
    if (tokens_.size() == 8) {
      const token& flags = tokens_[7];
      const auto parsed = flags.quoted ? std::nullopt : parse_trace_flags(flags.text);
      if (!parsed) {
        return error(
            "flags in column 8: '-' or names joined by '|' (seeded, small_pool, expandable, allocated, unmapped)",
            fmt::format("'{}'", flags.text));
      }
      e.flags = *parsed;
    }
    t_.events.push_back(e);
    return {};
  }

  std::string_view text_;
  std::string_view source_;
  std::size_t line_start_ = 0;
  std::uint64_t line_ = 0;
  std::vector<token> tokens_;
  trace t_;
};

}  // namespace

std::string format_trace_text(const trace& t) {
  std::string out = fmt::format("{} v{}\n", trace_text_header, t.version);
  out += "source ";
  append_quoted(out, t.meta.source);
  out += "\nallocator_settings ";
  append_quoted(out, t.meta.allocator_settings);
  out += fmt::format("\ndevice_capacity_bytes {}\nstream_count {}\n", t.meta.device_capacity_bytes,
                     t.meta.stream_count);
  for (const auto& p : t.meta.properties) {
    out += "property ";
    append_quoted(out, p.key);
    out.push_back(' ');
    append_quoted(out, p.value);
    out.push_back('\n');
  }
  for (std::size_t i = 0; i < t.strings.size(); ++i) {
    out += fmt::format("string {} ", i);
    append_quoted(out, t.strings[i]);
    out.push_back('\n');
  }
  out += "# t_ns op alloc_id bytes stream tag name flags\n";
  for (const auto& e : t.events) {
    // Unknown flag bits cannot be spelled in text; they are dropped (validate() rejects them anyway).
    fmt::format_to(std::back_inserter(out), "{} {} {} {} {} {} {} {}", e.time_ns, to_string(e.op), e.alloc_id,
                   e.bytes, e.stream, e.tag, e.name, format_trace_flags(e.flags));
    if (e.op == trace_event_op::phase && e.name < t.strings.size()) {
      out += "  # ";
      std::string label;
      append_quoted(label, t.strings[e.name]);
      out += label;
    }
    out.push_back('\n');
  }
  return out;
}

result<std::monostate, trace_error> write_trace_text(const trace& t, std::ostream& out, std::string_view sink_name) {
  const std::string text = format_trace_text(t);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.flush();
  if (!out) {
    return trace_error{std::string(sink_name), 0, 0, fmt::format("to write {} bytes", text.size()), "a stream error"};
  }
  return std::monostate{};
}

result<trace, trace_error> parse_trace_text(std::string_view text, std::string_view source_name) {
  return text_parser(text, source_name).parse();
}

result<trace, trace_error> read_trace_text(std::istream& in, std::string_view source_name) {
  auto text = read_stream_bytes(in, source_name);
  if (!text) return text.error();
  return parse_trace_text(text.value(), source_name);
}

}  // namespace phasealloc
