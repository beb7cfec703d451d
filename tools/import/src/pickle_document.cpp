#include "phasealloc/import/pickle_document.hpp"

#include <fmt/format.h>

namespace phasealloc {

std::string_view to_string(pickle_kind kind) noexcept {
  switch (kind) {
    case pickle_kind::none: return "None";
    case pickle_kind::boolean: return "bool";
    case pickle_kind::integer: return "int";
    case pickle_kind::floating: return "float";
    case pickle_kind::string: return "str";
    case pickle_kind::bytes: return "bytes";
    case pickle_kind::list: return "list";
    case pickle_kind::tuple: return "tuple";
    case pickle_kind::dict: return "dict";
    case pickle_kind::set: return "set";
  }
  return "unknown";
}

const pickle_node& pickle_ref::node() const { return doc_->node(index_); }

pickle_kind pickle_ref::kind() const { return node().kind; }
std::uint64_t pickle_ref::offset() const { return valid() ? node().offset : 0; }

std::int64_t pickle_ref::as_int() const { return is_int() ? node().integer : 0; }

double pickle_ref::as_float() const {
  if (!valid()) {
    return 0.0;
  }
  if (kind() == pickle_kind::floating) {
    return node().floating;
  }
  return is_int() ? static_cast<double>(node().integer) : 0.0;
}

std::string_view pickle_ref::as_str() const {
  if (!valid() || (kind() != pickle_kind::string && kind() != pickle_kind::bytes)) {
    return {};
  }
  return node().text;
}

std::size_t pickle_ref::size() const {
  if (!valid()) {
    return 0;
  }
  switch (kind()) {
    case pickle_kind::list:
    case pickle_kind::tuple:
    case pickle_kind::set: return node().items.size();
    case pickle_kind::dict: return node().items.size() / 2;
    default: return 0;
  }
}

pickle_ref pickle_ref::at(std::size_t i) const {
  if (!valid() || kind() == pickle_kind::dict || i >= node().items.size()) {
    return {};
  }
  return pickle_ref(doc_, node().items[i]);
}

pickle_ref pickle_ref::key_at(std::size_t i) const {
  if (!is_dict() || 2 * i + 1 >= node().items.size()) {
    return {};
  }
  return pickle_ref(doc_, node().items[2 * i]);
}

pickle_ref pickle_ref::value_at(std::size_t i) const {
  if (!is_dict() || 2 * i + 1 >= node().items.size()) {
    return {};
  }
  return pickle_ref(doc_, node().items[2 * i + 1]);
}

pickle_ref pickle_ref::get(std::string_view key) const {
  if (!is_dict()) {
    return {};
  }
  const auto& items = node().items;
  for (std::size_t i = items.size() / 2; i-- > 0;) {
    const pickle_node& k = doc_->node(items[2 * i]);
    if (k.kind == pickle_kind::string && k.text == key) {
      return pickle_ref(doc_, items[2 * i + 1]);
    }
  }
  return {};
}

std::string pickle_ref::describe() const {
  if (!valid()) {
    return "nothing";
  }
  switch (kind()) {
    case pickle_kind::boolean: return node().integer != 0 ? "True" : "False";
    case pickle_kind::integer: return fmt::format("int {}", node().integer);
    case pickle_kind::floating: return fmt::format("float {}", node().floating);
    case pickle_kind::string: {
      const std::string_view text = node().text;
      return fmt::format("str '{}'{}", text.substr(0, 40), text.size() > 40 ? "..." : "");
    }
    default: return std::string(to_string(kind()));
  }
}

std::uint32_t pickle_document::add(pickle_node node) {
  nodes_.push_back(std::move(node));
  return static_cast<std::uint32_t>(nodes_.size() - 1);
}

}  // namespace phasealloc
