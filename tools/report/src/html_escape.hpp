// HTML escaping: every piece of text on the page (policy specs, phase names, the trace name, the
// command line) passes through here, in element content and in attribute values alike.
#pragma once

#include <string>
#include <string_view>

namespace phasealloc::report_detail {

/// Replaces & < > " ' with character references; safe in text and in quoted attributes.
std::string html_escape(std::string_view text);

}  // namespace phasealloc::report_detail
