// Text corpora: a file as one document, or a directory of fortune databases split into entries.
// Sizes are checked against the budget from the directory listing before any file is read.
#include "mixprec/data/text_corpus.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <system_error>
#include <vector>

#include "mixprec/error.h"

namespace mixprec::data {

namespace {

namespace fs = std::filesystem;

bool only_whitespace(std::string_view s) {
  return std::all_of(s.begin(), s.end(), [](char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
  });
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

std::string limit_hint() {
  return "pass a smaller file or directory, or raise TextCorpusOptions::max_bytes";
}

// Adds `bytes` of `file` to `total`, refusing to pass the budget.
void charge(std::int64_t& total, std::uintmax_t bytes, const fs::path& file, std::int64_t max) {
  if (bytes > static_cast<std::uintmax_t>(max - total)) {
    throw DataError("text corpus: reading '" + file.string() + "' (" + std::to_string(bytes) +
                    " bytes) would bring the text read to more than the limit of " +
                    std::to_string(max) + " bytes (" + std::to_string(total) +
                    " read before it); " + limit_hint());
  }
  total += static_cast<std::int64_t>(bytes);
}

// The whole file; `expected` is the size the listing reported (a file that grew since is cut
// there, so the budget holds).
std::string read_file(const fs::path& file, std::uintmax_t expected) {
  std::ifstream in(file, std::ios::binary);
  if (!in) {
    throw DataError("text corpus: cannot open '" + file.string() + "': " + std::strerror(errno) +
                    "; check the path and its permissions");
  }
  std::string text(static_cast<std::size_t>(expected), '\0');
  in.read(text.data(), static_cast<std::streamsize>(expected));
  if (in.bad()) {
    throw DataError("text corpus: reading '" + file.string() + "' failed: " + std::strerror(errno));
  }
  text.resize(static_cast<std::size_t>(in.gcount()));  // a file that shrank: what is there
  return text;
}

std::uintmax_t file_size_of(const fs::path& file) {
  std::error_code ec;
  const std::uintmax_t size = fs::file_size(file, ec);
  if (ec) {
    throw DataError("text corpus: cannot read the size of '" + file.string() +
                    "': " + ec.message());
  }
  return size;
}

// The databases of a fortune directory, sorted by name (see text_corpus.h for what is skipped).
std::vector<fs::path> fortune_databases(const fs::path& dir) {
  std::error_code ec;
  fs::directory_iterator it(dir, ec);
  if (ec) {
    throw DataError("text corpus: cannot list the directory '" + dir.string() +
                    "': " + ec.message());
  }
  std::vector<fs::path> files;
  for (const fs::directory_entry& entry : it) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name[0] == '.' || ends_with(name, ".dat")) continue;
    if (entry.is_symlink(ec) || !entry.is_regular_file(ec)) continue;
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

}  // namespace

std::vector<std::string> split_fortune_entries(std::string_view text) {
  std::vector<std::string> entries;
  std::string_view::size_type start = 0;  // of the current entry
  std::string_view::size_type line = 0;   // of the current line
  auto close_entry = [&](std::string_view::size_type end) {
    std::string_view entry = text.substr(start, end - start);
    while (!entry.empty() && (entry.back() == '\n' || entry.back() == '\r')) entry.remove_suffix(1);
    if (!only_whitespace(entry)) entries.emplace_back(entry);
  };
  while (line < text.size()) {
    const auto newline = text.find('\n', line);
    const auto line_end = newline == std::string_view::npos ? text.size() : newline;
    const std::string_view content = text.substr(line, line_end - line);
    const auto next = newline == std::string_view::npos ? text.size() : newline + 1;
    if (content == "%" || content == "%\r") {
      close_entry(line);
      start = next;
    }
    line = next;
  }
  if (start < text.size()) close_entry(text.size());
  return entries;
}

std::vector<std::string> read_text_documents(const std::string& path, TextCorpusOptions options) {
  if (options.max_bytes <= 0) {
    throw ValueError("read_text_documents: max_bytes must be positive, got " +
                     std::to_string(options.max_bytes));
  }
  const fs::path p(path);
  std::error_code ec;
  const fs::file_status status = fs::status(p, ec);
  if (ec || !fs::exists(status)) {
    throw DataError("text corpus: '" + path +
                    "' does not exist; give a text file or a directory of fortune databases "
                    "(apt-get install fortunes puts them in " +
                    std::string(kFortunesDir) + ")");
  }
  std::int64_t total = 0;
  if (fs::is_regular_file(status)) {
    const std::uintmax_t size = file_size_of(p);
    charge(total, size, p, options.max_bytes);
    std::string text = read_file(p, size);
    if (text.empty()) {
      throw DataError("text corpus: the file '" + path + "' is empty; give a file with text");
    }
    return {std::move(text)};
  }
  if (!fs::is_directory(status)) {
    throw DataError("text corpus: '" + path +
                    "' is neither a regular file nor a directory; give a text file or a "
                    "directory of fortune databases");
  }
  const std::vector<fs::path> files = fortune_databases(p);
  if (files.empty()) {
    throw DataError("text corpus: the directory '" + path +
                    "' holds no fortune database (regular files other than *.dat and hidden "
                    "ones); give a text file or a directory such as " +
                    std::string(kFortunesDir));
  }
  // Every size first: an over-budget directory is refused before anything is read.
  std::vector<std::uintmax_t> sizes;
  for (const fs::path& f : files) {
    sizes.push_back(file_size_of(f));
    charge(total, sizes.back(), f, options.max_bytes);
  }
  std::vector<std::string> documents;
  for (std::size_t i = 0; i < files.size(); ++i) {
    std::vector<std::string> entries = split_fortune_entries(read_file(files[i], sizes[i]));
    for (std::string& e : entries) documents.push_back(std::move(e));
  }
  if (documents.empty()) {
    throw DataError("text corpus: the " + std::to_string(files.size()) +
                    " fortune database(s) in '" + path +
                    "' hold no entry with text (entries are separated by lines holding only "
                    "'%')");
  }
  return documents;
}

std::string read_text_corpus(const std::string& path, std::string_view separator,
                             TextCorpusOptions options) {
  const std::vector<std::string> documents = read_text_documents(path, options);
  std::string out;
  for (std::size_t i = 0; i < documents.size(); ++i) {
    if (i > 0) out += separator;
    out += documents[i];
  }
  return out;
}

}  // namespace mixprec::data
