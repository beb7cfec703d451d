#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "phasealloc/import/pickle_reader.hpp"
#include "phasealloc/export/pickle_writer.hpp"

namespace phasealloc {
namespace {

std::string unhex(std::string_view hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16)));
  }
  return out;
}

// Protocol 2 header + body + STOP.
std::string p2(std::string_view body) { return std::string("\x80\x02", 2) + std::string(body) + "."; }

pickle_document read_ok(std::string_view bytes) {
  auto r = read_pickle(bytes, "test.pickle");
  EXPECT_TRUE(r.has_value()) << (r ? "" : r.error().message());
  return r ? std::move(r).value() : pickle_document{};
}

trace_error read_error(std::string_view bytes) {
  auto r = read_pickle(bytes, "test.pickle");
  EXPECT_FALSE(r.has_value());
  return r ? trace_error{} : r.error();
}

// --- one opcode at a time ---------------------------------------------------------------------

TEST(PickleReaderTest, ReadsScalars) {
  EXPECT_TRUE(read_ok(p2("N")).root().is_none());
  EXPECT_EQ(read_ok(p2("\x88")).root().kind(), pickle_kind::boolean);
  EXPECT_EQ(read_ok(p2("\x88")).root().as_int(), 1);
  EXPECT_EQ(read_ok(p2("\x89")).root().as_int(), 0);
  EXPECT_EQ(read_ok(p2(std::string("K\xff", 2))).root().as_int(), 255);
  EXPECT_EQ(read_ok(p2(std::string("M\x34\x12", 3))).root().as_int(), 0x1234);
  EXPECT_EQ(read_ok(p2(std::string("J\xfe\xff\xff\xff", 5))).root().as_int(), -2);
  // LONG1: 2^40 and -2^40, little-endian two's complement.
  EXPECT_EQ(read_ok(p2(std::string("\x8a\x06\x00\x00\x00\x00\x00\x01", 8))).root().as_int(), 1LL << 40);
  EXPECT_EQ(read_ok(p2(std::string("\x8a\x06\x00\x00\x00\x00\x00\xff", 8))).root().as_int(), -(1LL << 40));
  EXPECT_EQ(read_ok(p2(std::string("\x8a\x00", 2))).root().as_int(), 0);
  // LONG4 with a 1-byte payload.
  EXPECT_EQ(read_ok(p2(std::string("\x8b\x01\x00\x00\x00\x05", 6))).root().as_int(), 5);
  // BINFLOAT 3.5, big-endian.
  const auto float_doc = read_ok(p2(std::string("G\x40\x0c\x00\x00\x00\x00\x00\x00", 9)));
  const auto f = float_doc.root();
  EXPECT_EQ(f.kind(), pickle_kind::floating);
  EXPECT_DOUBLE_EQ(f.as_float(), 3.5);
}

TEST(PickleReaderTest, ReadsStringsAndBytes) {
  EXPECT_EQ(read_ok(p2(std::string("\x8c\x03" "abc", 5))).root().as_str(), "abc");
  EXPECT_EQ(read_ok(p2(std::string("X\x02\x00\x00\x00" "hi", 7))).root().as_str(), "hi");
  EXPECT_EQ(read_ok(p2(std::string("\x8d\x01\x00\x00\x00\x00\x00\x00\x00" "z", 10))).root().as_str(), "z");
  EXPECT_EQ(read_ok(p2(std::string("U\x02" "py", 4))).root().as_str(), "py");
  EXPECT_EQ(read_ok(p2(std::string("T\x01\x00\x00\x00" "q", 6))).root().as_str(), "q");
  const auto bytes_doc = read_ok(p2(std::string("C\x02\x00\x01", 4)));
  const auto b = bytes_doc.root();
  EXPECT_EQ(b.kind(), pickle_kind::bytes);
  EXPECT_EQ(b.as_str(), std::string("\x00\x01", 2));
  EXPECT_EQ(read_ok(p2(std::string("B\x01\x00\x00\x00" "b", 6))).root().kind(), pickle_kind::bytes);
  EXPECT_EQ(read_ok(p2(std::string("\x8e\x01\x00\x00\x00\x00\x00\x00\x00" "b", 10))).root().as_str(), "b");
  EXPECT_EQ(read_ok(p2(std::string("\x96\x01\x00\x00\x00\x00\x00\x00\x00" "c", 10))).root().as_str(), "c");
}

