#include "html_escape.hpp"

namespace phasealloc::report_detail {

std::string html_escape(std::string_view text) {
  std::string out;
  out.reserve(text.size() + text.size() / 8);
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default:
        // Control characters are not allowed in HTML text; tab, newline and return are.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n' && c != '\r') {
          out += "&#xFFFD;";
        } else {
          out += c;
        }
        break;
    }
  }
  return out;
}

}  // namespace phasealloc::report_detail
