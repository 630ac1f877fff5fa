// main() of the distributed tests: joins the process group (a group of one without a launcher),
// then runs the tests on every rank. Each test is collective: every rank runs the same tests in the
// same order. Rank 0 prints GoogleTest's usual output; the other ranks print only their failures,
// prefixed with their rank, so that a failure on rank 1 alone is visible (and mpirun's exit status
// is non-zero when any rank fails).
#include <gtest/gtest.h>

#include <iostream>

#include "mixprec/distributed/distributed.h"

namespace {

class FailurePrinter : public testing::EmptyTestEventListener {
 public:
  explicit FailurePrinter(int rank) : rank_(rank) {}
  void OnTestPartResult(const testing::TestPartResult& result) override {
    if (!result.failed()) return;
    std::cout << "[rank " << rank_ << "] " << (result.file_name() ? result.file_name() : "?") << ":"
              << result.line_number() << ": " << result.summary() << std::endl;
  }
  void OnTestEnd(const testing::TestInfo& info) override {
    if (info.result()->Failed()) {
      std::cout << "[rank " << rank_ << "] FAILED " << info.test_suite_name() << "." << info.name()
                << std::endl;
    }
  }

 private:
  int rank_;
};

}  // namespace

int main(int argc, char** argv) {
  testing::InitGoogleTest(&argc, argv);
  mixprec::distributed::initialize();
  const int rank = mixprec::distributed::rank();
  if (rank != 0) {
    testing::TestEventListeners& listeners = testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    listeners.Append(new FailurePrinter(rank));
  }
  return RUN_ALL_TESTS();
}
