// Writes the sample event file that tests/tools/read_tfevents.py checks (its check_sample):
//   tfevents_sample DIR
// loss at steps 0..4 = 1/(step+1); "naïve/μ" = -3.5 at step 2^40; "zero" = 0 at step -7; and a
// histogram "weights" at step 3 of {-1, -0.5, 0, 0.25, 0.5, 1, 2, NaN} (the NaN is left out).
#include <cmath>
#include <cstdio>
#include <exception>
#include <vector>

#include "mixprec/io/summary_writer.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: tfevents_sample DIR\n");
    return 2;
  }
  try {
    mixprec::io::SummaryWriter writer{std::filesystem::path(argv[1])};
    for (int step = 0; step < 5; ++step) writer.scalar("loss", step, 1.0 / (step + 1));
    writer.scalar("na\xc3\xafve/\xce\xbc", std::int64_t{1} << 40, -3.5);
    writer.scalar("zero", -7, 0.0);
    writer.histogram("weights", 3,
                     std::vector<float>{-1.0f, -0.5f, 0.0f, 0.25f, 0.5f, 1.0f, 2.0f, NAN});
    writer.close();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
