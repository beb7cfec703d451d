// A pickle reader that accepts plain data only, for PyTorch memory snapshots.
//
// Design note
// Rationale: `torch.cuda.memory._dump_snapshot` writes a pickle of dicts, lists, str, int, float
//   and bool. Unpickling with Python's pickle runs whatever a file says (GLOBAL + REDUCE is code
//   execution), and snapshots travel between people. This reader builds a value tree and refuses
//   every opcode that names or calls code.
// Approach: a stack machine over protocols 2-5 (what every Python 3 pickler writes): PROTO, FRAME
//   (skipped), STOP, MARK, POP, POP_MARK, DUP, NONE, NEWTRUE, NEWFALSE, BININT, BININT1, BININT2,
//   LONG1, LONG4 (up to 64 bits), BINFLOAT, SHORT_BINUNICODE, BINUNICODE, BINUNICODE8,
//   SHORT_BINSTRING, BINSTRING, SHORT_BINBYTES, BINBYTES, BINBYTES8, BYTEARRAY8, EMPTY_LIST,
//   APPEND, APPENDS, LIST, EMPTY_TUPLE, TUPLE, TUPLE1-3, EMPTY_DICT, SETITEM, SETITEMS, DICT,
//   EMPTY_SET, ADDITEMS, FROZENSET, PUT, BINPUT, LONG_BINPUT, MEMOIZE, GET, BINGET, LONG_BINGET.
//   GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, PERSID, BINPERSID, EXT1/2/4,
//   NEXT_BUFFER and READONLY_BUFFER are refused with their name, their offset and, for globals,
//   the module and name they would have imported. Protocol 0/1 text opcodes are refused too.
// Limitations: integers wider than 64 bits are refused (snapshot addresses and sizes fit);
//   str bytes are kept as written (not checked as UTF-8). Memory use is bounded by a small
//   multiple of the input: each opcode makes at most one node, lengths are checked against the
//   bytes that remain, and `pickle_limits` caps input size, node count and MARK depth.
#pragma once

#include <cstddef>
#include <string_view>

#include "phasealloc/import/pickle_document.hpp"
#include "phasealloc/status.hpp"
#include "phasealloc/trace/trace_error.hpp"

namespace phasealloc {

struct pickle_limits {
  std::size_t max_input_bytes = std::size_t{4} << 30;  ///< 4 GiB.
  std::size_t max_nodes = std::size_t{1} << 28;
  std::size_t max_mark_depth = 1024;                   ///< Nesting of MARKs (containers being built).
};

/// Reads one pickle from `bytes` (bytes after its STOP are ignored, as Python does).
result<pickle_document, trace_error> read_pickle(std::string_view bytes, std::string_view source_name,
                                                 const pickle_limits& limits = {});

}  // namespace phasealloc
