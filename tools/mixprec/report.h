// What the commands print and write: step-time statistics, the metrics JSON of a run, the compare
// table, the DESIGN §5 benchmark document, and small formatting helpers.
#pragma once

#include <cstdint>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "run.h"

namespace mixprec::cli {

struct StepStats {
  std::size_t count = 0;
  double min_ms = 0.0, median_ms = 0.0, max_ms = 0.0;
  double total_ms = 0.0;
};
// Statistics of step wall times; the median of an even count is the mean of the middle two.
StepStats step_stats(std::vector<double> step_ms);
// Every step of every epoch of a run.
StepStats run_step_stats(const RunResult& run);

// Derived figures of a run (the same in the JSON and the table):
//   seconds_per_epoch  = mean wall time of an epoch (training + validation);
//   samples_per_second = training samples processed / time spent in training steps.
double seconds_per_epoch(const RunResult& run);
double samples_per_second(const RunResult& run);

// The --metrics-json document of one run (field list in train.cpp's help and the README). The mlp
// has "units" and "hidden_layers"; the image models have "input_size", "channels", "classes" and
// "pipeline" (the per-batch steps) in their place.
nlohmann::ordered_json run_to_json(const RunResult& run);

// "28x28x1 -> 10" for the image models' input and classes; "784-512-512-10" for the mlp.
std::string model_shape_text(const RunResult& run);
std::string model_shape_text(const RunConfig& config, const ModelShape& shape);

// Columns of the compare table. The mlp's default table has no batch column (every run shares
// the batch); a batch column is added when the runs' batch sizes may differ (--batch-sizes) and
// for image models, whose throughput column is named images/s.
struct CompareTableStyle {
  bool batch_column = false;
  const char* throughput = "samples/s";
};
// The compare table: one row per run.
void print_compare_table(const std::vector<RunResult>& runs, std::FILE* out,
                         CompareTableStyle style = {});

// Writes `document` (2-space indent, newline-terminated); std::runtime_error when the file cannot
// be written.
void write_json(const std::string& path, const nlohmann::ordered_json& document);

// "123.4 MiB"
std::string format_bytes(std::int64_t bytes);
// The UTC date, "2026-11-23".
std::string utc_date();
// The CPU's name (list_physical_devices), for the "device" field of reports.
std::string cpu_name();

}  // namespace mixprec::cli
