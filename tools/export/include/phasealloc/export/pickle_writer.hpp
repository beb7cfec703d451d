// Writes plain-data pickles (protocol 2) opcode by opcode: what the snapshot exporter emits and
// what tests use to build snapshots. Python's pickle.load and read_pickle both read the result.
//
// Containers are written as EMPTY_LIST / EMPTY_DICT + MARK ... APPENDS / SETITEMS and tuples as
// MARK ... TUPLE, so they nest freely. Short strings are memoized (BINPUT, later BINGET): the
// repeated keys of thousands of trace entries cost two bytes each after the first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>

namespace phasealloc {

class pickle_writer {
 public:
  pickle_writer();

  void none();
  void boolean(bool value);
  void integer(std::int64_t value);
  void floating(double value);
  void str(std::string_view value);

  void begin_list();
  void end_list();
  void begin_dict();   ///< Then key, value, key, value, ...
  void end_dict();
  void begin_tuple();
  void end_tuple();

  /// Appends STOP and returns the pickle; the writer is empty afterwards.
  std::string finish();

  /// Raw opcodes, for tests that build malformed or hostile pickles.
  void raw(std::string_view bytes) { out_.append(bytes); }

 private:
  void put_u32(std::uint32_t value);
  std::string out_;
  std::unordered_map<std::string, std::uint32_t> memo_;
};

}  // namespace phasealloc
