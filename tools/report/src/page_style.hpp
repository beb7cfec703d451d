// The page's only stylesheet, inlined in <head>: a light theme, system fonts, no external resource.
#pragma once

#include <string_view>

namespace phasealloc::report_detail {

std::string_view page_style();

}  // namespace phasealloc::report_detail