TEST(PickleReaderTest, ReadsContainers) {
  // EMPTY_LIST, APPEND 1, MARK 2 3 APPENDS
  const auto list_doc = read_ok(p2("]K\x01" "a(K\x02K\x03" "e"));
  const auto list = list_doc.root();
  ASSERT_EQ(list.kind(), pickle_kind::list);
  ASSERT_EQ(list.size(), 3U);
  EXPECT_EQ(list.at(2).as_int(), 3);
  EXPECT_EQ(read_ok(p2("(K\x01K\x02l")).root().size(), 2U);                 // LIST
  EXPECT_EQ(read_ok(p2(")")).root().kind(), pickle_kind::tuple);             // EMPTY_TUPLE
  EXPECT_EQ(read_ok(p2("(K\x01K\x02K\x03K\x04t")).root().size(), 4U);        // TUPLE
  EXPECT_EQ(read_ok(p2("K\x01\x85")).root().size(), 1U);                     // TUPLE1
  EXPECT_EQ(read_ok(p2("K\x01K\x02\x86")).root().at(1).as_int(), 2);         // TUPLE2
  EXPECT_EQ(read_ok(p2("K\x01K\x02K\x03\x87")).root().size(), 3U);           // TUPLE3
  // EMPTY_DICT, SETITEM 'a'->1, MARK 'b' 2 'a' 3 SETITEMS: the last 'a' wins.
  const auto dict_doc = read_ok(p2("}\x8c\x01" "aK\x01" "s(\x8c\x01" "bK\x02\x8c\x01" "aK\x03" "u"));
  const auto dict = dict_doc.root();
  ASSERT_TRUE(dict.is_dict());
  EXPECT_EQ(dict.size(), 3U);
  EXPECT_EQ(dict.get("a").as_int(), 3);
  EXPECT_EQ(dict.get("b").as_int(), 2);
  EXPECT_FALSE(dict.get("c").valid());
  EXPECT_EQ(dict.key_at(1).as_str(), "b");
  EXPECT_EQ(read_ok(p2("(\x8c\x01xK\x01" "d")).root().get("x").as_int(), 1);  // DICT
  // Sets: EMPTY_SET + ADDITEMS, FROZENSET.
  const auto set_doc = read_ok(std::string("\x80\x04\x8f(K\x07\x90.", 8));
  const auto set = set_doc.root();
  EXPECT_EQ(set.kind(), pickle_kind::set);
  EXPECT_EQ(set.at(0).as_int(), 7);
  EXPECT_EQ(read_ok(std::string("\x80\x04(K\x08\x91.", 7)).root().size(), 1U);
}

TEST(PickleReaderTest, MemoSharesMutableContainers) {
  // EMPTY_LIST MEMOIZE, then GET it back into a tuple, then APPEND to the original:
  // the tuple's element is the same list, so it sees the append (Python semantics).
  // EMPTY_LIST MEMOIZE POP, GET TUPLE1, GET 9 APPEND POP: the root is the tuple.
  const auto doc = read_ok(std::string("\x80\x04]\x94" "0h\x00\x85h\x00K\x09" "a0.", 15));
  ASSERT_EQ(doc.root().kind(), pickle_kind::tuple);
  EXPECT_EQ(doc.root().at(0).size(), 1U);
  EXPECT_EQ(doc.root().at(0).at(0).as_int(), 9);
  // PUT/GET (text), BINPUT/BINGET, LONG_BINPUT/LONG_BINGET.
  const auto text_memo = read_ok(p2("K\x05p7\n0g7\n"));
  EXPECT_EQ(text_memo.root().as_int(), 5);
  const auto bin = read_ok(p2("K\x06q\x01" "0h\x01"));
  EXPECT_EQ(bin.root().as_int(), 6);
  const auto long_bin = read_ok(p2(std::string("K\x07r\x00\x01\x00\x00" "0j\x00\x01\x00\x00", 13)));
  EXPECT_EQ(long_bin.root().as_int(), 7);
}

