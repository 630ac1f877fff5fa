// Plain text for language models: a text file, or a directory of fortune databases (the Debian
// package `fortunes`: /usr/share/games/fortunes, about 2.5 MB of English quotations), read into
// documents that a tokenizer (mixprec/data/tokenizer.h) turns into tokens.
//
//   std::vector<std::string> docs = mp::data::read_text_documents(mp::data::kFortunesDir);
//   mp::data::ByteTokenizer bytes;
//   std::vector<std::int32_t> ids = mp::data::encode_documents(bytes, docs);  // EOT after each
//
// A fortune database is plain text whose entries are separated by lines holding only "%"; strfile
// writes a binary index NAME.dat next to it, and Debian adds NAME.u8 links to the same file. In a
// directory, every regular file is read as a database, in the order of the file names, except:
// names ending in ".dat" (the indexes), hidden names (starting with '.'), symbolic links (the .u8
// aliases; a database reached through a link would be read twice) and subdirectories (Debian's
// fortunes-off installs its databases under off/: not read). Each entry becomes one document
// without its trailing line breaks; entries of only whitespace are dropped.
//
// A file given directly is one document, its bytes unchanged (no '%' splitting, no decoding: any
// bytes are accepted). The total size read is bounded (TextCorpusOptions::max_bytes) and checked
// from the file sizes before reading; errors are DataErrors naming the file.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "mixprec/data/idx.h"  // DataError

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::data {

// Where the Debian package `fortunes` installs its databases.
inline constexpr const char* kFortunesDir = "/usr/share/games/fortunes";
// 256 MiB of text: far above the fortunes (2.5 MB), small enough to hold in memory.
inline constexpr std::int64_t kTextCorpusDefaultMaxBytes = std::int64_t{256} << 20;

struct TextCorpusOptions {
  // Refuse to read more than this many bytes in all (the sum of the file sizes). > 0.
  std::int64_t max_bytes = kTextCorpusDefaultMaxBytes;
};

// The entries of one fortune database's text: split at lines that hold only "%" (a "%\r" line
// too), each without its trailing line breaks, entries of only whitespace dropped.
std::vector<std::string> split_fortune_entries(std::string_view text);

// `path` a regular file: one document, its bytes. `path` a directory: the entries of its fortune
// databases (see above), database by database in file-name order. DataError for a path that does
// not exist or is neither a file nor a directory, a file that cannot be read, an empty file, a
// directory without databases or without a non-empty entry, or a total above options.max_bytes
// (ValueError for max_bytes <= 0).
std::vector<std::string> read_text_documents(const std::string& path,
                                             TextCorpusOptions options = {});

// read_text_documents joined into one string with `separator` between documents (none after
// the last).
std::string read_text_corpus(const std::string& path, std::string_view separator = "\n\n",
                             TextCorpusOptions options = {});

}  // namespace mixprec::data

#pragma GCC visibility pop
