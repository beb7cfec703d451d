// Tests of PyTorch's request rounding (round_size, roundup_power2_divisions): known values from
// the torch sources, properties over many sizes (tcmalloc's size_classes_test habit), and the
// bracket grammar as the code reads it.
#include "phasealloc/policies/pytorch_rounding.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <random>
#include <vector>

namespace phasealloc {
namespace {

using ::testing::HasSubstr;

pytorch_divisions all(std::size_t d) {
  pytorch_divisions t;
  t.by_interval.fill(d);
  return t;
}

pytorch_divisions parse(std::string_view text, pytorch_gt_rule rule = pytorch_gt_rule::from_last_key) {
  auto r = parse_pytorch_divisions(text, rule);
  EXPECT_TRUE(r.has_value()) << text << ": " << (r ? "" : r.error());
  return r.value_or(pytorch_divisions{});
}

std::string parse_error(std::string_view text) {
  auto r = parse_pytorch_divisions(text);
  EXPECT_FALSE(r.has_value()) << text << " parsed";
  return r ? std::string() : r.error();
}

// --- known values --------------------------------------------------------------------------------

TEST(PytorchRoundingTest, NextDivisionMatchesTheTorchComment) {
  // "if we need to round-up 1200 and number of divisions is 4, ... the values are 1024, 1280,
  // 1536, and 1792. So the function will return 1280".
  EXPECT_EQ(pytorch_roundup_power2_next_division(1200, 4), 1280u);
  EXPECT_EQ(pytorch_roundup_power2_next_division(1280, 4), 1280u);
  EXPECT_EQ(pytorch_roundup_power2_next_division(1281, 4), 1536u);
  EXPECT_EQ(pytorch_roundup_power2_next_division(1793, 4), 2048u);
  EXPECT_EQ(pytorch_roundup_power2_next_division(1024, 4), 1024u);
  EXPECT_EQ(pytorch_roundup_power2_next_division(3, 4), 4u);  // step 0: the next power of two
  EXPECT_EQ(pytorch_roundup_power2_next_division(100 * mib, 8), 104 * mib);
}

struct known_value {
  std::size_t bytes;
  std::size_t divisions;  // every interval
  std::size_t rounded;
};

TEST(PytorchRoundingTest, RoundSizeKnownValues) {
  const known_value table[] = {
      {0, 0, 512},
      {1, 0, 512},
      {511, 0, 512},
      {512, 0, 512},
      {513, 0, 1024},
      {1000, 0, 1024},
      {mib + 1, 0, mib + 512},
      {91 * mib, 0, 91 * mib},
      {1200, 4, 1536},       // 1200 <= 512 * 4: plain 512-byte rounding, not 1280
      {2049, 4, 2560},       // 2049 > 2048: steps of 2048 / 4 = 512
      {3000, 4, 3072},
      {5000, 4, 5120},       // steps of 1024 in [4096, 8192)
      {mib + 1, 4, mib + mib / 4},
      {100 * mib, 8, 104 * mib},
      {100 * mib + 1, 1, 100 * mib + 512},  // 1 division is no division
      {600 * mib, 2, 768 * mib},
      {(std::size_t{1} << 40) + 1, std::size_t{1} << 30, (std::size_t{1} << 40) + 1024},
  };
  for (const known_value& k : table) {
    EXPECT_EQ(pytorch_round_size(k.bytes, all(k.divisions)), k.rounded) << k.bytes << " with " << k.divisions;
  }
}

TEST(PytorchRoundingTest, PowersOfTwoStayWhateverTheDivisions) {
  for (std::size_t shift = 9; shift < 48; ++shift) {
    for (const std::size_t d : {0u, 1u, 2u, 4u, 8u, 16u, 1024u}) {
      EXPECT_EQ(pytorch_round_size(std::size_t{1} << shift, all(d)), std::size_t{1} << shift);
    }
  }
}

TEST(PytorchRoundingTest, IntervalsAreLog2MiBClampedToSixteen) {
  EXPECT_EQ(pytorch_division_interval(0), 0u);
  EXPECT_EQ(pytorch_division_interval(512), 0u);
  EXPECT_EQ(pytorch_division_interval(mib), 0u);
  EXPECT_EQ(pytorch_division_interval(2 * mib - 1), 0u);
  EXPECT_EQ(pytorch_division_interval(2 * mib), 1u);
  EXPECT_EQ(pytorch_division_interval(4 * mib), 2u);
  EXPECT_EQ(pytorch_division_interval(256 * mib), 8u);
  EXPECT_EQ(pytorch_division_interval(512 * mib - 1), 8u);
  EXPECT_EQ(pytorch_division_interval(512 * mib), 9u);
  EXPECT_EQ(pytorch_division_interval(32 * gib - 1), 14u);
  EXPECT_EQ(pytorch_division_interval(32 * gib), 15u);
  EXPECT_EQ(pytorch_division_interval(64 * gib), 15u);
  EXPECT_EQ(pytorch_division_interval(SIZE_MAX), 15u);
}

TEST(PytorchRoundingTest, TheTableChoosesDivisionsByInterval) {
  const pytorch_divisions t = parse("[256:1,512:2,1024:4,>:8]");
  EXPECT_EQ(pytorch_round_size(300 * mib + 1, t), 300 * mib + 512);   // [0, 512 MiB): 1
  EXPECT_EQ(pytorch_round_size(700 * mib, t), 768 * mib);             // [512 MiB, 1 GiB): 2
  EXPECT_EQ(pytorch_round_size(1100 * mib, t), 1152 * mib);           // [1 GiB, ...): 8 (the 4 is overwritten)
  const pytorch_divisions newer = parse("[256:1,512:2,1024:4,>:8]", pytorch_gt_rule::after_last_key);
  EXPECT_EQ(pytorch_round_size(1100 * mib, newer), 1280 * mib);       // newer torch keeps 4 for [1, 2) GiB
  EXPECT_EQ(pytorch_round_size(2100 * mib, newer), 2304 * mib);       // and 8 from 2 GiB on
}

// --- properties ----------------------------------------------------------------------------------

/// Sizes near every power of two and every 512-byte boundary below 64 KiB, plus log-uniform
/// random sizes up to 2^44 (a fixed seed: the test is deterministic).
std::vector<std::size_t> sample_sizes() {
  std::vector<std::size_t> sizes;
  for (std::size_t b = 0; b < 64 * kib; b += 512) {
    for (const std::size_t delta : {0, 1, 511}) sizes.push_back(b + delta);
  }
  for (std::size_t shift = 9; shift < 45; ++shift) {
    const std::size_t p = std::size_t{1} << shift;
    for (const std::size_t v : {p - 1, p, p + 1, p + p / 3, p + p / 2 + 7}) sizes.push_back(v);
  }
  std::mt19937_64 rng(193400);
  std::uniform_int_distribution<int> shift(9, 44);
  for (int i = 0; i < 20000; ++i) {
    const std::size_t hi = std::size_t{1} << shift(rng);
    sizes.push_back(hi + rng() % hi);
  }
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::vector<pytorch_divisions> sample_tables() {
  std::vector<pytorch_divisions> tables = {all(0), all(1), all(2), all(4), all(8), all(16), all(std::size_t{1} << 20),
                                           parse("[256:1,512:2,1024:4,>:8]"), parse("[1:8,2:0,64:4,>:2]")};
  std::mt19937_64 rng(7);
  for (int i = 0; i < 8; ++i) {
    pytorch_divisions t;
    for (std::size_t& d : t.by_interval) d = rng() % 3 == 0 ? 0 : std::size_t{1} << (rng() % 7);
    tables.push_back(t);
  }
  return tables;
}

TEST(PytorchRoundingTest, PropertiesHoldOverManySizes) {
  const std::vector<std::size_t> sizes = sample_sizes();
  for (const pytorch_divisions& t : sample_tables()) {
    std::size_t previous = 0;
    for (const std::size_t b : sizes) {
      const std::size_t r = pytorch_round_size(b, t);
      ASSERT_GE(r, b) << b;
      ASSERT_EQ(r % pytorch_min_block_bytes, 0u) << b;
      ASSERT_EQ(pytorch_round_size(r, t), r) << "not a fixed point: " << b << " -> " << r;
      ASSERT_GE(r, previous) << "not monotone at " << b;  // sizes are sorted
      const std::size_t d = t.for_size(b);
      const std::size_t step = d > 1 && b > 0 ? std::bit_floor(b) / d : 0;
      if (b == 0) {
        ASSERT_EQ(r, pytorch_min_block_bytes);  // a zero-byte request still gets a minimum block
      } else {
        ASSERT_LT(r - b, std::max(pytorch_min_block_bytes, step)) << b << " with " << d << " divisions";
      }
      previous = r;
    }
  }
}

TEST(PytorchRoundingTest, DivisionsNeverRoundBelowPlainRounding) {
  // Power-of-two rounding only ever adds: it is at least the 512-byte rounding of the same size.
  for (const std::size_t b : sample_sizes()) {
    for (const std::size_t d : {2u, 4u, 8u, 64u}) {
      EXPECT_GE(pytorch_round_size(b, all(d)), pytorch_round_size(b, all(0))) << b;
    }
  }
}

// --- the grammar, as the code reads it -------------------------------------------------------------

TEST(PytorchRoundingTest, SingleNumberFillsEveryInterval) {
  EXPECT_EQ(parse("4"), all(4));
  EXPECT_EQ(parse("1"), all(1));
  EXPECT_EQ(parse(" 16 "), all(16));
}

TEST(PytorchRoundingTest, BracketKeysAreMiBAndSetTheirOwnInterval) {
  // Key K (MiB) sets interval log2(K): the sizes in [K MiB, 2K MiB), not those below K.
  const pytorch_divisions t = parse("[256:1,512:2,1024:4,>:8]");
  for (std::size_t i = 0; i <= 8; ++i) EXPECT_EQ(t.by_interval[i], 1u) << i;  // the first key fills below
  EXPECT_EQ(t.by_interval[9], 2u);
  for (std::size_t i = 10; i < 16; ++i) EXPECT_EQ(t.by_interval[i], 8u) << i;  // '>' overwrote 1024:4
  EXPECT_EQ(t.for_size(256 * mib), 1u);  // the docs say 2 divisions "between 256MB and 512MB"
  EXPECT_EQ(t.for_size(511 * mib), 1u);
  EXPECT_EQ(t.for_size(512 * mib), 2u);
}

TEST(PytorchRoundingTest, NewerTorchStartsGreaterThanAfterTheLastKey) {
  const pytorch_divisions t = parse("[256:1,512:2,1024:4,>:8]", pytorch_gt_rule::after_last_key);
  EXPECT_EQ(t.by_interval[9], 2u);
  EXPECT_EQ(t.by_interval[10], 4u);
  for (std::size_t i = 11; i < 16; ++i) EXPECT_EQ(t.by_interval[i], 8u) << i;
  // With no key before it, '>' starts at interval 0 in the older code and 1 in the newer.
  EXPECT_EQ(parse("[>:8]"), all(8));
  const pytorch_divisions newer = parse("[>:8]", pytorch_gt_rule::after_last_key);
  EXPECT_EQ(newer.by_interval[0], 0u);
  EXPECT_EQ(newer.by_interval[1], 8u);
}

TEST(PytorchRoundingTest, OnlyTheFirstKeyFillsBelowItAndKeysApplyInOrder) {
  const pytorch_divisions t = parse("[2:4,64:8]");
  EXPECT_EQ(t.by_interval[0], 4u);
  EXPECT_EQ(t.by_interval[1], 4u);
  for (std::size_t i = 2; i < 6; ++i) EXPECT_EQ(t.by_interval[i], 0u) << i;  // untouched
  EXPECT_EQ(t.by_interval[6], 8u);
  const pytorch_divisions backwards = parse("[256:1,128:2]");
  EXPECT_EQ(backwards.by_interval[6], 1u);
  EXPECT_EQ(backwards.by_interval[7], 2u);
  EXPECT_EQ(backwards.by_interval[8], 1u);
  EXPECT_EQ(parse("[1:4]").by_interval[0], 4u);
  EXPECT_EQ(parse("[1:4]").by_interval[1], 0u);
}

TEST(PytorchRoundingTest, KeysBeyondSixtyFourGiBClampToTheLastInterval) {
  const pytorch_divisions t = parse("[65536:2]");  // interval 16 -> 15; the fill covers 0..14
  EXPECT_EQ(t, all(2));
}

TEST(PytorchRoundingTest, TorchLeniencesAreKept) {
  EXPECT_EQ(parse("[]"), all(0));
  EXPECT_EQ(parse("[256:1,]"), parse("[256:1]"));         // a trailing comma
  EXPECT_EQ(parse("[ 256 : 1 , > : 8 ]"), parse("[256:1,>:8]"));  // spaces are dropped
  EXPECT_EQ(parse("[256:0,>:4]").by_interval[0], 0u);    // 0 disables an interval
}

TEST(PytorchRoundingTest, BadValuesNameTheBadToken) {
  EXPECT_THAT(parse_error("0"), HasSubstr("\"0\""));  // the single form needs a power of two
  EXPECT_THAT(parse_error("3"), HasSubstr("\"3\": divisions must be a power of two"));
  EXPECT_THAT(parse_error("four"), HasSubstr("\"four\""));
  EXPECT_THAT(parse_error("2147483648"), HasSubstr("at most"));  // beyond torch's stoi
  EXPECT_THAT(parse_error("[256:3]"), HasSubstr("\"3\""));
  EXPECT_THAT(parse_error("[300:1]"), HasSubstr("\"300\": interval sizes must be powers of two"));
  EXPECT_THAT(parse_error("[0:1]"), HasSubstr("\"0\""));
  EXPECT_THAT(parse_error("[x:1]"), HasSubstr("\"x\""));
  EXPECT_THAT(parse_error("[256]"), HasSubstr("expected ':' after \"256\""));
  EXPECT_THAT(parse_error("[256:]"), HasSubstr("missing divisions after \"256:\""));
  EXPECT_THAT(parse_error("[256:1;512:2]"), HasSubstr("\"1;512\""));
  EXPECT_THAT(parse_error("[256:1 512:2]"), HasSubstr("\"1512\""));  // spaces dropped, as torch does
  EXPECT_THAT(parse_error("[256:1:2]"), HasSubstr("expected ',' but found \":\""));
  EXPECT_THAT(parse_error("[256:1,:2]"), HasSubstr("found \":\""));
  EXPECT_THAT(parse_error("[256:1"), HasSubstr("does not end with ']'"));
  EXPECT_THAT(parse_error("[[256:1]]"), HasSubstr("unexpected bracket"));
  EXPECT_THAT(parse_error(""), HasSubstr("empty"));
}

TEST(PytorchRoundingTest, FormatParsesBackUnderBothRules) {
  EXPECT_EQ(format_pytorch_divisions(all(0)), "");
  EXPECT_EQ(format_pytorch_divisions(all(4)), "4");
  EXPECT_EQ(format_pytorch_divisions(parse("[256:1,512:2,1024:4,>:8]")), "[256:1,512:2,1024:8,>:8]");
  for (const pytorch_divisions& t : sample_tables()) {
    const std::string text = format_pytorch_divisions(t);
    if (text.empty()) {
      EXPECT_EQ(t, all(0));
      continue;
    }
    EXPECT_EQ(parse(text), t) << text;
    EXPECT_EQ(parse(text, pytorch_gt_rule::after_last_key), t) << text;
  }
}

}  // namespace
}  // namespace phasealloc
