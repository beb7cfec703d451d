// The simulated NCCL's communicators: their device memory on the simulated GPU's books (connection
// buffers sized as NCCL sizes them, taken at the first collective, given back by suspend and
// destroy), ncclMemAlloc, registration, and the error paths with NCCL's status codes.
#include <cuda_runtime_api.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <cstring>
#include <string>
#include <thread>

#include "nccl_ranks.hpp"
#include "simcuda/introspect.h"

namespace {

using nccl_test::all_succeeded;
using nccl_test::join;
using nccl_test::run_ranks;

constexpr std::size_t mib = std::size_t{1} << 20;
constexpr std::size_t page = 2 * mib;
std::size_t rounded(std::size_t bytes) { return (bytes + page - 1) / page * page; }

std::size_t free_bytes() {
  size_t free = 0, total = 0;
  RANK_CHECK(cudaMemGetInfo(&free, &total) == cudaSuccess, "cudaMemGetInfo");
  return free;
}

class NcclLifecycleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    setenv("SIMCUDA_GPU", "count:4,memory:4GiB,quiet:1", 1);
    unsetenv("NCCL_BUFFSIZE");
    unsetenv("NCCL_MAX_NCHANNELS");
  }
};

TEST_F(NcclLifecycleTest, ConnectionBuffersAreDeviceMemoryTakenAtTheFirstCollectiveAndGivenBackBySuspendAndDestroy) {
  // NCCL's sizing: per channel one receive connection of SIMPLE (NCCL_BUFFSIZE) + LL (512 KiB) +
  // LL128 (4800 KiB) buffers; here 2 channels of a 3 MiB SIMPLE buffer.
  setenv("NCCL_BUFFSIZE", "3145728", 1);
  setenv("NCCL_MAX_NCHANNELS", "2", 1);
  const std::size_t ring = 2 * rounded(3 * mib + 8 * 512 * 8 * 16 + 120 * 640 * 8 * 8);
  const std::size_t p2p = 2 * rounded(512 * 1024 * 8);  // 2 channels per peer of 8 x 512 KiB chunks
  auto statuses = run_ranks(2, [&](int rank, const ncclUniqueId& id) {
    RANK_CHECK(cudaSetDevice(rank) == cudaSuccess, "set device");
    void* data = nullptr;
    RANK_CHECK(cudaMalloc(&data, 4 * mib) == cudaSuccess, "cudaMalloc");
    const std::size_t before = free_bytes();
    ncclComm_t comm = join(rank, 2, id);
    RANK_CHECK(free_bytes() == before, "init takes nothing under runtime connect: %zu -> %zu", before, free_bytes());
    RANK_CHECK(ncclAllReduce(data, data, 1024, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess, "all-reduce");
    RANK_CHECK(before - free_bytes() == ring, "first collective took %zu bytes, model says %zu", before - free_bytes(),
               ring);
    // The simulator's books count NCCL's buffers apart, on the communicator's device only.
    RANK_CHECK(simcuda_nccl_bytes(rank) == ring && simcuda_peak_nccl_bytes(rank) == ring, "nccl books %zu / %zu",
               simcuda_nccl_bytes(rank), simcuda_peak_nccl_bytes(rank));
    RANK_CHECK(simcuda_nccl_bytes(1 - rank) == 0, "another device's nccl books %zu", simcuda_nccl_bytes(1 - rank));
    uint64_t total = 0;
    RANK_CHECK(ncclCommMemStats(comm, ncclStatGpuMemTotal, &total) == ncclSuccess && total == ring, "stats %llu",
               static_cast<unsigned long long>(total));
    RANK_CHECK(ncclAllReduce(data, data, 1024, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess, "again");
    RANK_CHECK(before - free_bytes() == ring, "a second collective takes no more");

    // A rank sending to itself takes no buffers.
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group");
    ncclSend(data, 16, ncclInt8, rank, comm, nullptr);
    ncclRecv(static_cast<char*>(data) + mib, 16, ncclInt8, rank, comm, nullptr);
    RANK_CHECK(ncclGroupEnd() == ncclSuccess, "self send/recv");
    RANK_CHECK(before - free_bytes() == ring, "self send/recv took %zu bytes", before - free_bytes() - ring);

    // Point-to-point: the receiving side of each peer connection.
    RANK_CHECK(ncclGroupStart() == ncclSuccess, "group");
    ncclSend(data, 16, ncclInt8, 1 - rank, comm, nullptr);
    ncclRecv(static_cast<char*>(data) + mib, 16, ncclInt8, 1 - rank, comm, nullptr);
    RANK_CHECK(ncclGroupEnd() == ncclSuccess, "send/recv");
    RANK_CHECK(before - free_bytes() == ring + p2p, "after p2p: %zu, model %zu", before - free_bytes(), ring + p2p);

    RANK_CHECK(ncclCommSuspend(comm, SIMCUDA_NCCL_SUSPEND_MEM) == ncclSuccess, "suspend");
    RANK_CHECK(free_bytes() == before, "suspended: everything back");
    RANK_CHECK(simcuda_nccl_bytes(rank) == 0 && simcuda_peak_nccl_bytes(rank) == ring + p2p, "suspended books %zu / %zu",
               simcuda_nccl_bytes(rank), simcuda_peak_nccl_bytes(rank));
    uint64_t suspended = 0;
    ncclCommMemStats(comm, ncclStatGpuMemSuspended, &suspended);
    RANK_CHECK(suspended == 1, "suspended flag");
    RANK_CHECK(ncclAllReduce(data, data, 1024, ncclFloat32, ncclSum, comm, nullptr) == ncclInvalidUsage,
               "a suspended communicator refuses work");
    RANK_CHECK(ncclCommResume(comm) == ncclSuccess, "resume");
    RANK_CHECK(before - free_bytes() == ring + p2p, "resumed: taken again");
    RANK_CHECK(ncclAllReduce(data, data, 1024, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess, "works again");

    RANK_CHECK(ncclCommFinalize(comm) == ncclSuccess, "finalize");
    RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
    RANK_CHECK(free_bytes() == before, "destroyed: everything back");
    RANK_CHECK(simcuda_nccl_bytes(rank) == 0, "destroyed: nccl books %zu", simcuda_nccl_bytes(rank));
    return 0;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclLifecycleTest, MemAllocIsCountedDeviceMemoryAndRegistrationChecksItsBuffer) {
  auto statuses = run_ranks(1, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = join(rank, 1, id);
    std::size_t before = simcuda_mapped_bytes(0);
    void* p = nullptr;
    RANK_CHECK(ncclMemAlloc(&p, 3 * mib) == ncclSuccess && p != nullptr, "ncclMemAlloc");
    RANK_CHECK(simcuda_mapped_bytes(0) - before == 4 * mib, "mapped %zu", simcuda_mapped_bytes(0) - before);
    void* handle = nullptr;
    RANK_CHECK(ncclCommRegister(comm, p, 3 * mib, &handle) == ncclSuccess, "register");
    int host = 0;
    void* bad = nullptr;
    RANK_CHECK(ncclCommRegister(comm, &host, sizeof host, &bad) == ncclInvalidArgument, "host memory refused");
    RANK_CHECK(ncclCommDeregister(comm, handle) == ncclSuccess, "deregister");
    RANK_CHECK(ncclCommDeregister(comm, handle) == ncclInvalidArgument, "twice");
    RANK_CHECK(ncclMemFree(p) == ncclSuccess, "free");
    RANK_CHECK(simcuda_mapped_bytes(0) == before, "back");
    RANK_CHECK(ncclMemFree(p) == ncclUnhandledCudaError, "double free is an error");
    return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclLifecycleTest, BadArgumentsGetNcclStatusCodesAndALineSayingWhat) {
  auto statuses = run_ranks(2, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = join(rank, 2, id);
    void* data = nullptr;
    cudaMalloc(&data, mib);
    int host[4] = {};
    RANK_CHECK(
        ncclAllReduce(data, data, 4, static_cast<ncclDataType_t>(42), ncclSum, comm, nullptr) == ncclInvalidArgument,
        "type");
    RANK_CHECK(std::string(ncclGetLastError(nullptr)).find("invalid data type 42") != std::string::npos,
               "last error: %s", ncclGetLastError(nullptr));
    RANK_CHECK(
        ncclAllReduce(data, data, 4, ncclInt32, static_cast<ncclRedOp_t>(9), comm, nullptr) == ncclInvalidArgument,
        "op");
    RANK_CHECK(ncclBroadcast(data, data, 4, ncclInt32, 2, comm, nullptr) == ncclInvalidArgument, "root");
    RANK_CHECK(ncclAllReduce(host, host, 4, ncclInt32, ncclSum, comm, nullptr) == ncclInvalidArgument, "host buffer");
    RANK_CHECK(std::string(ncclGetLastError(nullptr)).find("not live device memory") != std::string::npos, "%s",
               ncclGetLastError(nullptr));
    RANK_CHECK(ncclAllGather(data, data, mib, ncclInt32, comm, nullptr) == ncclInvalidArgument, "buffer too short");
    RANK_CHECK(
        ncclAllReduce(data, data, 4, ncclInt32, ncclSum, comm, reinterpret_cast<void*>(0x1234)) == ncclInvalidArgument,
        "stream");
    RANK_CHECK(ncclGroupEnd() == ncclInvalidUsage, "group end without start");
    RANK_CHECK(ncclAllReduce(data, data, 4, ncclInt32, ncclSum, nullptr, nullptr) == ncclInvalidArgument, "NULL comm");
    // Nothing was issued on either rank: the communicator still works.
    RANK_CHECK(ncclAllReduce(data, data, 4, ncclInt32, ncclSum, comm, nullptr) == ncclSuccess, "still works");
    RANK_CHECK(ncclCommDestroy(comm) == ncclSuccess, "destroy");
    RANK_CHECK(ncclAllReduce(data, data, 4, ncclInt32, ncclSum, comm, nullptr) == ncclInvalidArgument,
               "destroyed comm");
    RANK_CHECK(
        std::strcmp(ncclGetErrorString(ncclInvalidUsage), "invalid usage (run with NCCL_DEBUG=WARN for details)") == 0,
        "error string");
    // What is not emulated fails with its name.
    RANK_CHECK(ncclCommRevoke(nullptr, 0) == ncclInvalidUsage, "stub status");
    return 0;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclLifecycleTest, TwoRanksOnOneGpuOrDisagreeingOnTheSizeAreRefused) {
  auto duplicate = run_ranks(2, [&](int rank, const ncclUniqueId& id) {
    cudaSetDevice(0);
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRank(&comm, 2, id, rank);
    RANK_CHECK(r == ncclInvalidUsage, "duplicate GPU gave %d", r);
    RANK_CHECK(std::string(ncclGetLastError(nullptr)).find("duplicate GPU") != std::string::npos, "%s",
               ncclGetLastError(nullptr));
    return 0;
  });
  EXPECT_TRUE(all_succeeded(duplicate));
  auto mismatch = run_ranks(2, [&](int rank, const ncclUniqueId& id) {
    cudaSetDevice(rank);
    ncclComm_t comm = nullptr;
    if (rank == 1) usleep(200000);  // rank 0 sets the size first
    ncclResult_t r = ncclCommInitRank(&comm, rank == 0 ? 2 : 3, id, rank);
    if (rank == 1) {
      RANK_CHECK(r == ncclInvalidUsage, "mismatched nranks gave %d", r);
      return 0;
    }
    RANK_CHECK(r == ncclRemoteError, "rank 0 sees its peer exit: %d", r);
    return 0;
  });
  EXPECT_TRUE(all_succeeded(mismatch));
}

TEST_F(NcclLifecycleTest, SharedMemoryTooSmallForTheCommunicatorIsASystemErrorSayingSo) {
  auto statuses = run_ranks(1, [&](int rank, const ncclUniqueId& id) {
    // A file-size limit stands in for a small /dev/shm: the reservation fails the same way.
    signal(SIGXFSZ, SIG_IGN);
    rlimit limit{mib, mib};
    setrlimit(RLIMIT_FSIZE, &limit);
    cudaSetDevice(rank);
    ncclComm_t comm = nullptr;
    ncclResult_t r = ncclCommInitRank(&comm, 1, id, rank);
    RANK_CHECK(r == ncclSystemError, "init gave %d", r);
    RANK_CHECK(std::string(ncclGetLastError(nullptr)).find("cannot reserve") != std::string::npos, "%s",
               ncclGetLastError(nullptr));
    return 0;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclLifecycleTest, APeerThatExitsFailsTheOthersWithRemoteErrorNamingIt) {
  auto statuses = run_ranks(2, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = join(rank, 2, id);
    void* data = nullptr;
    cudaMalloc(&data, mib);
    if (rank == 1) std::_Exit(0);  // leaves without a word
    ncclResult_t r = ncclAllReduce(data, data, 16, ncclFloat32, ncclSum, comm, nullptr);
    RANK_CHECK(r == ncclRemoteError, "all-reduce with a dead peer gave %d", r);
    RANK_CHECK(std::string(ncclGetLastError(nullptr)).find("rank 1 (pid") != std::string::npos, "%s",
               ncclGetLastError(nullptr));
    return 0;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclLifecycleTest, TheRanksThatRemainShrinkTheCommunicatorAndGoOn) {
  auto statuses = run_ranks(3, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = join(rank, 3, id);
    int* data = nullptr;
    cudaMalloc(reinterpret_cast<void**>(&data), mib);
    if (rank == 1) std::_Exit(0);  // a failed rank
    RANK_CHECK(ncclAllReduce(data, data, 4, ncclInt32, ncclSum, comm, nullptr) == ncclRemoteError, "peer gone");
    int gone[] = {1};
    ncclComm_t shrunk = nullptr;
    ncclResult_t r = ncclCommShrink(comm, gone, 1, &shrunk, nullptr, 0);
    RANK_CHECK(r == ncclSuccess, "shrink: %s", ncclGetErrorString(r));
    int new_rank = -1, count = -1;
    ncclCommUserRank(shrunk, &new_rank);
    ncclCommCount(shrunk, &count);
    RANK_CHECK(count == 2 && new_rank == (rank == 0 ? 0 : 1), "rank %d of %d", new_rank, count);
    int value = 10 * (rank + 1);
    cudaMemcpy(data, &value, sizeof value, cudaMemcpyHostToDevice);
    RANK_CHECK(ncclAllReduce(data, data, 1, ncclInt32, ncclSum, shrunk, nullptr) == ncclSuccess, "all-reduce");
    cudaMemcpy(&value, data, sizeof value, cudaMemcpyDeviceToHost);
    RANK_CHECK(value == 10 + 30, "sum %d", value);
    int self[] = {rank};
    ncclComm_t none = nullptr;
    RANK_CHECK(ncclCommShrink(shrunk, self, 1, &none, nullptr, 0) == ncclInvalidArgument, "excluding itself");
    ncclCommDestroy(shrunk);
    ncclCommAbort(comm);
    return 0;
  });
  EXPECT_TRUE(WIFEXITED(statuses.at(0)) && WEXITSTATUS(statuses[0]) == 0);
  EXPECT_TRUE(WIFEXITED(statuses.at(2)) && WEXITSTATUS(statuses[2]) == 0);
}

TEST_F(NcclLifecycleTest, AnAbortFailsThePeersWaitingInACollective) {
  auto statuses = run_ranks(3, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = join(rank, 3, id);
    void* data = nullptr;
    cudaMalloc(&data, mib);
    if (rank == 1) {
      usleep(100000);
      RANK_CHECK(ncclCommAbort(comm) == ncclSuccess, "abort");
      return 0;
    }
    ncclResult_t r = ncclAllReduce(data, data, 16, ncclFloat32, ncclSum, comm, nullptr);
    RANK_CHECK(r == ncclRemoteError, "all-reduce after an abort gave %d", r);
    RANK_CHECK(std::string(ncclGetLastError(nullptr)).find("rank 1 aborted") != std::string::npos, "%s",
               ncclGetLastError(nullptr));
    return 0;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclLifecycleTest, AnAbortFromAnotherThreadReleasesACollectiveBlockedOnTheCommunicator) {
  // torch's watchdog aborts a communicator whose collective hangs; the blocked call must return.
  auto statuses = run_ranks(2, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = join(rank, 2, id);
    void* data = nullptr;
    cudaMalloc(&data, mib);
    if (rank == 1) {
      usleep(1500000);  // alive, but never joins the collective
      return 0;
    }
    std::thread watchdog([comm] {
      usleep(100000);
      ncclCommAbort(comm);
    });
    auto start = std::chrono::steady_clock::now();
    ncclResult_t r = ncclAllReduce(data, data, 16, ncclFloat32, ncclSum, comm, nullptr);
    double waited_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    watchdog.join();
    RANK_CHECK(r == ncclRemoteError, "the blocked all-reduce gave %d", r);
    RANK_CHECK(waited_s < 1.0, "returned after %.2f s", waited_s);
    return 0;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclLifecycleTest, AnEventRecordedAfterACollectiveCompletesWithIt) {
  setenv("SIMCUDA_GPU", "count:2,quiet:1,events:sync", 1);
  auto statuses = run_ranks(2, [&](int rank, const ncclUniqueId& id) {
    ncclComm_t comm = join(rank, 2, id);
    cudaStream_t stream = nullptr;
    cudaStreamCreate(&stream);
    cudaEvent_t done = nullptr;
    cudaEventCreate(&done);
    int* data = nullptr;
    cudaMalloc(reinterpret_cast<void**>(&data), 64);
    int value = rank + 5;
    cudaMemcpy(data, &value, sizeof value, cudaMemcpyHostToDevice);
    RANK_CHECK(ncclAllReduce(data, data, 1, ncclInt32, ncclSum, comm, stream) == ncclSuccess, "all-reduce");
    cudaEventRecord(done, stream);
    RANK_CHECK(cudaEventQuery(done) == cudaErrorNotReady, "events:sync: not complete before a synchronize");
    RANK_CHECK(cudaEventSynchronize(done) == cudaSuccess, "synchronize");
    int got = 0;
    cudaMemcpy(&got, data, sizeof got, cudaMemcpyDeviceToHost);
    RANK_CHECK(got == 11, "sum %d", got);
    return ncclCommDestroy(comm) == ncclSuccess ? 0 : 1;
  });
  EXPECT_TRUE(all_succeeded(statuses));
}

TEST_F(NcclLifecycleTest, ANewNcclPeakIsInTheBooksFileOfARankKilledWithoutExitHandlers) {
  // Ray ends a job's workers with SIGKILL: the books file (SIMCUDA_BOOKS) is written whenever NCCL's
  // peak grows, so a tool still learns each rank's NCCL buffers.
  setenv("NCCL_BUFFSIZE", "3145728", 1);
  setenv("NCCL_MAX_NCHANNELS", "2", 1);
  const std::size_t ring = 2 * rounded(3 * mib + 8 * 512 * 8 * 16 + 120 * 640 * 8 * 8);
  char folder[] = "/tmp/simcuda-books-XXXXXX";
  ASSERT_NE(mkdtemp(folder), nullptr);
  setenv("SIMCUDA_BOOKS", (std::string(folder) + "/books.%p.json").c_str(), 1);
  auto statuses = run_ranks(2, [&](int rank, const ncclUniqueId& id) {
    void* data = nullptr;
    RANK_CHECK(cudaSetDevice(rank) == cudaSuccess && cudaMalloc(&data, 4 * mib) == cudaSuccess, "cudaMalloc");
    ncclComm_t comm = join(rank, 2, id);
    RANK_CHECK(ncclAllReduce(data, data, 1024, ncclFloat32, ncclSum, comm, nullptr) == ncclSuccess, "all-reduce");
    raise(SIGKILL);
    return 1;
  });
  unsetenv("SIMCUDA_BOOKS");
  ASSERT_EQ(statuses.size(), 2u);
  for (int status : statuses) EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  std::vector<std::string> books;
  for (const auto& entry : std::filesystem::directory_iterator(folder)) {
    std::ifstream in(entry.path());
    books.emplace_back((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  std::filesystem::remove_all(folder);
  ASSERT_EQ(books.size(), 2u);  // one per rank, and no partial file left
  const std::string peak = "\"peak_nccl_bytes\": " + std::to_string(ring) + ",";
  for (const std::string& b : books) EXPECT_NE(b.find(peak), std::string::npos) << b;
}

}  // namespace
