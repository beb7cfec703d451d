// cuda_vmm_device's same-address offload on a GPU, or on simcuda (ctest's cuda_vmm_offload_on_simcuda):
// the bytes a range held come back bit-exact at the same addresses, the addresses work while the
// range is on the host, only live bytes are copied, device memory is given back and taken again,
// and a restore that finds the device full keeps the bytes on the host until it can succeed.
// PHASEALLOC_EXPECT_OFFLOAD=unmapping runs them on a driver that cannot map host memory at device
// addresses (ctest's cuda_vmm_offload_unmapping_on_simcuda: simcuda's host_vmm:0): the same moves,
// the range unmapped in between, so an access there is an error instead of the bytes.
// Without a GPU or the simulator every test skips and says why (label: gpu).
#include <cuda_runtime_api.h>
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "phasealloc/devices/cuda_vmm_device.hpp"
#include "simcuda/introspect.h"

namespace phasealloc {
namespace {

std::vector<std::uint8_t> random_bytes(std::size_t n, unsigned seed) {
  std::mt19937 gen(seed);
  std::vector<std::uint8_t> out(n);
  for (auto& b : out) b = static_cast<std::uint8_t>(gen());
  return out;
}

void write(device_address at, const std::vector<std::uint8_t>& bytes) {
  ASSERT_EQ(cudaMemcpy(reinterpret_cast<void*>(at), bytes.data(), bytes.size(), cudaMemcpyHostToDevice), cudaSuccess);
}

std::vector<std::uint8_t> read(device_address at, std::size_t n) {
  std::vector<std::uint8_t> out(n);
  EXPECT_EQ(cudaMemcpy(out.data(), reinterpret_cast<const void*>(at), n, cudaMemcpyDeviceToHost), cudaSuccess);
  return out;
}

/// Whether a copy from `at` fails (an unmapped range: simcuda answers an error, a GPU would fault).
bool read_fails(device_address at, std::size_t n) {
  std::vector<std::uint8_t> out(n);
  const cudaError_t e = cudaMemcpy(out.data(), reinterpret_cast<const void*>(at), n, cudaMemcpyDeviceToHost);
  (void)cudaGetLastError();
  return e != cudaSuccess;
}

/// Whether the test runs on a driver without host-backed mappings (PHASEALLOC_EXPECT_OFFLOAD=unmapping).
bool expect_unmapping() {
  const char* v = std::getenv("PHASEALLOC_EXPECT_OFFLOAD");
  return v != nullptr && std::string(v) == "unmapping";
}

class CudaVmmOffload : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto made = cuda_vmm_device::create(0, {}, &why);
    if (!made) {
      if (std::getenv("PHASEALLOC_CONFORMANCE_REQUIRE_DEVICE") != nullptr) FAIL() << "no cuda_vmm device: " << why;
      GTEST_SKIP() << "real GPU only: " << why;
    }
    dev_ = std::move(made).value();
    unmapping_ = expect_unmapping();
    if (unmapping_) {
      ASSERT_FALSE(dev_->caps().has_host_backing) << "PHASEALLOC_EXPECT_OFFLOAD=unmapping on a host-backing driver";
      ASSERT_TRUE(dev_->caps().offload_unmaps) << "the driver has no page-locked host memory either";
    } else if (!dev_->caps().has_host_backing) {
      if (std::getenv("PHASEALLOC_CONFORMANCE_REQUIRE_DEVICE") != nullptr) FAIL() << "the device has no host backing";
      GTEST_SKIP() << "real GPU only: this driver cannot back device addresses with host memory";
    }
    page_ = dev_->caps().granularity_bytes;
  }

  /// The bytes of an offloaded range: host-backed, they read back as `expected`; unmapped, a read fails.
  void expect_offloaded_reads(device_address at, const std::vector<std::uint8_t>& expected) {
    if (unmapping_) {
      EXPECT_TRUE(read_fails(at, expected.size())) << "an unmapping offload left [" << at << ", +" << expected.size()
                                                   << ") readable";
    } else {
      EXPECT_EQ(read(at, expected.size()), expected);
    }
  }

  /// A reservation of `pages` pages, mapped.
  device_address mapped(std::size_t pages) {
    const device_address base = dev_->reserve(pages * page_).value();
    EXPECT_EQ(dev_->map(base, pages * page_), errc::ok);
    return base;
  }

