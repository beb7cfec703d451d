#include "phasealloc/import/pickle_reader.hpp"

#include <fmt/format.h>

#include <bit>
#include <charconv>
#include <cstring>
#include <optional>
#include <unordered_map>
#include <vector>

namespace phasealloc {
namespace {

constexpr std::string_view plain_data =
    "plain data (snapshots hold only dict, list, tuple, str, bytes, int, float, bool and None)";

// Opcodes (pickletools names).
enum op : std::uint8_t {
  MARK = '(', STOP = '.', POP = '0', POP_MARK = '1', DUP = '2', FLOAT = 'F', INT = 'I', BININT = 'J',
  BININT1 = 'K', LONG = 'L', BININT2 = 'M', NONE = 'N', PERSID = 'P', BINPERSID = 'Q', REDUCE = 'R',
  STRING = 'S', BINSTRING = 'T', SHORT_BINSTRING = 'U', UNICODE = 'V', BINUNICODE = 'X', APPEND = 'a',
  BUILD = 'b', GLOBAL = 'c', DICT = 'd', EMPTY_DICT = '}', APPENDS = 'e', GET = 'g', BINGET = 'h', INST = 'i',
  LONG_BINGET = 'j', LIST = 'l', EMPTY_LIST = ']', OBJ = 'o', PUT = 'p', BINPUT = 'q', LONG_BINPUT = 'r',
  SETITEM = 's', TUPLE = 't', EMPTY_TUPLE = ')', SETITEMS = 'u', BINFLOAT = 'G',
  BINBYTES = 'B', SHORT_BINBYTES = 'C',
  PROTO = 0x80, NEWOBJ = 0x81, EXT1 = 0x82, EXT2 = 0x83, EXT4 = 0x84, TUPLE1 = 0x85, TUPLE2 = 0x86,
  TUPLE3 = 0x87, NEWTRUE = 0x88, NEWFALSE = 0x89, LONG1 = 0x8a, LONG4 = 0x8b,
  SHORT_BINUNICODE = 0x8c, BINUNICODE8 = 0x8d, BINBYTES8 = 0x8e, EMPTY_SET = 0x8f, ADDITEMS = 0x90,
  FROZENSET = 0x91, NEWOBJ_EX = 0x92, STACK_GLOBAL = 0x93, MEMOIZE = 0x94, FRAME = 0x95,
  BYTEARRAY8 = 0x96, NEXT_BUFFER = 0x97, READONLY_BUFFER = 0x98,
};

// Opcodes that name or run code, or need out-of-band data: never accepted.
std::optional<std::string_view> refused_name(std::uint8_t code) {
  switch (code) {
    case GLOBAL: return "GLOBAL";
    case STACK_GLOBAL: return "STACK_GLOBAL";
    case REDUCE: return "REDUCE";
    case BUILD: return "BUILD";
    case INST: return "INST";
    case OBJ: return "OBJ";
    case NEWOBJ: return "NEWOBJ";
    case NEWOBJ_EX: return "NEWOBJ_EX";
    case PERSID: return "PERSID";
    case BINPERSID: return "BINPERSID";
    case EXT1: return "EXT1";
    case EXT2: return "EXT2";
    case EXT4: return "EXT4";
    case NEXT_BUFFER: return "NEXT_BUFFER";
    case READONLY_BUFFER: return "READONLY_BUFFER";
    default: return std::nullopt;
  }
}

// Protocol 0/1 text opcodes: legal pickle, but not what a protocol 2-5 pickler writes.
std::optional<std::string_view> text_opcode_name(std::uint8_t code) {
  switch (code) {
    case FLOAT: return "FLOAT";
    case INT: return "INT";
    case LONG: return "LONG";
    case STRING: return "STRING";
    case UNICODE: return "UNICODE";
    default: return std::nullopt;
  }
}

class pickle_machine {
 public:
  pickle_machine(std::string_view bytes, std::string_view source, const pickle_limits& limits)
      : bytes_(bytes), source_(source), limits_(limits) {}

