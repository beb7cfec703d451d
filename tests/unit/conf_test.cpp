#include "phasealloc/conf.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "phasealloc/policies/basic_policy.hpp"
#include "phasealloc/policies/policy_registry.hpp"

namespace phasealloc {
namespace {

using ::testing::HasSubstr;

TEST(ConfTest, SplitsKeyValuePairsAndKeepsBracketedLists) {
  auto r = parse_conf("expandable_segments:True, roundup_power2_divisions:[256:1,512:2,>:8],max_split_size_mb:200");
  ASSERT_TRUE(r.has_value()) << r.error();
  ASSERT_EQ(r.value().size(), 3u);
  EXPECT_EQ(r.value()[0].key, "expandable_segments");
  EXPECT_EQ(r.value()[0].value, "True");
  EXPECT_EQ(r.value()[1].value, "[256:1,512:2,>:8]");
  EXPECT_EQ(r.value()[2].value, "200");
}

TEST(ConfTest, EmptyTextIsNoEntries) {
  auto r = parse_conf("");
  ASSERT_TRUE(r.has_value());
  EXPECT_TRUE(r.value().empty());
}

TEST(ConfTest, MalformedTextNamesTheProblem) {
  EXPECT_THAT(parse_conf("release").error(), HasSubstr("no ':'"));
  EXPECT_THAT(parse_conf("a:1,a:2").error(), HasSubstr("'a' is given twice"));
  EXPECT_THAT(parse_conf("a:[1,2").error(), HasSubstr("unterminated"));
  EXPECT_THAT(parse_conf("a:1]").error(), HasSubstr("unbalanced"));
  EXPECT_THAT(parse_conf(":1").error(), HasSubstr("empty key"));
  EXPECT_THAT(parse_conf("a:").error(), HasSubstr("empty value"));
}

TEST(ConfTest, ReaderReportsUnknownKeysWithTheValidOnes) {
  conf_reader reader("phasealloc", parse_conf("relase:all,capacity:80GiB").value());
  EXPECT_EQ(reader.get_bytes("capacity"), 80 * gib);
  EXPECT_EQ(reader.get_string("release"), std::nullopt);
  const auto error = reader.finish();
  ASSERT_TRUE(error.has_value());
  EXPECT_THAT(*error, HasSubstr("unknown key 'relase'"));
  EXPECT_THAT(*error, HasSubstr("valid keys: capacity, release"));
}

TEST(ConfTest, ReaderNamesBadValues) {
  conf_reader reader("pytorch", parse_conf("expandable_segments:maybe,max_split_size_mb:ten").value());
  EXPECT_EQ(reader.get_bool("expandable_segments"), std::nullopt);
  EXPECT_EQ(reader.get_uint("max_split_size_mb"), std::nullopt);
  EXPECT_THAT(*reader.finish(), HasSubstr("bad value for 'expandable_segments'"));
}

TEST(ConfTest, ParsesByteSizesWithUnits) {
  EXPECT_EQ(parse_bytes("512"), 512u);
  EXPECT_EQ(parse_bytes("64KiB"), 64 * kib);
  EXPECT_EQ(parse_bytes("20mib"), 20 * mib);
  EXPECT_EQ(parse_bytes("80GB"), 80'000'000'000u);
  EXPECT_EQ(parse_bytes("2G"), 2 * gib);
  EXPECT_EQ(parse_bytes("12 parsecs"), std::nullopt);
  EXPECT_EQ(parse_bytes(""), std::nullopt);
  EXPECT_EQ(parse_bytes("99999999999999999999GiB"), std::nullopt);
}

TEST(PolicyRegistryTest, BuildsPoliciesFromSpecs) {
  auto p = make_policy("basic:large_round:4MiB");
  ASSERT_TRUE(p.has_value()) << p.error();
  EXPECT_THAT(p.value()->spec(), HasSubstr("large_round:4194304"));
  EXPECT_EQ(p.value()->segment_bytes(1, 5 * mib), 8 * mib);
}

TEST(PolicyRegistryTest, UnknownPolicyAndKeyAreNamed) {
  EXPECT_THAT(make_policy("fastest").error(), HasSubstr("unknown policy 'fastest'"));
  EXPECT_THAT(make_policy("fastest").error(), HasSubstr("valid policies: "));
  for (const char* name : {"phasealloc", "pytorch", "basic"}) EXPECT_THAT(make_policy("fastest").error(), HasSubstr(name));
  EXPECT_THAT(make_policy("basic:large_rnd:4MiB").error(), HasSubstr("unknown key 'large_rnd'"));
}

TEST(BasicPolicyTest, RoundsTo512AndPicksPoolsBySize) {
  basic_policy p;
  EXPECT_EQ(p.round_bytes(0), 512u);
  EXPECT_EQ(p.round_bytes(513), 1024u);
  EXPECT_EQ(p.pool_for({}, mib), 0u);
  EXPECT_EQ(p.pool_for({}, mib + 512), 1u);
  EXPECT_EQ(p.segment_bytes(0, 512), 2 * mib);
  EXPECT_EQ(p.segment_bytes(1, 3 * mib), 4 * mib);
  EXPECT_TRUE(p.should_split(0, 2 * mib, 512));
  EXPECT_FALSE(p.should_split(1, 4 * mib, 3 * mib));  // a 1 MiB remainder is not worth keeping
  EXPECT_TRUE(p.should_split(1, 6 * mib, 3 * mib));
}

}  // namespace
}  // namespace phasealloc