TEST(PickleReaderTest, SkipsFramesAndHandlesMarksPopAndDup) {
  EXPECT_EQ(read_ok(std::string("\x80\x04\x95\x02\x00\x00\x00\x00\x00\x00\x00K\x01.", 14)).root().as_int(), 1);
  EXPECT_EQ(read_ok(p2("K\x01K\x02" "0")).root().as_int(), 1);  // POP
  EXPECT_EQ(read_ok(p2("K\x01(K\x02K\x03" "1")).root().as_int(), 1);  // POP_MARK
  EXPECT_EQ(read_ok(p2("]2\x86")).root().size(), 2U);  // DUP then TUPLE2 of the same list
}

TEST(PickleReaderTest, ReadsWhatPythonWrites) {
  // pickle.dumps(v, protocol=2/4/5) by CPython 3.11 for a dict of ints (incl. +-2^63 bounds),
  // floats, bools, None, str (with non-ASCII), tuples, a shared dict, and (4, 5) bytes, set, frozenset
  // (5) bytearray.
  const std::string pickles[] = {
      unhex("80027d71002858010000006171015d7102284b014afeffffff47400c00000000000088894e58010000007871034d2c014a7011"
            "01004a90eefeff8a060000000000018a060000000000ff8a08ffffffffffffff7f8a0800000000000000806558010000007471"
            "044b014b028671055802000000743371064b014b024b03877107580200000074347108284b014b024b034b04747109580100"
            "000065710a29580100000064710b7d710c580100000073710d5d710e287d710f2858040000006e616d6571105801000000667111"
            "58040000006c696e6571124b0375680f655801000000757113580300000068c3a97114752e"),
      unhex("800495d6000000000000007d94288c0161945d94284b014afeffffff47400c00000000000088894e8c0178944d2c014a7011"
            "01004a90eefeff8a060000000000018a060000000000ff8a08ffffffffffffff7f8a080000000000000080658c0174944b014b"
            "0286948c027433944b014b024b0387948c02743494284b014b024b034b0474948c016594298c0164947d948c0173945d94287d"
            "94288c046e616d65948c0166948c046c696e65944b0375680f658c0175948c0368c3a9948c0562797465739443027879948c03"
            "736574948f94284b07908c02667394284b089194752e"),
      unhex("800595e7000000000000007d94288c0161945d94284b014afeffffff47400c00000000000088894e8c0178944d2c014a7011"
            "01004a90eefeff8a060000000000018a060000000000ff8a08ffffffffffffff7f8a080000000000000080658c0174944b014b"
            "0286948c027433944b014b024b0387948c02743494284b014b024b034b0474948c016594298c0164947d948c0173945d94287d"
            "94288c046e616d65948c0166948c046c696e65944b0375680f658c0175948c0368c3a9948c0562797465739443027879948c03"
            "736574948f94284b07908c02667394284b0891948c026261949602000000000000007a7a94752e"),
  };
  for (const std::string& bytes : pickles) {
    const auto doc = read_ok(bytes);
    const pickle_ref root = doc.root();
    ASSERT_TRUE(root.is_dict());
    const pickle_ref a = root.get("a");
    ASSERT_EQ(a.size(), 14U);
    EXPECT_EQ(a.at(0).as_int(), 1);
    EXPECT_EQ(a.at(1).as_int(), -2);
    EXPECT_DOUBLE_EQ(a.at(2).as_float(), 3.5);
    EXPECT_EQ(a.at(3).kind(), pickle_kind::boolean);
    EXPECT_TRUE(a.at(5).is_none());
    EXPECT_EQ(a.at(6).as_str(), "x");
    EXPECT_EQ(a.at(7).as_int(), 300);
    EXPECT_EQ(a.at(8).as_int(), 70000);
    EXPECT_EQ(a.at(9).as_int(), -70000);
    EXPECT_EQ(a.at(10).as_int(), 1LL << 40);
    EXPECT_EQ(a.at(11).as_int(), -(1LL << 40));
    EXPECT_EQ(a.at(12).as_int(), INT64_MAX);
    EXPECT_EQ(a.at(13).as_int(), INT64_MIN);
    EXPECT_EQ(root.get("t4").size(), 4U);
    EXPECT_EQ(root.get("e").kind(), pickle_kind::tuple);
    EXPECT_EQ(root.get("u").as_str(), "h\xc3\xa9");
    const pickle_ref shared = root.get("s");
    ASSERT_EQ(shared.size(), 2U);
    EXPECT_EQ(shared.at(0).index(), shared.at(1).index()) << "the memo shares one dict";
    EXPECT_EQ(shared.at(1).get("line").as_int(), 3);
  }
  EXPECT_EQ(read_ok(pickles[1]).root().get("bytes").as_str(), "xy");
  EXPECT_EQ(read_ok(pickles[1]).root().get("set").at(0).as_int(), 7);
  EXPECT_EQ(read_ok(pickles[2]).root().get("ba").as_str(), "zz");
}

