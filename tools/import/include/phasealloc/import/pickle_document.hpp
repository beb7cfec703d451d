// The value tree a pickle holds when it holds only plain data (None, bool, int, float, str,
// bytes, list, tuple, dict, set).
//
// Nodes live in one vector and refer to each other by index, so the sharing pickle's memo creates
// (one frame dict referenced by a thousand trace entries) costs nothing and a hostile pickle that
// puts a list inside itself cannot leak or free twice. Readers of the tree walk fixed paths
// (snapshot["device_traces"][0][i]["addr"]); nothing here recurses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace phasealloc {

enum class pickle_kind : std::uint8_t { none, boolean, integer, floating, string, bytes, list, tuple, dict, set };

/// "None", "bool", "int", "float", "str", "bytes", "list", "tuple", "dict", "set".
std::string_view to_string(pickle_kind kind) noexcept;

struct pickle_node {
  pickle_kind kind = pickle_kind::none;
  std::uint64_t offset = 0;          ///< Byte offset of the opcode that made it (for error messages).
  std::int64_t integer = 0;          ///< bool (0 or 1) and int.
  double floating = 0.0;
  std::string text;                  ///< str (as written, normally UTF-8) and bytes.
  std::vector<std::uint32_t> items;  ///< list / tuple / set: elements; dict: key, value, key, value, ...
};

class pickle_document;

/// A cheap handle on one node. A default-constructed (or missing-key) ref is invalid.
class pickle_ref {
 public:
  pickle_ref() = default;
  pickle_ref(const pickle_document* doc, std::uint32_t index) : doc_(doc), index_(index) {}

  bool valid() const noexcept { return doc_ != nullptr; }
  pickle_kind kind() const;
  std::uint64_t offset() const;
  std::uint32_t index() const noexcept { return index_; }

  bool is_none() const { return valid() && kind() == pickle_kind::none; }
  bool is_int() const { return valid() && (kind() == pickle_kind::integer || kind() == pickle_kind::boolean); }
  bool is_number() const { return is_int() || (valid() && kind() == pickle_kind::floating); }
  bool is_str() const { return valid() && kind() == pickle_kind::string; }
  bool is_sequence() const { return valid() && (kind() == pickle_kind::list || kind() == pickle_kind::tuple); }
  bool is_dict() const { return valid() && kind() == pickle_kind::dict; }

  std::int64_t as_int() const;     ///< int or bool; 0 otherwise.
  double as_float() const;         ///< float, int or bool; 0 otherwise.
  std::string_view as_str() const; ///< str or bytes; empty otherwise.

  /// Elements of a list / tuple / set, entries of a dict, 0 otherwise.
  std::size_t size() const;
  pickle_ref at(std::size_t i) const;        ///< Element i of a list / tuple / set.
  pickle_ref key_at(std::size_t i) const;    ///< Key of dict entry i.
  pickle_ref value_at(std::size_t i) const;  ///< Value of dict entry i.
  /// The value for a str key of a dict (the last one wins, as in Python); invalid when absent.
  pickle_ref get(std::string_view key) const;

  /// A short description for error messages: "dict", "int 42", "str 'abc'".
  std::string describe() const;

 private:
  const pickle_node& node() const;
  const pickle_document* doc_ = nullptr;
  std::uint32_t index_ = 0;
};

class pickle_document {
 public:
  pickle_ref root() const { return pickle_ref(this, root_); }
  std::size_t node_count() const noexcept { return nodes_.size(); }
  const pickle_node& node(std::uint32_t index) const { return nodes_[index]; }

  // Building (the reader's side).
  std::uint32_t add(pickle_node node);
  pickle_node& mutable_node(std::uint32_t index) { return nodes_[index]; }
  void set_root(std::uint32_t index) noexcept { root_ = index; }

 private:
  std::vector<pickle_node> nodes_;
  std::uint32_t root_ = 0;
};

}  // namespace phasealloc