  std::size_t free_now() {
    std::size_t free = 0, total = 0;
    EXPECT_EQ(cudaMemGetInfo(&free, &total), cudaSuccess);
    return free;
  }

  std::unique_ptr<cuda_vmm_device> dev_;
  std::size_t page_ = 0;
  bool unmapping_ = false;
};

TEST_F(CudaVmmOffload, LiveBytesComeBackBitExactAtTheSameAddresses) {
  const std::size_t pages = 4;
  const device_address base = mapped(pages);
  const std::size_t bytes = pages * page_;
  const auto contents = random_bytes(bytes, 7);
  write(base, contents);
  // Three blocks: a small one at the start, one across a page boundary, one at the very end.
  const std::vector<byte_range> live{{base, 512}, {base + page_ - 4096, 2 * 4096 + 17}, {base + bytes - 1000, 1000}};
  const std::size_t free_before = free_now();

  ASSERT_EQ(dev_->offload(base, bytes, live, {}), errc::ok) << dev_->last_failure();
  EXPECT_EQ(dev_->host_backed_bytes(), bytes);
  EXPECT_EQ(dev_->mapped_bytes(), 0u);
  EXPECT_EQ(free_now(), free_before + bytes);  // the device pages went back to the driver
  EXPECT_EQ(dev_->moved().to_host, 512u + 2 * 4096 + 17 + 1000);  // live bytes only
  for (const byte_range& r : live) {  // the addresses still work: the bytes are read over the link
    const auto at = contents.begin() + static_cast<std::ptrdiff_t>(r.addr - base);
    expect_offloaded_reads(r.addr, std::vector<std::uint8_t>(at, at + static_cast<std::ptrdiff_t>(r.bytes)));
  }

  ASSERT_EQ(dev_->restore(base, bytes, live, {}), errc::ok) << dev_->last_failure();
  EXPECT_EQ(dev_->host_backed_bytes(), 0u);
  EXPECT_EQ(dev_->mapped_bytes(), bytes);
  EXPECT_EQ(dev_->moved().to_device, dev_->moved().to_host);
  for (const byte_range& r : live) {
    const auto got = read(r.addr, r.bytes);
    EXPECT_TRUE(std::equal(got.begin(), got.end(), contents.begin() + static_cast<std::ptrdiff_t>(r.addr - base)));
  }
  EXPECT_EQ(dev_->unmap(base, bytes), errc::ok);
  EXPECT_EQ(dev_->release(base, bytes), errc::ok);
}

TEST_F(CudaVmmOffload, AMoveInTwoStepsHoldsItsDevicePagesUntilItFinishes) {
  const std::size_t pages = 3;
  const device_address base = mapped(pages);
  const std::size_t bytes = pages * page_;
  const auto contents = random_bytes(bytes, 21);
  write(base, contents);
  const std::vector<byte_range> live{{base, bytes - 100}};

  // Offload: in flight the device pages are still mapped and nothing is host-backed.
  ASSERT_EQ(dev_->offload_start(base, bytes, live, {}), errc::ok) << dev_->last_failure();
  EXPECT_EQ(dev_->moves_in_flight(), 1u);
  EXPECT_EQ(dev_->mapped_bytes(), bytes);
  EXPECT_EQ(dev_->host_backed_bytes(), 0u);
  EXPECT_EQ(dev_->unmap(base, bytes), errc::invalid_argument);  // not under a move in flight
  EXPECT_EQ(dev_->offload_start(base, bytes, live, {}), errc::invalid_argument);
  ASSERT_EQ(dev_->finish_move(base, {}), errc::ok) << dev_->last_failure();
  EXPECT_EQ(dev_->moves_in_flight(), 0u);
  EXPECT_EQ(dev_->mapped_bytes(), 0u);
  EXPECT_EQ(dev_->host_backed_bytes(), bytes);
  EXPECT_EQ(dev_->moved().to_host, bytes - 100);
  EXPECT_EQ(dev_->finish_move(base, {}), errc::ok);  // nothing in flight: nothing to do
  EXPECT_TRUE(dev_->move_done(base).value());

  // Restore: the device pages are mapped at the start; the host memory stays until the finish.
  ASSERT_EQ(dev_->restore_start(base, bytes, live, {}), errc::ok) << dev_->last_failure();
  EXPECT_EQ(dev_->mapped_bytes(), bytes);
  EXPECT_EQ(dev_->host_backed_bytes(), bytes);
  EXPECT_EQ(dev_->moved().to_device, 0u);
  cudaStream_t reader = nullptr;
  ASSERT_EQ(cudaStreamCreate(&reader), cudaSuccess);
  EXPECT_EQ(dev_->order_after_move(base, reinterpret_cast<stream_id>(reader)), errc::ok) << dev_->last_failure();
  ASSERT_EQ(dev_->finish_move(base, {}), errc::ok) << dev_->last_failure();
  EXPECT_EQ(dev_->host_backed_bytes(), 0u);
  EXPECT_EQ(dev_->moved().to_device, bytes - 100);
  const auto got = read(base, bytes - 100);
  EXPECT_TRUE(std::equal(got.begin(), got.end(), contents.begin()));
  EXPECT_EQ(cudaStreamDestroy(reader), cudaSuccess);
  EXPECT_EQ(dev_->unmap(base, bytes), errc::ok);
  EXPECT_EQ(dev_->release(base, bytes), errc::ok);
}

