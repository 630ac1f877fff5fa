// TensorBoard Event encoding (src/io/tensorboard_event.h).
#include "io/tensorboard_event.h"

#include "io/protobuf_wire.h"

namespace mixprec::io {

namespace {

namespace field {
// Event
constexpr std::uint32_t kWallTime = 1;
constexpr std::uint32_t kStep = 2;
constexpr std::uint32_t kFileVersion = 3;
constexpr std::uint32_t kSummary = 5;
// Summary
constexpr std::uint32_t kSummaryValue = 1;
// Summary.Value
constexpr std::uint32_t kTag = 1;
constexpr std::uint32_t kSimpleValue = 2;
constexpr std::uint32_t kHisto = 5;
// HistogramProto
constexpr std::uint32_t kMin = 1;
constexpr std::uint32_t kMax = 2;
constexpr std::uint32_t kNum = 3;
constexpr std::uint32_t kSum = 4;
constexpr std::uint32_t kSumSquares = 5;
constexpr std::uint32_t kBucketLimit = 6;
constexpr std::uint32_t kBucket = 7;
}  // namespace field

// An Event with wall_time and step (step 0 omitted, the proto3 default) around one encoded
// Summary.Value.
std::string event_with_value(double wall_time, std::int64_t step, const std::string& value) {
  std::string summary;
  wire::append_bytes_field(summary, field::kSummaryValue, value);
  std::string event;
  wire::append_double_field(event, field::kWallTime, wall_time);
  if (step != 0) wire::append_int64_field(event, field::kStep, step);
  wire::append_bytes_field(event, field::kSummary, summary);
  return event;
}

}  // namespace

std::string encode_file_version_event(double wall_time) {
  std::string event;
  wire::append_double_field(event, field::kWallTime, wall_time);
  wire::append_bytes_field(event, field::kFileVersion, kEventFileVersion);
  return event;
}

std::string encode_scalar_event(double wall_time, std::int64_t step, std::string_view tag,
                                float value) {
  std::string v;
  wire::append_bytes_field(v, field::kTag, tag);
  wire::append_float_field(v, field::kSimpleValue, value);
  return event_with_value(wall_time, step, v);
}

std::string encode_histogram_event(double wall_time, std::int64_t step, std::string_view tag,
                                   const Histogram& histogram) {
  std::string h;
  wire::append_double_field(h, field::kMin, histogram.min);
  wire::append_double_field(h, field::kMax, histogram.max);
  wire::append_double_field(h, field::kNum, histogram.num);
  wire::append_double_field(h, field::kSum, histogram.sum);
  wire::append_double_field(h, field::kSumSquares, histogram.sum_squares);
  wire::append_packed_doubles_field(h, field::kBucketLimit, histogram.bucket_limit);
  wire::append_packed_doubles_field(h, field::kBucket, histogram.bucket);
  std::string v;
  wire::append_bytes_field(v, field::kTag, tag);
  wire::append_bytes_field(v, field::kHisto, h);
  return event_with_value(wall_time, step, v);
}

}  // namespace mixprec::io