  result<pickle_document, trace_error> run() {
    if (bytes_.size() > limits_.max_input_bytes) {
      return fail(fmt::format("a pickle of at most {} bytes", limits_.max_input_bytes),
                  fmt::format("{} bytes", bytes_.size()), 0);
    }
    while (true) {
      op_at_ = pos_;
      if (pos_ >= bytes_.size()) {
        return fail("an opcode (the pickle ends without STOP)", "end of input");
      }
      const auto code = static_cast<std::uint8_t>(bytes_[pos_++]);
      if (code == STOP) {
        if (!marks_.empty() || stack_.size() != 1) {
          return fail("exactly one value and no open MARK at STOP",
                      fmt::format("{} values and {} open MARKs", stack_.size(), marks_.size()));
        }
        doc_.set_root(stack_.back());
        return std::move(doc_);
      }
      if (!step(code)) {
        if (!error_) {
          fail("a well-formed pickle", "an opcode that could not be applied");
        }
        return std::move(*error_);
      }
    }
  }

 private:
  trace_error fail(std::string expected, std::string found, std::optional<std::uint64_t> at = std::nullopt) {
    error_ = trace_error{std::string(source_), at.value_or(op_at_), 0, std::move(expected), std::move(found)};
    return *error_;
  }
  bool failed(std::string expected, std::string found) {
    fail(std::move(expected), std::move(found));
    return false;
  }

  // --- input -----------------------------------------------------------------------------------
  bool take(std::size_t n, std::string_view& out, std::string_view what) {
    if (n > bytes_.size() - pos_) {
      fail(fmt::format("{} ({} bytes)", what, n), fmt::format("only {} bytes left", bytes_.size() - pos_));
      return false;
    }
    out = bytes_.substr(pos_, n);
    pos_ += n;
    return true;
  }
  template <class T>
  bool little(T& value, std::string_view what) {
    std::string_view raw;
    if (!take(sizeof(T), raw, what)) {
      return false;
    }
    std::make_unsigned_t<T> u = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) {
      u |= static_cast<std::make_unsigned_t<T>>(static_cast<std::uint8_t>(raw[i])) << (8 * i);
    }
    value = static_cast<T>(u);
    return true;
  }
  bool line(std::string_view& out, std::string_view what) {
    const std::size_t eol = bytes_.find('\n', pos_);
    if (eol == std::string_view::npos) {
      fail(fmt::format("{} ending in a newline", what), "end of input");
      return false;
    }
    out = bytes_.substr(pos_, eol - pos_);
    pos_ = eol + 1;
    return true;
  }

  // --- stack -----------------------------------------------------------------------------------
  std::size_t frame_base() const { return marks_.empty() ? 0 : marks_.back(); }

  bool push_node(pickle_node node) {
    if (doc_.node_count() >= limits_.max_nodes) {
      return failed(fmt::format("at most {} values", limits_.max_nodes), "more");
    }
    node.offset = op_at_;
    stack_.push_back(doc_.add(std::move(node)));
    return true;
  }
  bool push_kind(pickle_kind kind) {
    pickle_node n;
    n.kind = kind;
    return push_node(std::move(n));
  }
  bool push_int(pickle_kind kind, std::int64_t value) {
    pickle_node n;
    n.kind = kind;
    n.integer = value;
    return push_node(std::move(n));
  }
  bool push_text(pickle_kind kind, std::string_view text) {
    pickle_node n;
    n.kind = kind;
    n.text.assign(text);
    return push_node(std::move(n));
  }
  bool pop(std::uint32_t& out, std::string_view for_what) {
    if (stack_.size() <= frame_base()) {
      return failed(fmt::format("a value on the stack for {}", for_what), "an empty stack");
    }
    out = stack_.back();
    stack_.pop_back();
    return true;
  }
  bool top(std::uint32_t& out, std::string_view for_what) {
    if (stack_.size() <= frame_base()) {
      return failed(fmt::format("a value on the stack for {}", for_what), "an empty stack");
    }
    out = stack_.back();
    return true;
  }
  // Items pushed since the last MARK, which is then closed.
  bool pop_mark(std::vector<std::uint32_t>& items, std::string_view for_what) {
    if (marks_.empty()) {
      return failed(fmt::format("a MARK before {}", for_what), "no open MARK");
    }
    const std::size_t base = marks_.back();
    marks_.pop_back();
    items.assign(stack_.begin() + static_cast<std::ptrdiff_t>(base), stack_.end());
    stack_.resize(base);
    return true;
  }
  bool expect_kind(std::uint32_t index, pickle_kind kind, std::string_view for_what) {
    const pickle_kind actual = doc_.node(index).kind;
    if (actual != kind) {
      return failed(fmt::format("a {} for {}", to_string(kind), for_what), std::string(to_string(actual)));
    }
    return true;
  }

