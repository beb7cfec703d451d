// The allocator's layout when a snapshot's history began, from the state at its end and the
// history itself (private header of the snapshot importer).
//
// Design note
// Rationale: a snapshot taken mid-run (history switched on late, or a ring buffer that wrapped) or
//   one that holds state only starts from segments the replay must not re-create its own way: the
//   `pytorch` model would place the live set into other segments (more, fewer, other sizes) and
//   drop the cached free ones, and every number after that drifts.
// Approach: start from the end state (the snapshot's `segments`: every segment, expandable ones as
//   their mapped runs, and the blocks allocated in them) and undo the history from its last entry
//   to its first: an alloc was not yet live before it, a free_requested block was live, a
//   segment_alloc'd segment did not exist yet, a segment_free'd one did, a segment_map'd range was
//   unmapped and a segment_unmap'd one mapped. What is left is the layout at the first entry.
//   Free space between the allocated blocks of a segment is one free block (PyTorch merges free
//   neighbours at once). A block freed in the history has no recorded block size, only the
//   requested one: it is the request rounded to 512 bytes, and in a large-pool segment a remainder
//   of at most 1 MiB after it is part of it (PyTorch does not split such a remainder off).
//   Expandable runs of one stream and pool, in address order, make one reservation whose gaps are
//   unmapped.
// Limitations: the block size of a block freed in the history is inferred, as above (a block that
//   PyTorch left unsplit for an oversize rule reads as split); a block pending free at the start
//   (freed before the history, completed after) reads as free; small-pool membership of a segment
//   known only from the history is read from its size (2 MiB). A history that lost entries (ring
//   buffer) can leave a block outside every segment: the layout is then not used, and the reason
//   kept.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "phasealloc/status.hpp"

namespace phasealloc::detail {

struct layout_block {
  std::uint64_t addr = 0;
  std::uint64_t bytes = 0;
  bool allocated = false;
  bool unmapped = false;
};

struct layout_segment {
  std::uint64_t addr = 0;          ///< Of its first block.
  std::uint64_t stream = 0;        ///< As recorded (a handle, not an ordinal).
  bool small = false;
  bool expandable = false;
  std::uint64_t mapped_bytes = 0;
  std::vector<std::uint64_t> run_addrs;  ///< Expandable: the recorded run (segment) addresses.
  std::vector<layout_block> blocks;      ///< Tiling the segment (its span), in address order.
};

class start_layout {
 public:
  enum class action { alloc, free_requested, segment_alloc, segment_free, segment_map, segment_unmap };

  void end_segment(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream, bool small, bool expandable);
  void end_block(std::uint64_t addr, std::uint64_t bytes, std::uint64_t requested_bytes);
  /// A history entry, in the order recorded; `where` names it for errors.
  void history(action a, std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream, std::string where);

  /// The layout at the first history entry, or why it cannot be known (naming the entry or block).
  result<std::vector<layout_segment>, std::string> build();

 private:
  struct run {
    std::uint64_t bytes = 0;
    std::uint64_t stream = 0;
    bool small = false;
    bool expandable = false;
  };
  struct live_block {
    std::uint64_t bytes = 0;      ///< 0: not recorded (freed in the history), inferred at build().
    std::uint64_t requested = 0;
    std::string where;
  };
  struct entry {
    action a;
    std::uint64_t addr;
    std::uint64_t bytes;
    std::uint64_t stream;
    std::string where;
  };
  void map_range(std::uint64_t addr, std::uint64_t bytes);
  void unmap_range(std::uint64_t addr, std::uint64_t bytes, std::uint64_t stream);

  std::map<std::uint64_t, run> segments_;  // addr -> segment (expandable: mapped run)
  std::map<std::uint64_t, live_block> blocks_;
  std::vector<entry> history_;
};

}  // namespace phasealloc::detail
