// simcuda's stream capture and CUDA graphs: work on a capturing stream is recorded, not run;
// launching the instantiated graph runs the recorded copies and memsets; what CUDA forbids during
// a capture fails with CUDA's error and invalidates the capture.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include <gtest/gtest.h>

namespace {

constexpr std::size_t bytes = 1 << 16;

class simcuda_graphs : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { setenv("SIMCUDA_GPU", "quiet:1", 1); }

  void SetUp() override {
    ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&src_, bytes), cudaSuccess);
    ASSERT_EQ(cudaMalloc(&dst_, bytes), cudaSuccess);
    ASSERT_EQ(cudaMemset(dst_, 0, bytes), cudaSuccess);
    fill(0x11);
  }

  void TearDown() override {
    EXPECT_EQ(cudaFree(src_), cudaSuccess);
    EXPECT_EQ(cudaFree(dst_), cudaSuccess);
    EXPECT_EQ(cudaStreamDestroy(stream_), cudaSuccess);
  }

  void fill(std::uint8_t value) {
    std::vector<std::uint8_t> host(bytes, value);
    ASSERT_EQ(cudaMemcpy(src_, host.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
  }

  std::vector<std::uint8_t> read(const void* device) {
    std::vector<std::uint8_t> host(bytes, 0xee);
    EXPECT_EQ(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost), cudaSuccess);
    return host;
  }

  cudaStreamCaptureStatus status_of(cudaStream_t s) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    EXPECT_EQ(cudaStreamIsCapturing(s, &status), cudaSuccess);
    return status;
  }

  unsigned long long capture_id(cudaStream_t s) {
    cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
    unsigned long long id = 0;
    EXPECT_EQ(cudaStreamGetCaptureInfo(s, &status, &id), cudaSuccess);
    return id;
  }

  cudaStream_t stream_ = nullptr;
  void* src_ = nullptr;
  void* dst_ = nullptr;
};

void count_call(void* counter) { ++*static_cast<int*>(counter); }

TEST_F(simcuda_graphs, CaptureRecordsTheWorkAndEachLaunchRunsTheCopies) {
  void* zeroed = nullptr;
  ASSERT_EQ(cudaMalloc(&zeroed, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(zeroed, 0x7f, bytes), cudaSuccess);
  int host_calls = 0;

  EXPECT_EQ(status_of(stream_), cudaStreamCaptureStatusNone);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(status_of(stream_), cudaStreamCaptureStatusActive);
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  cudaGraph_t capturing = nullptr;
  const cudaGraphNode_t* deps = nullptr;
  std::size_t dep_count = 99;
  ASSERT_EQ(cudaStreamGetCaptureInfo(stream_, &status, nullptr, &capturing, &deps, nullptr, &dep_count), cudaSuccess);
  EXPECT_EQ(status, cudaStreamCaptureStatusActive);
  EXPECT_NE(capturing, nullptr);
  EXPECT_EQ(dep_count, 0u);

  ASSERT_EQ(cudaMemcpyAsync(dst_, src_, bytes, cudaMemcpyDeviceToDevice, stream_), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(zeroed, 0, bytes, stream_), cudaSuccess);
  ASSERT_EQ(cudaLaunchHostFunc(stream_, count_call, &host_calls), cudaSuccess);
  ASSERT_EQ(cudaStreamGetCaptureInfo(stream_, &status, nullptr, nullptr, &deps, nullptr, &dep_count), cudaSuccess);
  ASSERT_EQ(dep_count, 1u);  // the last node
  const cudaGraphNode_t last = deps[0];  // deps is valid until the next call on the stream

  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  ASSERT_EQ(graph, capturing);
  EXPECT_EQ(status_of(stream_), cudaStreamCaptureStatusNone);

  // Recorded, not run.
  EXPECT_EQ(read(dst_), std::vector<std::uint8_t>(bytes, 0));
  EXPECT_EQ(read(zeroed), std::vector<std::uint8_t>(bytes, 0x7f));
  EXPECT_EQ(host_calls, 0);

  std::size_t nodes = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 3u);
  std::vector<cudaGraphNode_t> handles(4, nullptr);
  nodes = handles.size();
  ASSERT_EQ(cudaGraphGetNodes(graph, handles.data(), &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 3u);
  EXPECT_EQ(handles[3], nullptr);
  EXPECT_EQ(handles[2], last);
  std::size_t parents = 0;
  cudaGraphNode_t parent = nullptr;
  ASSERT_EQ(cudaGraphNodeGetDependencies(handles[1], nullptr, nullptr, &parents), cudaSuccess);
  EXPECT_EQ(parents, 1u);
  ASSERT_EQ(cudaGraphNodeGetDependencies(handles[1], &parent, nullptr, &parents), cudaSuccess);
  EXPECT_EQ(parent, handles[0]);  // stream order

  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiateWithFlags(&exec, graph, cudaGraphInstantiateFlagAutoFreeOnLaunch), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(read(dst_), std::vector<std::uint8_t>(bytes, 0x11));
  EXPECT_EQ(read(zeroed), std::vector<std::uint8_t>(bytes, 0));
  EXPECT_EQ(host_calls, 1);

  // A replay copies what the static input holds now.
  fill(0x5a);
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(read(dst_), std::vector<std::uint8_t>(bytes, 0x5a));
  EXPECT_EQ(host_calls, 2);

  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaErrorInvalidValue);
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaErrorInvalidValue);
  EXPECT_EQ(cudaFree(zeroed), cudaSuccess);
}

