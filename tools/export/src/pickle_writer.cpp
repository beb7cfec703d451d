#include "phasealloc/export/pickle_writer.hpp"

#include <bit>

namespace phasealloc {
namespace {

constexpr std::size_t memoized_string_bytes = 64;

}  // namespace

pickle_writer::pickle_writer() { out_ = "\x80\x02"; }

void pickle_writer::put_u32(std::uint32_t value) {
  for (int i = 0; i < 4; ++i) {
    out_.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
  }
}

void pickle_writer::none() { out_.push_back('N'); }
void pickle_writer::boolean(bool value) { out_.push_back(value ? '\x88' : '\x89'); }

void pickle_writer::integer(std::int64_t value) {
  if (value >= 0 && value < 0x100) {
    out_.push_back('K');
    out_.push_back(static_cast<char>(value));
  } else if (value >= 0 && value < 0x10000) {
    out_.push_back('M');
    out_.push_back(static_cast<char>(value & 0xff));
    out_.push_back(static_cast<char>(value >> 8));
  } else if (value >= INT32_MIN && value <= INT32_MAX) {
    out_.push_back('J');
    put_u32(static_cast<std::uint32_t>(static_cast<std::int32_t>(value)));
  } else {
    // LONG1: little-endian two's complement, as few bytes as keep the sign.
    std::string bytes;
    auto u = static_cast<std::uint64_t>(value);
    for (int i = 0; i < 8; ++i) {
      bytes.push_back(static_cast<char>(u & 0xff));
      u >>= 8;
    }
    while (bytes.size() > 1) {
      const auto last = static_cast<std::uint8_t>(bytes.back());
      const auto prev = static_cast<std::uint8_t>(bytes[bytes.size() - 2]);
      const bool redundant = (last == 0x00 && (prev & 0x80) == 0) || (last == 0xff && (prev & 0x80) != 0);
      if (!redundant) {
        break;
      }
      bytes.pop_back();
    }
    out_.push_back('\x8a');
    out_.push_back(static_cast<char>(bytes.size()));
    out_.append(bytes);
  }
}

void pickle_writer::floating(double value) {
  const auto bits = std::bit_cast<std::uint64_t>(value);
  out_.push_back('G');
  for (int i = 7; i >= 0; --i) {
    out_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  }
}

void pickle_writer::str(std::string_view value) {
  const bool memoize = value.size() <= memoized_string_bytes;
  if (memoize) {
    if (const auto it = memo_.find(std::string(value)); it != memo_.end()) {
      if (it->second < 0x100) {
        out_.push_back('h');
        out_.push_back(static_cast<char>(it->second));
      } else {
        out_.push_back('j');
        put_u32(it->second);
      }
      return;
    }
  }
  out_.push_back('X');
  put_u32(static_cast<std::uint32_t>(value.size()));
  out_.append(value);
  if (memoize) {
    const auto index = static_cast<std::uint32_t>(memo_.size());
    memo_.emplace(std::string(value), index);
    if (index < 0x100) {
      out_.push_back('q');
      out_.push_back(static_cast<char>(index));
    } else {
      out_.push_back('r');
      put_u32(index);
    }
  }
}

void pickle_writer::begin_list() { out_ += "]("; }
void pickle_writer::end_list() { out_.push_back('e'); }
void pickle_writer::begin_dict() { out_ += "}("; }
void pickle_writer::end_dict() { out_.push_back('u'); }
void pickle_writer::begin_tuple() { out_.push_back('('); }
void pickle_writer::end_tuple() { out_.push_back('t'); }

std::string pickle_writer::finish() {
  out_.push_back('.');
  std::string result = std::move(out_);
  out_ = "\x80\x02";
  memo_.clear();
  return result;
}

}  // namespace phasealloc
