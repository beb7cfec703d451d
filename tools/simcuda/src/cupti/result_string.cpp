// libcupti.so.13: the one CUPTI function simcuda answers for real. Everything else of CUPTI is a
// loud stub that returns CUPTI_ERROR_NOT_SUPPORTED; a profiler that gets that status asks
// cuptiGetResultString what it means, and it must get a string back. That function returns a
// status and writes the string through its second argument: the generated string-returning stub has
// the wrong shape for it (torch 2.11's profiler then fails with "string pointer is null").

namespace {

const char* describe(int result) {
  switch (result) {
    case 0: return "CUPTI_SUCCESS";
    case 1: return "CUPTI_ERROR_INVALID_PARAMETER";
    case 27: return "CUPTI_ERROR_NOT_SUPPORTED (simcuda: CUPTI is not emulated)";
    default: return "CUPTI_ERROR_UNKNOWN (simcuda: CUPTI is not emulated)";
  }
}

}  // namespace

extern "C" int cuptiGetResultString(int result, const char** str) {
  if (str == nullptr) return 1;  // CUPTI_ERROR_INVALID_PARAMETER
  *str = describe(result);
  return 0;
}