TEST_F(simcuda_graphs, EveryCaptureHasItsOwnId) {
  cudaGraph_t first = nullptr, second = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  const unsigned long long a = capture_id(stream_);
  EXPECT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaErrorIllegalState);  // already
  ASSERT_EQ(cudaStreamEndCapture(stream_, &first), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  const unsigned long long b = capture_id(stream_);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &second), cudaSuccess);
  EXPECT_NE(a, 0u);
  EXPECT_NE(b, 0u);
  EXPECT_NE(a, b);
  std::size_t nodes = 7;
  ASSERT_EQ(cudaGraphGetNodes(first, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 0u);  // an empty capture is an empty graph
  cudaGraph_t none = nullptr;
  EXPECT_EQ(cudaStreamEndCapture(stream_, &none), cudaErrorIllegalState);  // not capturing
  EXPECT_EQ(cudaGraphDestroy(first), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(second), cudaSuccess);
  // The legacy stream cannot capture.
  EXPECT_EQ(cudaStreamBeginCapture(nullptr, cudaStreamCaptureModeGlobal), cudaErrorStreamCaptureUnsupported);
}

TEST_F(simcuda_graphs, SynchronizingInsideACaptureFailsAndInvalidatesIt) {
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dst_, src_, bytes, cudaMemcpyDeviceToDevice, stream_), cudaSuccess);
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaGetLastError(), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(status_of(stream_), cudaStreamCaptureStatusInvalidated);
  EXPECT_EQ(cudaMemcpyAsync(dst_, src_, bytes, cudaMemcpyDeviceToDevice, stream_), cudaErrorStreamCaptureInvalidated);
  cudaGraph_t graph = reinterpret_cast<cudaGraph_t>(0x1234);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(status_of(stream_), cudaStreamCaptureStatusNone);
  EXPECT_EQ(read(dst_), std::vector<std::uint8_t>(bytes, 0));  // nothing ran

  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);

  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  std::vector<std::uint8_t> host(bytes);
  EXPECT_EQ(cudaMemcpy(host.data(), src_, bytes, cudaMemcpyDeviceToHost), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);

  // After the failed captures the stream and the device work again.
  EXPECT_EQ(cudaStreamSynchronize(stream_), cudaSuccess);
  EXPECT_EQ(cudaDeviceSynchronize(), cudaSuccess);
}

TEST_F(simcuda_graphs, CudaMallocDuringAGlobalCaptureNeedsTheRelaxedMode) {
  void* p = nullptr;
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&p, 1 << 20), cudaErrorStreamCaptureUnsupported);
  EXPECT_EQ(status_of(stream_), cudaStreamCaptureStatusInvalidated);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);

  // What PyTorch's allocator does: relaxed around cudaMalloc.
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureMode mode = cudaStreamCaptureModeRelaxed;
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeGlobal);
  EXPECT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  ASSERT_EQ(cudaThreadExchangeStreamCaptureMode(&mode), cudaSuccess);
  EXPECT_EQ(mode, cudaStreamCaptureModeRelaxed);
  EXPECT_EQ(status_of(stream_), cudaStreamCaptureStatusActive);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);

  // A relaxed capture prohibits nothing.
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeRelaxed), cudaSuccess);
  EXPECT_EQ(cudaMalloc(&p, 1 << 20), cudaSuccess);
  EXPECT_EQ(cudaFree(p), cudaSuccess);
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

