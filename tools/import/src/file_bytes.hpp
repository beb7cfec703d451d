// Reads a whole file for an importer (private header).
#pragma once

#include <filesystem>
#include <string>

#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_error.hpp"

namespace phasealloc::detail {

result<std::string, trace_error> read_file_bytes(const std::filesystem::path& path);

}  // namespace phasealloc::detail
