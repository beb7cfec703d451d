// Reading a module image's function names (module_image.hpp has the design note).
#include "module_image.hpp"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <string_view>

namespace simcuda::drv {
namespace {

constexpr std::uint32_t fatbin_magic = 0xBA55ED50;          // fatBinaryHeader::magic
constexpr std::uint32_t fatbin_wrapper_magic = 0x466243b1;  // what nvcc passes to __cudaRegisterFatBinary
constexpr std::uint16_t fatbin_kind_ptx = 1;
constexpr std::uint16_t fatbin_kind_elf = 2;

template <class T>
T load(const unsigned char* p) {
  T v;
  std::memcpy(&v, p, sizeof v);
  return v;
}

bool is_elf(const unsigned char* p) { return p[0] == 0x7f && p[1] == 'E' && p[2] == 'L' && p[3] == 'F'; }

/// The defined STT_FUNC symbols of an ELF64 little-endian image.
bool read_elf(const unsigned char* p, std::vector<std::string>* names, std::string* why) {
  if (p[4] != 2 || p[5] != 1) {
    *why = "a cubin that is not ELF64 little-endian";
    return false;
  }
  const auto shoff = load<std::uint64_t>(p + 0x28);
  const auto shentsize = load<std::uint16_t>(p + 0x3a);
  const auto shnum = load<std::uint16_t>(p + 0x3c);
  if (shoff == 0 || shentsize < 64 || shnum == 0) {
    *why = "a cubin without section headers";
    return false;
  }
  for (unsigned i = 0; i < shnum; ++i) {
    const unsigned char* sh = p + shoff + std::size_t{i} * shentsize;
    if (load<std::uint32_t>(sh + 4) != 2) continue;  // SHT_SYMTAB
    const auto sym_off = load<std::uint64_t>(sh + 0x18);
    const auto sym_size = load<std::uint64_t>(sh + 0x20);
    const auto link = load<std::uint32_t>(sh + 0x28);
    const auto entsize = load<std::uint64_t>(sh + 0x38);
    if (link >= shnum || entsize < 24) {
      *why = "a cubin whose symbol table is malformed";
      return false;
    }
    const unsigned char* strtab = p + load<std::uint64_t>(p + shoff + std::size_t{link} * shentsize + 0x18);
    for (std::uint64_t off = 0; off + entsize <= sym_size; off += entsize) {
      const unsigned char* sym = p + sym_off + off;
      const unsigned char info = sym[4];
      const auto shndx = load<std::uint16_t>(sym + 6);
      if ((info & 0xf) == 2 && shndx != 0)  // STT_FUNC, defined
        names->emplace_back(reinterpret_cast<const char*>(strtab + load<std::uint32_t>(sym)));
    }
    return true;
  }
  *why = "a cubin without a symbol table";
  return false;
}

bool looks_like_ptx(const char* text, std::size_t bytes) {
  const std::string head(text, std::min<std::size_t>(bytes, 4096));
  return head.find(".version") != std::string::npos && head.find(".target") != std::string::npos;
}

bool ptx_name_start(char c) { return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }
bool ptx_name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '$'; }

/// The names after each `.entry` directive (`.entry NAME(`), PTX's kernel declarations.
void read_ptx(const char* text, std::size_t bytes, std::vector<std::string>* names) {
  const std::string_view ptx(text, bytes);
  constexpr std::string_view directive = ".entry";
  for (std::size_t at = ptx.find(directive); at != std::string_view::npos; at = ptx.find(directive, at)) {
    std::size_t name = at + directive.size();
    at = name;
    const std::size_t blanks = name;
    while (name < ptx.size() && std::isspace(static_cast<unsigned char>(ptx[name]))) ++name;
    if (name == blanks || name == ptx.size() || !ptx_name_start(ptx[name])) continue;  // `.entry` needs a blank, then a name
    std::size_t end = name;
    while (end < ptx.size() && ptx_name_char(ptx[end])) ++end;
    names->emplace_back(ptx.substr(name, end - name));
    at = end;
  }
}

/// fatBinaryHeader {u32 magic; u16 version; u16 header_size; u64 fat_size}, then entries
/// {u16 kind; u16 version; u32 header_size; u64 padded_payload_size; ...}, each payload after
/// its header.
bool read_fatbinary(const unsigned char* p, std::vector<std::string>* names, std::string* why) {
  const auto header_size = load<std::uint16_t>(p + 6);
  const auto fat_size = load<std::uint64_t>(p + 8);
  const unsigned char* entry = p + header_size;
  const unsigned char* end = entry + fat_size;
  while (entry + 16 <= end) {
    const auto kind = load<std::uint16_t>(entry);
    const auto entry_header = load<std::uint32_t>(entry + 4);
    const auto payload_size = load<std::uint64_t>(entry + 8);
    const unsigned char* payload = entry + entry_header;
    if (entry_header < 16 || payload + payload_size > end) {
      *why = "a fatbinary whose entries overrun it";
      return false;
    }
    if (kind == fatbin_kind_elf) {
      if (!is_elf(payload)) {
        *why = "a fatbinary with a compressed cubin entry (its kernel names cannot be read)";
        return false;
      }
      if (!read_elf(payload, names, why)) return false;
    } else if (kind == fatbin_kind_ptx) {
      const auto* text = reinterpret_cast<const char*>(payload);
      if (!looks_like_ptx(text, payload_size)) {
        *why = "a fatbinary with a compressed PTX entry (its kernel names cannot be read)";
        return false;
      }
      read_ptx(text, strnlen(text, payload_size), names);
    }
    entry = payload + payload_size;
  }
  return true;
}

}  // namespace

bool read_module_image(const void* data, module_image* out, std::string* why) {
  if (data == nullptr) {
    *why = "no image";
    return false;
  }
  const auto* p = static_cast<const unsigned char*>(data);
  std::vector<std::string> names;
  bool ok = false;
  if (load<std::uint32_t>(p) == fatbin_wrapper_magic) {
    p = load<const unsigned char*>(p + 8);  // {int magic; int version; const void* data; ...}
    if (p == nullptr || load<std::uint32_t>(p) != fatbin_magic) {
      *why = "a fatbinary wrapper without a fatbinary";
      return false;
    }
  }
  if (is_elf(p)) {
    out->format = image_format::cubin;
    ok = read_elf(p, &names, why);
  } else if (load<std::uint32_t>(p) == fatbin_magic) {
    out->format = image_format::fatbinary;
    ok = read_fatbinary(p, &names, why);
  } else {
    const auto* text = reinterpret_cast<const char*>(p);
    const std::size_t bytes = std::strlen(text);
    if (looks_like_ptx(text, bytes)) {
      out->format = image_format::ptx;
      read_ptx(text, bytes, &names);
      ok = true;
    } else {
      *why = "neither a cubin, a fatbinary nor PTX";
    }
  }
  if (!ok) return false;
  std::sort(names.begin(), names.end());
  names.erase(std::unique(names.begin(), names.end()), names.end());
  out->functions = std::move(names);
  return true;
}

}  // namespace simcuda::drv
