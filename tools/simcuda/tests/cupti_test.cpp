// The one CUPTI function simcuda answers: a profiler that got CUPTI_ERROR_NOT_SUPPORTED from a stub
// asks what it means and must get a string through the out-parameter (torch 2.11's profiler read a
// null pointer there when the stub had a string-returning shape).
#include <string>

#include <gtest/gtest.h>

extern "C" int cuptiGetResultString(int result, const char** str);

namespace {

TEST(simcuda_cupti, GetResultStringWritesTheStringAndReturnsSuccess) {
  const char* said = nullptr;
  EXPECT_EQ(cuptiGetResultString(27, &said), 0);
  ASSERT_NE(said, nullptr);
  EXPECT_NE(std::string(said).find("CUPTI_ERROR_NOT_SUPPORTED"), std::string::npos) << said;
  said = nullptr;
  EXPECT_EQ(cuptiGetResultString(0, &said), 0);
  ASSERT_NE(said, nullptr);
  EXPECT_EQ(std::string(said), "CUPTI_SUCCESS");
  EXPECT_EQ(cuptiGetResultString(27, nullptr), 1);  // CUPTI_ERROR_INVALID_PARAMETER
}

}  // namespace