TEST_F(CudaVmmOffload, WritesWhileOffloadedAreKeptByTheRestore) {
  const device_address base = mapped(2);
  const std::size_t bytes = 2 * page_;
  write(base, random_bytes(bytes, 1));
  const std::vector<byte_range> live{{base, bytes}};
  ASSERT_EQ(dev_->offload(base, bytes, live, {}), errc::ok) << dev_->last_failure();
  const auto later = random_bytes(bytes, 2);
  if (unmapping_) {  // unmapped: the write is refused, and the restore brings the bytes offloaded
    EXPECT_NE(cudaMemcpy(reinterpret_cast<void*>(base), later.data(), bytes, cudaMemcpyHostToDevice), cudaSuccess);
    (void)cudaGetLastError();
    ASSERT_EQ(dev_->restore(base, bytes, live, {}), errc::ok) << dev_->last_failure();
    EXPECT_EQ(read(base, bytes), random_bytes(bytes, 1));
    EXPECT_EQ(dev_->unmap(base, bytes), errc::ok);
    EXPECT_EQ(dev_->release(base, bytes), errc::ok);
    return;
  }
  write(base, later);  // a kernel or copy touching the offloaded range: slow, never a fault
  ASSERT_EQ(dev_->restore(base, bytes, live, {}), errc::ok) << dev_->last_failure();
  EXPECT_EQ(read(base, bytes), later);
  EXPECT_EQ(dev_->unmap(base, bytes), errc::ok);
  EXPECT_EQ(dev_->release(base, bytes), errc::ok);
}

TEST_F(CudaVmmOffload, ARestoreOnAFullDeviceKeepsTheBytesAndSucceedsLater) {
  const device_address base = mapped(2);
  const std::size_t bytes = 2 * page_;
  const auto contents = random_bytes(bytes, 3);
  write(base, contents);
  const std::vector<byte_range> live{{base, bytes}};
  ASSERT_EQ(dev_->offload(base, bytes, live, {}), errc::ok) << dev_->last_failure();
  // Fill the device with pages of another reservation until it refuses.
  const std::size_t filler_bytes = (dev_->caps().capacity_bytes / page_ + 1) * page_;
  const device_address filler = dev_->reserve(filler_bytes).value();
  std::size_t filled = 0;
  while (filled < filler_bytes && dev_->map(filler + filled, page_) == errc::ok) filled += page_;
  ASSERT_LT(filled, filler_bytes);

  EXPECT_EQ(dev_->restore(base, bytes, live, {}), errc::out_of_memory);
  EXPECT_EQ(dev_->host_backed_bytes(), bytes);
  expect_offloaded_reads(base, contents);  // still there, on the host, at its addresses (or unmapped)

  ASSERT_EQ(dev_->unmap(filler, filled), errc::ok);
  ASSERT_EQ(dev_->restore(base, bytes, live, {}), errc::ok) << dev_->last_failure();
  EXPECT_EQ(read(base, bytes), contents);
  EXPECT_EQ(dev_->release(filler, filler_bytes), errc::ok);
  EXPECT_EQ(dev_->unmap(base, bytes), errc::ok);
  EXPECT_EQ(dev_->release(base, bytes), errc::ok);
}

