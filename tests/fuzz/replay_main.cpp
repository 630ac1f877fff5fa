// Replays a fuzz target's committed corpus without libFuzzer: linked with one <target>_fuzz.cpp
// (its LLVMFuzzerTestOneInput) in every build, so that `make test` feeds each reader every input
// the fuzzing campaigns kept (tests/CMakeLists.txt: the fuzz_replay_<target> tests). A reader that
// crashes, aborts or throws anything but a mixprec::Error on one of them fails the test.
//
// Usage: <target>_replay PATH...   (a file, or a directory whose regular files are read in name
// order). Prints the number of inputs replayed; exits 1 when a path is missing or holds no input.
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

namespace fs = std::filesystem;

std::vector<fs::path> inputs_of(const fs::path& path) {
  std::error_code ec;
  if (!fs::is_directory(path, ec)) return {path};
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(path, ec)) {
    if (entry.is_regular_file(ec)) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PATH...\n", argv[0]);
    return 2;
  }
  std::size_t replayed = 0;
  for (int i = 1; i < argc; ++i) {
    const fs::path path = argv[i];
    std::error_code ec;
    if (!fs::exists(path, ec)) {
      std::fprintf(stderr, "%s: no such file or directory\n", path.c_str());
      return 1;
    }
    for (const fs::path& file : inputs_of(path)) {
      std::ifstream in(file, std::ios::binary);
      if (!in) {
        std::fprintf(stderr, "%s: cannot be read\n", file.c_str());
        return 1;
      }
      const std::vector<char> bytes{std::istreambuf_iterator<char>(in),
                                    std::istreambuf_iterator<char>()};
      // One line before each input, so that a crash names the input that caused it.
      std::fprintf(stderr, "replaying %s (%zu bytes)\n", file.c_str(), bytes.size());
      LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(bytes.data()), bytes.size());
      ++replayed;
    }
  }
  // The scratch directory of the targets that read from a path (fuzz_file.h), if one was made.
  std::error_code ignored;
  fs::remove_all(fs::temp_directory_path(ignored) / ("mixprec-fuzz-" + std::to_string(::getpid())),
                 ignored);
  std::printf("%zu inputs replayed\n", replayed);
  if (replayed == 0) {
    std::fprintf(stderr, "no input found in the paths given\n");
    return 1;
  }
  return 0;
}