// --- refusals and errors ------------------------------------------------------------------------

TEST(PickleReaderTest, RefusesGlobalNamingIt) {
  // The classic: cos\nsystem\n(S'echo pwned'\ntR.
  const std::string evil = std::string("\x80\x02", 2) + std::string("cos\nsystem\n(X\x04\x00\x00\x00" "echotR.", 24);
  const trace_error e = read_error(evil);
  EXPECT_EQ(e.offset, 2U);
  EXPECT_EQ(e.file, "test.pickle");
  const std::string m = e.message();
  EXPECT_NE(m.find("global 'os.system'"), std::string::npos) << m;
  EXPECT_NE(m.find("refused: snapshots are plain data"), std::string::npos) << m;
  EXPECT_NE(m.find("test.pickle: byte 2"), std::string::npos) << m;
}

TEST(PickleReaderTest, RefusesStackGlobalAndEveryCodeOpcode) {
  const std::string stack_global =
      std::string("\x80\x04\x8c\x08" "builtins\x8c\x04" "eval\x93", 19) + ".";
  const trace_error sg = read_error(stack_global);
  EXPECT_EQ(sg.offset, 18U);
  EXPECT_NE(sg.message().find("global 'builtins.eval'"), std::string::npos) << sg.message();
  EXPECT_NE(sg.message().find("STACK_GLOBAL"), std::string::npos);

  const std::pair<char, std::string_view> refused[] = {
      {'R', "REDUCE"},  {'b', "BUILD"},       {'o', "OBJ"},       {'\x81', "NEWOBJ"}, {'\x92', "NEWOBJ_EX"},
      {'Q', "BINPERSID"}, {'P', "PERSID"},    {'\x82', "EXT1"},   {'\x83', "EXT2"},   {'\x84', "EXT4"},
      {'\x97', "NEXT_BUFFER"}, {'\x98', "READONLY_BUFFER"}, {'i', "INST"},
  };
  for (const auto& [code, name] : refused) {
    const trace_error e = read_error(p2(std::string("N", 1) + code));
    EXPECT_EQ(e.offset, 3U) << name;
    EXPECT_NE(e.message().find(name), std::string::npos) << e.message();
    EXPECT_NE(e.message().find("refused"), std::string::npos) << e.message();
  }
}

TEST(PickleReaderTest, TruncatedInputGivesAnOffset) {
  const std::string full = p2(std::string("X\x05\x00\x00\x00" "hello", 10));
  for (std::size_t n = 0; n + 1 < full.size(); ++n) {
    const trace_error e = read_error(full.substr(0, n));
    EXPECT_LE(e.offset, n) << e.message();
    EXPECT_FALSE(e.expected.empty());
  }
  const trace_error e = read_error(full.substr(0, 8));
  EXPECT_EQ(e.offset, 2U);
  EXPECT_NE(e.message().find("a str (5 bytes)"), std::string::npos) << e.message();
  EXPECT_NE(e.message().find("only 1 bytes left"), std::string::npos) << e.message();
}