/// simcuda's bytes of the host memory an offload uses (looked up at run time), or -1 on a GPU:
/// host-located handles, or page-locked buffers when `unmapping`.
long long simulated_host_located_bytes(bool unmapping = expect_unmapping()) {
  using fn = std::size_t (*)();
  static const auto located = reinterpret_cast<fn>(dlsym(RTLD_DEFAULT, "simcuda_host_located_bytes"));
  static const auto pinned = reinterpret_cast<fn>(dlsym(RTLD_DEFAULT, "simcuda_pinned_host_bytes"));
  const fn get = unmapping ? pinned : located;
  return get != nullptr ? static_cast<long long>(get()) : -1;
}

TEST_F(CudaVmmOffload, TheHostMemoryOfOneCycleServesTheNext) {
  const device_address base = mapped(2);
  const std::size_t bytes = 2 * page_;
  const std::vector<byte_range> live{{base, bytes}};
  for (int cycle = 0; cycle < 3; ++cycle) {
    ASSERT_EQ(dev_->offload(base, bytes, live, {}), errc::ok) << dev_->last_failure();
    EXPECT_EQ(dev_->host_held_bytes(), bytes) << cycle;  // the kept handle, not a new one
    if (simulated_host_located_bytes() >= 0) {
      EXPECT_EQ(simulated_host_located_bytes(), static_cast<long long>(bytes));
    }
    ASSERT_EQ(dev_->restore(base, bytes, live, {}), errc::ok) << dev_->last_failure();
    EXPECT_EQ(dev_->host_held_bytes(), bytes) << cycle;  // kept for the next cycle
  }
  // A smaller range is served by the kept handle too.
  const device_address other = mapped(1);
  ASSERT_EQ(dev_->offload(other, page_, {}, {}), errc::ok) << dev_->last_failure();
  EXPECT_EQ(dev_->host_held_bytes(), bytes);
  EXPECT_EQ(dev_->unmap(other, page_), errc::ok);
  EXPECT_EQ(dev_->release(other, page_), errc::ok);
  EXPECT_EQ(dev_->unmap(base, bytes), errc::ok);
  EXPECT_EQ(dev_->release(base, bytes), errc::ok);
}

/// simcuda's cuMemCreate + cuMemMap + cuMemUnmap calls so far, or -1 on a GPU.
long long simulated_vmm_calls() {
  using fn = int (*)(simcuda_counters*, std::size_t);
  static const auto get = reinterpret_cast<fn>(dlsym(RTLD_DEFAULT, "simcuda_get_counters"));
  simcuda_counters c{};
  if (get == nullptr || get(&c, sizeof c) != 0) return -1;
  return static_cast<long long>(c.vmm_creates + c.vmm_maps + c.vmm_unmaps);
}

TEST_F(CudaVmmOffload, ARestoredRangeComesBackInChunksThatAreUnmappedWhole) {
  dev_.reset();
  dev_ = cuda_vmm_device::create(0, {.restore_chunk_bytes = 2 * page_}).value();
  const std::size_t pages = 5;  // chunks of 2, 2 and 1 pages
  const device_address base = mapped(pages);
  const std::size_t bytes = pages * page_;
  const auto contents = random_bytes(bytes, 11);
  write(base, contents);
  const std::vector<byte_range> live{{base, bytes}};
  ASSERT_EQ(dev_->offload(base, bytes, live, {}), errc::ok) << dev_->last_failure();
  const long long calls_before = simulated_vmm_calls();
  ASSERT_EQ(dev_->restore(base, bytes, live, {}), errc::ok) << dev_->last_failure();
  if (calls_before >= 0) {
    // 3 handles made and mapped, the host mapping and the staging one unmapped; one staging map
    // (unmapping: no host mapping, no staging).
    EXPECT_EQ(simulated_vmm_calls() - calls_before, unmapping_ ? 3 + 3 : 3 + 3 + 2 + 1);
  }
  EXPECT_EQ(read(base, bytes), contents);
  // unmap_span trims a range to the chunks it covers whole.
  const auto span = [&](std::size_t lo_page, std::size_t hi_page) {
    const byte_range r = dev_->unmap_span(base + lo_page * page_, base + hi_page * page_);
    return std::pair<std::size_t, std::size_t>((r.addr - base) / page_, r.bytes / page_);
  };
  using pages_at = std::pair<std::size_t, std::size_t>;  // (first page, pages)
  EXPECT_EQ(span(0, 5), pages_at(0, 5));
  EXPECT_EQ(span(1, 5), pages_at(2, 3));
  EXPECT_EQ(span(0, 3), pages_at(0, 2));
  EXPECT_EQ(span(1, 3).second, 0u);
  EXPECT_EQ(dev_->unmap(base + page_, 2 * page_), errc::invalid_argument);  // cuts two chunks
  EXPECT_EQ(dev_->offload(base, page_, {}, {}), errc::invalid_argument);    // cuts one
  EXPECT_EQ(dev_->mapped_bytes(), bytes);
  EXPECT_EQ(dev_->unmap(base + 2 * page_, 2 * page_), errc::ok);  // a whole chunk
  EXPECT_EQ(dev_->mapped_bytes(), 3 * page_);
  EXPECT_EQ(read(base, 2 * page_), std::vector<std::uint8_t>(contents.begin(), contents.begin() + 2 * page_));
  // A chunk offloaded again leaves whole; the rest unmapped with the reservation.
  const std::vector<byte_range> head{{base, 2 * page_}};
  ASSERT_EQ(dev_->offload(base, 2 * page_, head, {}), errc::ok) << dev_->last_failure();
  ASSERT_EQ(dev_->restore(base, 2 * page_, head, {}), errc::ok) << dev_->last_failure();
  EXPECT_EQ(read(base, 2 * page_), std::vector<std::uint8_t>(contents.begin(), contents.begin() + 2 * page_));
  EXPECT_EQ(dev_->unmap(base, 2 * page_), errc::ok);
  EXPECT_EQ(dev_->unmap(base + 4 * page_, page_), errc::ok);
  EXPECT_EQ(dev_->mapped_bytes(), 0u);
  EXPECT_EQ(dev_->release(base, bytes), errc::ok);
}

