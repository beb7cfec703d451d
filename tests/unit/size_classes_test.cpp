// Property tests of the size-class table (tcmalloc's size_classes_test in spirit).
#include "phasealloc/policies/size_classes.hpp"

#include <random>

#include <gtest/gtest.h>

namespace phasealloc {
namespace {

TEST(SizeClassesTest, ClassesIncreaseAndTheLastTakesEverything) {
  for (std::size_t i = 1; i < size_classes.size(); ++i) EXPECT_LT(size_classes[i - 1].max_bytes, size_classes[i].max_bytes);
  EXPECT_EQ(size_classes.back().max_bytes, SIZE_MAX);
}

TEST(SizeClassesTest, PagesAreWholeGranulesAndRoundingDividesThem) {
  for (const size_class& c : size_classes) {
    EXPECT_EQ(c.page_bytes % (2 * mib), 0u) << c.name;
    EXPECT_EQ(c.page_bytes % c.round_bytes, 0u) << c.name;
    EXPECT_GE(c.round_bytes, 512u) << c.name;
  }
}

TEST(SizeClassesTest, RoundingIsAtLeastTheRequestIdempotentMonotoneAndBounded) {
  std::mt19937_64 rng(7);
  std::size_t previous_request = 0;
  std::size_t previous_rounded = 0;
  std::vector<std::size_t> sizes{0, 1, 511, 512, 513, mib - 1, mib, mib + 1, 2 * mib, 20 * mib + 3};
  for (int i = 0; i < 100000; ++i) sizes.push_back(static_cast<std::size_t>(std::exp2(std::uniform_real_distribution<double>(0, 36)(rng))));
  std::sort(sizes.begin(), sizes.end());
  for (const std::size_t s : sizes) {
    const std::size_t r = round_to_class(s);
    ASSERT_GE(r, s);
    ASSERT_GE(r, 512u);
    ASSERT_EQ(round_to_class(r), r) << s;
    ASSERT_LT(r - std::max<std::size_t>(s, 1), size_classes[size_class_of(s)].round_bytes) << s;  // waste < 512 B
    if (s >= previous_request) {
      ASSERT_GE(r, previous_rounded) << s;
    }
    previous_request = s;
    previous_rounded = r;
  }
}

TEST(SizeClassesTest, ClassBoundaryIsOneMebibyte) {
  EXPECT_EQ(size_classes[size_class_of(mib)].name, "small");
  EXPECT_EQ(size_classes[size_class_of(mib + 1)].name, "large");
  EXPECT_EQ(size_classes[size_class_of(round_to_class(mib))].name, "small");  // rounding never changes the class
}

}  // namespace
}  // namespace phasealloc