  bool memo_put(std::uint64_t index) {
    std::uint32_t value = 0;
    if (!top(value, "a memo put")) {
      return false;
    }
    if (memo_.size() >= limits_.max_nodes && !memo_.contains(index)) {
      return failed(fmt::format("at most {} memo entries", limits_.max_nodes), "more");
    }
    memo_[index] = value;
    return true;
  }
  bool memo_get(std::uint64_t index) {
    const auto it = memo_.find(index);
    if (it == memo_.end()) {
      return failed("a memo index that was put before", fmt::format("memo index {}", index));
    }
    stack_.push_back(it->second);
    return true;
  }

  bool read_sized_text(pickle_kind kind, std::uint64_t size, std::string_view what) {
    std::string_view text;
    if (size > bytes_.size() - pos_) {
      return failed(fmt::format("{} ({} bytes)", what, size), fmt::format("only {} bytes left", bytes_.size() - pos_));
    }
    if (!take(static_cast<std::size_t>(size), text, what)) {
      return false;
    }
    return push_text(kind, text);
  }

  bool read_long(std::uint64_t size) {
    if (size > 8) {
      return failed("an integer of at most 64 bits", fmt::format("a {}-byte integer", size));
    }
    std::string_view raw;
    if (!take(static_cast<std::size_t>(size), raw, "the bytes of a LONG")) {
      return false;
    }
    std::uint64_t u = 0;
    for (std::size_t i = 0; i < raw.size(); ++i) {
      u |= static_cast<std::uint64_t>(static_cast<std::uint8_t>(raw[i])) << (8 * i);
    }
    if (!raw.empty() && raw.size() < 8 && (static_cast<std::uint8_t>(raw.back()) & 0x80) != 0) {
      u |= ~std::uint64_t{0} << (8 * raw.size());  // sign-extend
    }
    return push_int(pickle_kind::integer, static_cast<std::int64_t>(u));
  }

  std::string describe_global_from_stack() const {
    if (stack_.size() >= frame_base() + 2) {
      const pickle_node& module = doc_.node(stack_[stack_.size() - 2]);
      const pickle_node& name = doc_.node(stack_.back());
      if (module.kind == pickle_kind::string && name.kind == pickle_kind::string) {
        return fmt::format("global '{}.{}'", module.text, name.text);
      }
    }
    return "a global";
  }

  bool refuse(std::uint8_t code, std::string_view name) {
    std::string what;
    if (code == GLOBAL || code == INST) {
      std::string_view module;
      std::string_view symbol;
      if (line(module, "a module name") && line(symbol, "a class name")) {
        what = fmt::format("global '{}.{}'", module, symbol);
      } else {
        what = "a global";
      }
    } else if (code == STACK_GLOBAL) {
      what = describe_global_from_stack();
    } else {
      what = fmt::format("opcode {}", name);
    }
    return failed(std::string(plain_data),
                  fmt::format("{} ({}; refused: snapshots are plain data)", what, name));
  }