TEST(PickleReaderTest, RejectsMalformedStacks) {
  EXPECT_NE(read_error(p2("a")).message().find("APPEND"), std::string::npos);            // APPEND on nothing
  EXPECT_NE(read_error(p2("K\x01K\x02" "a")).message().find("a list for APPEND"), std::string::npos);
  EXPECT_NE(read_error(p2("e")).message().find("a MARK before APPENDS"), std::string::npos);
  EXPECT_NE(read_error(p2("}(K\x01u")).message().find("key/value pairs"), std::string::npos);
  EXPECT_NE(read_error(p2("h\x09")).message().find("memo index 9"), std::string::npos);
  EXPECT_NE(read_error(p2("K\x01K\x02")).message().find("exactly one value"), std::string::npos);
  EXPECT_NE(read_error(p2("(K\x01")).message().find("no open MARK"), std::string::npos);
  EXPECT_NE(read_error(std::string("\x80\x09N.", 4)).message().find("protocol 9"), std::string::npos);
  EXPECT_NE(read_error(p2("I1\n")).message().find("protocol 0 text opcode INT"), std::string::npos);
  EXPECT_NE(read_error(p2("\xff")).message().find("byte 0xff"), std::string::npos);
  EXPECT_NE(read_error(p2(std::string("\x8a\x09" "123456789", 11))).message().find("64 bits"), std::string::npos);
  EXPECT_NE(read_error("").message().find("end of input"), std::string::npos);
  EXPECT_NE(read_error(std::string("\x80\x02N", 3)).message().find("without STOP"), std::string::npos);
}

TEST(PickleReaderTest, EnforcesLimits) {
  std::string deep(2000, '(');
  const trace_error e = read_error(p2(deep));
  EXPECT_NE(e.message().find("nested MARKs"), std::string::npos) << e.message();
  pickle_limits small;
  small.max_nodes = 3;
  const auto r = read_pickle(p2("(K\x01K\x02K\x03K\x04l"), "limits", small);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message().find("at most 3 values"), std::string::npos);
  small = pickle_limits{};
  small.max_input_bytes = 3;  // p2("N") is 4 bytes
  EXPECT_FALSE(read_pickle(p2("N"), "limits", small).has_value());
}

TEST(PickleReaderTest, CyclesDoNotHang) {
  // l = []; l.append(l): EMPTY_LIST MEMOIZE GET APPEND.
  const auto doc = read_ok(std::string("\x80\x04]\x94h\x00" "a.", 8));
  EXPECT_EQ(doc.root().at(0).index(), doc.root().index());
}

// --- the writer, read back ------------------------------------------------------------------------

TEST(PickleWriterTest, WritesWhatTheReaderReads) {
  pickle_writer w;
  w.begin_dict();
  w.str("ints");
  w.begin_list();
  const std::int64_t values[] = {0, 255, 256, 65535, 65536, -1, INT32_MIN, std::int64_t{INT32_MAX} + 1,
                                 std::int64_t{1} << 47, -(std::int64_t{1} << 47), INT64_MAX, INT64_MIN};
  for (const std::int64_t v : values) {
    w.integer(v);
  }
  w.end_list();
  w.str("misc");
  w.begin_tuple();
  w.none();
  w.boolean(true);
  w.floating(-0.25);
  w.str("ints");  // memoized: written as BINGET
  w.end_tuple();
  w.end_dict();
  const std::string bytes = w.finish();
  const auto doc = read_ok(bytes);
  const pickle_ref ints = doc.root().get("ints");
  ASSERT_EQ(ints.size(), 12U);
  EXPECT_EQ(ints.at(3).as_int(), 65535);
  EXPECT_EQ(ints.at(6).as_int(), INT32_MIN);
  EXPECT_EQ(ints.at(7).as_int(), std::int64_t{INT32_MAX} + 1);
  EXPECT_EQ(ints.at(9).as_int(), -(1LL << 47));
  EXPECT_EQ(ints.at(10).as_int(), INT64_MAX);
  EXPECT_EQ(ints.at(11).as_int(), INT64_MIN);
  const pickle_ref misc = doc.root().get("misc");
  EXPECT_TRUE(misc.at(0).is_none());
  EXPECT_DOUBLE_EQ(misc.at(2).as_float(), -0.25);
  EXPECT_EQ(misc.at(3).as_str(), "ints");
}

}  // namespace
}  // namespace phasealloc