TEST_F(CudaVmmOffload, WithoutAHostCacheTheHostMemoryGoesBackAtRestore) {
  dev_.reset();
  dev_ = cuda_vmm_device::create(0, {.page_bytes = 0, .host_cache_bytes = 0}).value();
  const device_address base = mapped(2);
  const std::size_t bytes = 2 * page_;
  ASSERT_EQ(dev_->offload(base, bytes, {}, {}), errc::ok) << dev_->last_failure();
  EXPECT_EQ(dev_->host_held_bytes(), bytes);
  ASSERT_EQ(dev_->restore(base, bytes, {}, {}), errc::ok) << dev_->last_failure();
  EXPECT_EQ(dev_->host_held_bytes(), 0u);
  if (simulated_host_located_bytes() >= 0) {
    EXPECT_EQ(simulated_host_located_bytes(), 0);
  }
  EXPECT_EQ(dev_->unmap(base, bytes), errc::ok);
  EXPECT_EQ(dev_->release(base, bytes), errc::ok);
}

TEST_F(CudaVmmOffload, AnOffloadedRangeIsUnmappedWholeAndMovesOnlyMappedDevicePages) {
  const device_address base = mapped(3);
  const std::size_t bytes = 3 * page_;
  ASSERT_EQ(dev_->offload(base, 2 * page_, {}, {}), errc::ok) << dev_->last_failure();
  EXPECT_EQ(dev_->moved().to_host, 0u);  // nothing live: nothing copied
  EXPECT_EQ(dev_->offload(base, 2 * page_, {}, {}), errc::invalid_argument);        // already on the host
  EXPECT_EQ(dev_->unmap(base, page_), errc::invalid_argument);                      // part of a run
  EXPECT_EQ(dev_->map(base, page_), errc::invalid_argument);                        // it is mapped (to the host)
  EXPECT_EQ(dev_->restore(base + page_, page_, {}, {}), errc::invalid_argument);    // not a run's start
  const std::vector<byte_range> outside{{base + 2 * page_, 16}};
  EXPECT_EQ(dev_->restore(base, 2 * page_, outside, {}), errc::invalid_argument);   // live range outside
  EXPECT_EQ(dev_->release(base, bytes), errc::invalid_argument);                    // still mapped
  EXPECT_EQ(dev_->unmap(base, 2 * page_), errc::ok);                                // the host memory freed
  EXPECT_EQ(dev_->host_backed_bytes(), 0u);
  EXPECT_EQ(dev_->unmap(base + 2 * page_, page_), errc::ok);
  EXPECT_EQ(dev_->release(base, bytes), errc::ok);
}

}  // namespace
}  // namespace phasealloc
