// The host allocator's peak trace (core/peak_trace.h): which blocks were live at the peak, and the
// file MIXPREC_PEAK_TRACE writes (its writer is exercised here through the same records).
#include "core/peak_trace.h"

#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/temp_dir.h"

namespace mixprec {
namespace {

struct TraceGuard {
  TraceGuard() { core::set_peak_trace(true); }
  ~TraceGuard() { core::set_peak_trace(false); }
};

TEST(PeakTraceTest, RecordsTheBlocksLiveAtThePeak) {
  std::optional<Tensor> early = zeros({1000}, {.dtype = kFloat32});  // before tracing: not seen
  std::vector<std::size_t> sizes;
  {
    TraceGuard guard;
    std::optional<Tensor> a = zeros({4000}, {.dtype = kFloat32});  // 16000 bytes
    std::optional<Tensor> b = zeros({1000}, {.dtype = kFloat16});  // 2000 bytes
    a.reset();                                                     // peak: a and b, 18000
    early.reset();                                                 // untraced: ignored
    std::optional<Tensor> c = zeros({2000}, {.dtype = kFloat32});  // 10000 live, below the peak
    sizes = core::peak_trace_block_sizes();
  }
  EXPECT_EQ(sizes, (std::vector<std::size_t>{16000, 2000}));
  EXPECT_FALSE(core::peak_trace_enabled());
}

TEST(PeakTraceTest, ANewPeakReplacesTheSnapshotAndStartingAgainClearsIt) {
  TraceGuard guard;
  {
    std::optional<Tensor> a = zeros({100}, {.dtype = kFloat32});
    std::optional<Tensor> b = zeros({300}, {.dtype = kFloat32});
    a.reset();
    std::optional<Tensor> c = zeros({400}, {.dtype = kFloat32});  // 1200 + 1600 > 400 + 1200
    EXPECT_EQ(core::peak_trace_block_sizes(), (std::vector<std::size_t>{1600, 1200}));
  }
  core::set_peak_trace(true);
  EXPECT_TRUE(core::peak_trace_block_sizes().empty());
}

TEST(PeakTraceTest, WritesOneLinePerBlockWithItsSizeAndFrames) {
  testing::TempDir dir;
  const std::string path = (dir.path() / "peak.txt").string();
  {
    TraceGuard guard;
    const Tensor a = zeros({250}, {.dtype = kFloat32});
    ASSERT_TRUE(core::write_peak_trace(path.c_str()));
  }
  std::ifstream in(path);
  std::string header, line;
  std::getline(in, header);
  EXPECT_EQ(header, "# peak 1000 bytes in 1 blocks");
  std::getline(in, line);
  EXPECT_EQ(line.rfind("1000 ", 0), 0u) << line;
  EXPECT_NE(line.find("+0x"), std::string::npos) << line;  // at least one frame
  EXPECT_FALSE(std::getline(in, line));
  EXPECT_FALSE(core::write_peak_trace((dir.path() / "missing" / "peak.txt").string().c_str()));
}

}  // namespace
}  // namespace mixprec