TEST_F(simcuda_graphs, AStreamForkedIntoACaptureByAnEventIsPartOfItUntilJoined) {
  cudaStream_t side = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&side, cudaStreamNonBlocking), cudaSuccess);
  cudaEvent_t fork = nullptr, join = nullptr;
  ASSERT_EQ(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming), cudaSuccess);
  ASSERT_EQ(cudaEventCreateWithFlags(&join, cudaEventDisableTiming), cudaSuccess);
  void* other = nullptr;
  ASSERT_EQ(cudaMalloc(&other, bytes), cudaSuccess);
  ASSERT_EQ(cudaMemset(other, 0, bytes), cudaSuccess);

  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(dst_, src_, bytes, cudaMemcpyDeviceToDevice, stream_), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, fork, 0), cudaSuccess);
  EXPECT_EQ(status_of(side), cudaStreamCaptureStatusActive);
  EXPECT_EQ(capture_id(side), capture_id(stream_));
  ASSERT_EQ(cudaMemcpyAsync(other, dst_, bytes, cudaMemcpyDeviceToDevice, side), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(join, side), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(stream_, join, 0), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(status_of(side), cudaStreamCaptureStatusNone);
  EXPECT_EQ(read(other), std::vector<std::uint8_t>(bytes, 0));

  std::size_t nodes = 0;
  ASSERT_EQ(cudaGraphGetNodes(graph, nullptr, &nodes), cudaSuccess);
  EXPECT_EQ(nodes, 2u);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(exec, side), cudaSuccess);
  EXPECT_EQ(read(other), std::vector<std::uint8_t>(bytes, 0x11));  // both copies, in order
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);

  // A fork that is never joined back fails the capture.
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaEventRecord(fork, stream_), cudaSuccess);
  ASSERT_EQ(cudaStreamWaitEvent(side, fork, 0), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(other, 0, bytes, side), cudaSuccess);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureUnjoined);
  EXPECT_EQ(graph, nullptr);
  EXPECT_EQ(status_of(side), cudaStreamCaptureStatusNone);

  // Waiting inside a capture on work outside it crosses the capture's boundary.
  ASSERT_EQ(cudaEventRecord(join, side), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  EXPECT_EQ(cudaStreamWaitEvent(stream_, join, 0), cudaErrorStreamCaptureIsolation);
  EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);

  EXPECT_EQ(cudaEventDestroy(fork), cudaSuccess);
  EXPECT_EQ(cudaEventDestroy(join), cudaSuccess);
  EXPECT_EQ(cudaFree(other), cudaSuccess);
  EXPECT_EQ(cudaStreamDestroy(side), cudaSuccess);
}

void destroy_flag(void* flag) { *static_cast<bool*>(flag) = true; }

TEST_F(simcuda_graphs, AUserObjectLivesAsLongAsTheGraphsThatHoldIt) {
  bool destroyed = false;
  cudaUserObject_t object = nullptr;
  ASSERT_EQ(cudaUserObjectCreate(&object, &destroyed, destroy_flag, 1, cudaUserObjectNoDestructorSync), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  cudaStreamCaptureStatus status;
  cudaGraph_t capturing = nullptr;
  ASSERT_EQ(cudaStreamGetCaptureInfo(stream_, &status, nullptr, &capturing), cudaSuccess);
  ASSERT_EQ(cudaGraphRetainUserObject(capturing, object, 1, cudaGraphUserObjectMove), cudaSuccess);
  ASSERT_EQ(cudaMemsetAsync(dst_, 1, bytes, stream_), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
  EXPECT_FALSE(destroyed);  // the executable graph holds a reference
  ASSERT_EQ(cudaGraphLaunch(exec, stream_), cudaSuccess);
  EXPECT_EQ(read(dst_), std::vector<std::uint8_t>(bytes, 1));
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_TRUE(destroyed);
}

TEST_F(simcuda_graphs, ALaunchOverMemoryFreedSinceCaptureIsAnIllegalAddress) {
  void* scratch = nullptr;
  ASSERT_EQ(cudaMalloc(&scratch, bytes), cudaSuccess);
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeGlobal), cudaSuccess);
  ASSERT_EQ(cudaMemcpyAsync(scratch, src_, bytes, cudaMemcpyDeviceToDevice, stream_), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  cudaGraphExec_t exec = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&exec, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaFree(scratch), cudaSuccess);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(cudaGraphLaunch(exec, stream_), cudaErrorIllegalAddress);
  std::string said = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(said.find("cudaGraphLaunch"), std::string::npos) << said;
  EXPECT_EQ(cudaGraphExecDestroy(exec), cudaSuccess);
  EXPECT_EQ(cudaGraphDestroy(graph), cudaSuccess);
}

}  // namespace
