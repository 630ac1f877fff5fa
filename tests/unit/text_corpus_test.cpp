// Text corpora: fortune entries split by hand-written databases, the directory rules (indexes,
// links, hidden files and subdirectories skipped, file-name order), the size limit, the errors,
// and the installed Debian fortunes when present.
#include "mixprec/data/text_corpus.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "support/expect_error.h"
#include "support/temp_dir.h"

namespace mixprec::data {
namespace {

namespace fs = std::filesystem;
using testing::expect_error;
using testing::TempDir;

void write(const fs::path& p, const std::string& text) {
  std::ofstream(p, std::ios::binary) << text;
}

TEST(FortuneEntriesTest, SplitsAtPercentLines) {
  const std::vector<std::string> expected = {"One.", "Two\nlines.", "Three."};
  EXPECT_EQ(split_fortune_entries("One.\n%\nTwo\nlines.\n%\nThree.\n%\n"), expected);
  // No final "%", a "%\r" line, and empty or blank entries dropped.
  EXPECT_EQ(split_fortune_entries("%\nOne.\n%\r\n\n%\n  \n%\nTwo\nlines.\n%\nThree."), expected);
  // A '%' inside a line, or a line "%%", is text.
  const std::vector<std::string> percent = {"50% off\n%%"};
  EXPECT_EQ(split_fortune_entries("50% off\n%%\n"), percent);
  EXPECT_TRUE(split_fortune_entries("").empty());
  EXPECT_TRUE(split_fortune_entries("%\n%\n").empty());
  // Trailing blank lines go with the entry's last line break; leading ones stay.
  const std::vector<std::string> blank = {"\nText.", "More."};
  EXPECT_EQ(split_fortune_entries("\nText.\n\n\r\n%\nMore.\n"), blank);
}

TEST(TextCorpusTest, ReadsADirectoryOfFortuneDatabasesInNameOrder) {
  TempDir dir;
  write(dir.path() / "b_db", "Bee one.\n%\nBee two.\n");
  write(dir.path() / "a_db", "Ay.\n%\n");
  write(dir.path() / "a_db.dat", std::string("\0\0\0\2binary index", 16));
  write(dir.path() / ".hidden", "Hidden.\n");
  fs::create_directory(dir.path() / "off");
  write(dir.path() / "off" / "c_db", "Offensive.\n");
  fs::create_symlink(dir.path() / "a_db", dir.path() / "a_db.u8");
  const std::vector<std::string> expected = {"Ay.", "Bee one.", "Bee two."};
  EXPECT_EQ(read_text_documents(dir.str()), expected);
  EXPECT_EQ(read_text_corpus(dir.str()), "Ay.\n\nBee one.\n\nBee two.");
  EXPECT_EQ(read_text_corpus(dir.str(), "<|endoftext|>"),
            "Ay.<|endoftext|>Bee one.<|endoftext|>Bee two.");
}

TEST(TextCorpusTest, AFileIsOneDocumentWithItsBytesUnchanged) {
  TempDir dir;
  const std::string bytes("line one\n%\n\xff\x00 binary\r\n", 22);
  write(dir.path() / "text.txt", bytes);
  const std::vector<std::string> docs = read_text_documents(dir.file("text.txt"));
  ASSERT_EQ(docs.size(), 1u);
  EXPECT_EQ(docs[0], bytes);
}

TEST(TextCorpusTest, RefusesMoreThanTheLimitBeforeReading) {
  TempDir dir;
  write(dir.path() / "a", "12345\n%\n");  // 8 bytes
  write(dir.path() / "b", "67890\n%\n");  // 8 bytes
  EXPECT_EQ(read_text_documents(dir.str(), {.max_bytes = 16}).size(), 2u);
  expect_error<DataError>([&] { read_text_documents(dir.str(), {.max_bytes = 15}); },
                          {"'" + dir.file("b") + "'", "limit of 15 bytes", "8 read before"});
  expect_error<DataError>([&] { read_text_documents(dir.file("a"), {.max_bytes = 7}); },
                          {dir.file("a"), "limit of 7 bytes"});
  expect_error<ValueError>([&] { read_text_documents(dir.str(), {.max_bytes = 0}); },
                           {"max_bytes must be positive"});
}

TEST(TextCorpusTest, ErrorsNameThePath) {
  TempDir dir;
  expect_error<DataError>([&] { read_text_documents(dir.file("missing")); },
                          {dir.file("missing"), "does not exist", "apt-get install fortunes"});
  expect_error<DataError>([&] { read_text_documents(dir.str()); },
                          {dir.str(), "no fortune database"});
  write(dir.path() / "only.dat", "index");
  expect_error<DataError>([&] { read_text_documents(dir.str()); }, {"no fortune database"});
  write(dir.path() / "blank", "\n%\n   \n%\n");
  expect_error<DataError>([&] { read_text_documents(dir.str()); },
                          {"1 fortune database(s)", dir.str(), "no entry with text"});
  write(dir.path() / "empty.txt", "");
  expect_error<DataError>([&] { read_text_documents(dir.file("empty.txt")); },
                          {dir.file("empty.txt"), "is empty"});
}

// The Debian package scripts/install-deps.sh installs: about 2.5 MB in ~40 databases.
TEST(TextCorpusTest, ReadsTheInstalledFortunes) {
  if (!fs::exists(fs::path(kFortunesDir) / "fortunes")) {
    GTEST_SKIP() << "the Debian package fortunes is not installed (scripts/install-deps.sh)";
  }
  const std::vector<std::string> docs = read_text_documents(kFortunesDir);
  std::size_t bytes = 0;
  for (const std::string& d : docs) {
    EXPECT_FALSE(d.empty());
    EXPECT_NE(d.back(), '\n');
    bytes += d.size();
  }
  EXPECT_GT(docs.size(), 5000u);
  EXPECT_GT(bytes, std::size_t{1} << 20);
  EXPECT_LT(bytes, std::size_t{16} << 20);
}

}  // namespace
}  // namespace mixprec::data
