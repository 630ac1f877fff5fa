// callbacks::CSVLogger: header and one row per epoch, append mode, and an unwritable path.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "mixprec/mixprec.h"
#include "support/temp_dir.h"
#include "support/tiny_training.h"

namespace mixprec {
namespace {

std::vector<std::string> lines_of(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(CSVLoggerTest, OneRowPerEpochWithSortedColumns) {
  testing::TempDir dir;
  const auto data = testing::blobs(32, 1);
  Model model = testing::tiny_model(2);
  model.compile({.optimizer = optimizers::SGD({.learning_rate = 0.1}), .metrics = {"accuracy"}});
  const std::string path = dir.file("log.csv");
  const History h = model.fit(data.x, data.y,
                              {.batch_size = 16,
                               .epochs = 2,
                               .verbose = Verbosity::silent,
                               .callbacks = {callbacks::CSVLogger(path)}});
  const std::vector<std::string> lines = lines_of(path);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "epoch,accuracy,epoch_seconds,learning_rate,loss,samples_per_s,step_ms");
  EXPECT_EQ(lines[1].substr(0, 2), "0,");
  EXPECT_EQ(lines[2].substr(0, 2), "1,");
  // The loss column reads back as the History value exactly.
  std::vector<std::string> cells;
  std::stringstream row(lines[2]);
  for (std::string cell; std::getline(row, cell, ',');) cells.push_back(cell);
  ASSERT_EQ(cells.size(), 7u);
  EXPECT_EQ(std::stod(cells[4]), h.history.at("loss").at(1));
  EXPECT_EQ(cells[3], "0.1");

  // append: no second header, rows continue.
  model.fit(data.x, data.y,
            {.batch_size = 16,
             .epochs = 1,
             .verbose = Verbosity::silent,
             .callbacks = {callbacks::CSVLogger(path, {.append = true})}});
  EXPECT_EQ(lines_of(path).size(), 4u);
  model.fit(data.x, data.y,
            {.batch_size = 16,
             .epochs = 1,
             .verbose = Verbosity::silent,
             .callbacks = {callbacks::CSVLogger(path, {.separator = ';'})}});
  const std::vector<std::string> fresh = lines_of(path);
  ASSERT_EQ(fresh.size(), 2u);
  EXPECT_EQ(fresh[0].substr(0, 15), "epoch;accuracy;");
}

TEST(CSVLoggerTest, UnwritablePathIsAnIOError) {
  const auto data = testing::blobs(16, 1);
  Model model = testing::tiny_model(2);
  model.compile({});
  EXPECT_THROW(model.fit(data.x, data.y,
                         {.verbose = Verbosity::silent,
                          .callbacks = {callbacks::CSVLogger("/nonexistent-dir/x/log.csv")}}),
               IOError);
}

}  // namespace
}  // namespace mixprec