  bool step(std::uint8_t code) {
    if (const auto name = refused_name(code)) {
      return refuse(code, *name);
    }
    if (const auto name = text_opcode_name(code)) {
      return failed("a protocol 2-5 opcode", fmt::format("protocol 0 text opcode {}", *name));
    }
    switch (code) {
      case PROTO: {
        std::uint8_t version = 0;
        if (!little(version, "the protocol number")) {
          return false;
        }
        if (version < 2 || version > 5) {
          return failed("pickle protocol 2 to 5", fmt::format("protocol {}", version));
        }
        return true;
      }
      case FRAME: {
        std::uint64_t size = 0;
        if (!little(size, "the frame length")) {
          return false;
        }
        if (size > bytes_.size() - pos_) {
          return failed(fmt::format("a frame of {} bytes", size), fmt::format("only {} bytes left", bytes_.size() - pos_));
        }
        return true;
      }
      case MARK:
        if (marks_.size() >= limits_.max_mark_depth) {
          return failed(fmt::format("at most {} nested MARKs", limits_.max_mark_depth), "deeper nesting");
        }
        marks_.push_back(stack_.size());
        return true;
      case POP:
        if (stack_.size() > frame_base()) {
          stack_.pop_back();
          return true;
        }
        if (!marks_.empty()) {
          marks_.pop_back();
          return true;
        }
        return failed("a value or MARK to POP", "an empty stack");
      case POP_MARK: {
        std::vector<std::uint32_t> ignored;
        return pop_mark(ignored, "POP_MARK");
      }
      case DUP: {
        std::uint32_t value = 0;
        if (!top(value, "DUP")) {
          return false;
        }
        stack_.push_back(value);
        return true;
      }
      case NONE: return push_kind(pickle_kind::none);
      case NEWTRUE: return push_int(pickle_kind::boolean, 1);
      case NEWFALSE: return push_int(pickle_kind::boolean, 0);
      case BININT: {
        std::int32_t v = 0;
        return little(v, "a 4-byte int") && push_int(pickle_kind::integer, v);
      }
      case BININT1: {
        std::uint8_t v = 0;
        return little(v, "a 1-byte int") && push_int(pickle_kind::integer, v);
      }
      case BININT2: {
        std::uint16_t v = 0;
        return little(v, "a 2-byte int") && push_int(pickle_kind::integer, v);
      }
      case LONG1: {
        std::uint8_t n = 0;
        return little(n, "the length of a LONG1") && read_long(n);
      }
      case LONG4: {
        std::int32_t n = 0;
        if (!little(n, "the length of a LONG4")) {
          return false;
        }
        if (n < 0) {
          return failed("a non-negative LONG4 length", std::to_string(n));
        }
        return read_long(static_cast<std::uint64_t>(n));
      }
      case BINFLOAT: {
        std::string_view raw;
        if (!take(8, raw, "an 8-byte float")) {
          return false;
        }
        std::uint64_t bits = 0;
        for (std::size_t i = 0; i < 8; ++i) {
          bits = (bits << 8) | static_cast<std::uint8_t>(raw[i]);  // big-endian
        }
        pickle_node n;
        n.kind = pickle_kind::floating;
        n.floating = std::bit_cast<double>(bits);
        return push_node(std::move(n));
      }
      case SHORT_BINUNICODE: {
        std::uint8_t n = 0;
        return little(n, "a str length") && read_sized_text(pickle_kind::string, n, "a str");
      }
      case BINUNICODE: {
        std::uint32_t n = 0;
        return little(n, "a str length") && read_sized_text(pickle_kind::string, n, "a str");
      }
      case BINUNICODE8: {
        std::uint64_t n = 0;
        return little(n, "a str length") && read_sized_text(pickle_kind::string, n, "a str");
      }
      case SHORT_BINSTRING: {
        std::uint8_t n = 0;
        return little(n, "a string length") && read_sized_text(pickle_kind::string, n, "a string");
      }
      case BINSTRING: {
        std::int32_t n = 0;
        if (!little(n, "a string length")) {
          return false;
        }
        if (n < 0) {
          return failed("a non-negative BINSTRING length", std::to_string(n));
        }
        return read_sized_text(pickle_kind::string, static_cast<std::uint64_t>(n), "a string");
      }
      case SHORT_BINBYTES: {
        std::uint8_t n = 0;
        return little(n, "a bytes length") && read_sized_text(pickle_kind::bytes, n, "bytes");
      }
      case BINBYTES: {
        std::uint32_t n = 0;
        return little(n, "a bytes length") && read_sized_text(pickle_kind::bytes, n, "bytes");
      }
      case BINBYTES8:
      case BYTEARRAY8: {
        std::uint64_t n = 0;
        return little(n, "a bytes length") && read_sized_text(pickle_kind::bytes, n, "bytes");
      }
      case EMPTY_LIST: return push_kind(pickle_kind::list);
      case EMPTY_TUPLE: return push_kind(pickle_kind::tuple);
      case EMPTY_DICT: return push_kind(pickle_kind::dict);
      case EMPTY_SET: return push_kind(pickle_kind::set);
      case APPEND: {
        std::uint32_t value = 0;
        std::uint32_t list = 0;
        if (!pop(value, "APPEND") || !top(list, "APPEND") || !expect_kind(list, pickle_kind::list, "APPEND")) {
          return false;
        }
        doc_.mutable_node(list).items.push_back(value);
        return true;
      }
      case APPENDS:
      case ADDITEMS: {
        const bool appends = code == APPENDS;
        std::vector<std::uint32_t> items;
        std::uint32_t target = 0;
        if (!pop_mark(items, appends ? "APPENDS" : "ADDITEMS") || !top(target, appends ? "APPENDS" : "ADDITEMS") ||
            !expect_kind(target, appends ? pickle_kind::list : pickle_kind::set, appends ? "APPENDS" : "ADDITEMS")) {
          return false;
        }
        auto& dst = doc_.mutable_node(target).items;
        dst.insert(dst.end(), items.begin(), items.end());
        return true;
      }
      case LIST:
      case TUPLE:
      case FROZENSET: {
        std::vector<std::uint32_t> items;
        if (!pop_mark(items, "LIST / TUPLE / FROZENSET")) {
          return false;
        }
        pickle_node n;
        n.kind = code == LIST ? pickle_kind::list : code == TUPLE ? pickle_kind::tuple : pickle_kind::set;
        n.items = std::move(items);
        return push_node(std::move(n));
      }
      case TUPLE1:
      case TUPLE2:
      case TUPLE3: {
        const std::size_t count = code - TUPLE1 + 1;
        if (stack_.size() < frame_base() + count) {
          return failed(fmt::format("{} values on the stack for TUPLE{}", count, count), "fewer");
        }
        pickle_node n;
        n.kind = pickle_kind::tuple;
        n.items.assign(stack_.end() - static_cast<std::ptrdiff_t>(count), stack_.end());
        stack_.resize(stack_.size() - count);
        return push_node(std::move(n));
      }
      case SETITEM: {
        std::uint32_t value = 0;
        std::uint32_t key = 0;
        std::uint32_t dict = 0;
        if (!pop(value, "SETITEM") || !pop(key, "SETITEM") || !top(dict, "SETITEM") ||
            !expect_kind(dict, pickle_kind::dict, "SETITEM")) {
          return false;
        }
        auto& items = doc_.mutable_node(dict).items;
        items.push_back(key);
        items.push_back(value);
        return true;
      }
      case SETITEMS: {
        std::vector<std::uint32_t> items;
        std::uint32_t dict = 0;
        if (!pop_mark(items, "SETITEMS")) {
          return false;
        }
        if (items.size() % 2 != 0) {
          return failed("key/value pairs for SETITEMS", fmt::format("{} values", items.size()));
        }
        if (!top(dict, "SETITEMS") || !expect_kind(dict, pickle_kind::dict, "SETITEMS")) {
          return false;
        }
        auto& dst = doc_.mutable_node(dict).items;
        dst.insert(dst.end(), items.begin(), items.end());
        return true;
      }
      case DICT: {
        std::vector<std::uint32_t> items;
        if (!pop_mark(items, "DICT")) {
          return false;
        }
        if (items.size() % 2 != 0) {
          return failed("key/value pairs for DICT", fmt::format("{} values", items.size()));
        }
        pickle_node n;
        n.kind = pickle_kind::dict;
        n.items = std::move(items);
        return push_node(std::move(n));
      }
      case PUT:
      case GET: {
        std::string_view digits;
        if (!line(digits, "a decimal memo index")) {
          return false;
        }
        std::uint64_t index = 0;
        const auto [ptr, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), index);
        if (ec != std::errc{} || ptr != digits.data() + digits.size() || digits.empty()) {
          return failed("a decimal memo index", fmt::format("'{}'", digits.substr(0, 20)));
        }
        return code == PUT ? memo_put(index) : memo_get(index);
      }
      case BINPUT: {
        std::uint8_t index = 0;
        return little(index, "a memo index") && memo_put(index);
      }
      case LONG_BINPUT: {
        std::uint32_t index = 0;
        return little(index, "a memo index") && memo_put(index);
      }
      case MEMOIZE: return memo_put(memo_.size());
      case BINGET: {
        std::uint8_t index = 0;
        return little(index, "a memo index") && memo_get(index);
      }
      case LONG_BINGET: {
        std::uint32_t index = 0;
        return little(index, "a memo index") && memo_get(index);
      }
      default: return failed("a pickle opcode", fmt::format("byte 0x{:02x}", code));
    }
  }

  std::string_view bytes_;
  std::string_view source_;
  const pickle_limits& limits_;
  std::size_t pos_ = 0;
  std::size_t op_at_ = 0;
  pickle_document doc_;
  std::vector<std::uint32_t> stack_;
  std::vector<std::size_t> marks_;
  std::unordered_map<std::uint64_t, std::uint32_t> memo_;
  std::optional<trace_error> error_;
};

}  // namespace

result<pickle_document, trace_error> read_pickle(std::string_view bytes, std::string_view source_name,
                                                 const pickle_limits& limits) {
  return pickle_machine(bytes, source_name, limits).run();
}

}  // namespace phasealloc
