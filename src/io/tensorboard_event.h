// TensorBoard's Event protocol buffer (tensorflow/core/util/event.proto, summary.proto), encoded
// by hand: the serialized bytes of one Event, to be framed as a TFRecord (src/io/tfrecord.h).
//
// Why by hand rather than libprotobuf with our own .proto: we write three small messages with a
// handful of scalar fields, never read them, and the wire format for those is a page of code
// (src/io/protobuf_wire.h); linking libprotobuf would add protoc to the build, a generated-code
// step, and a runtime library whose version must match the generated code, all for that page.
// The tests decode what we write with two independent decoders (C++ and Python standard library).
//
// The fields written (numbers as in the .proto files):
//   Event          { double wall_time = 1; int64 step = 2; string file_version = 3;
//                    Summary summary = 5; }
//   Summary        { repeated Value value = 1; }
//   Summary.Value  { string tag = 1; float simple_value = 2; HistogramProto histo = 5; }
//   HistogramProto { double min = 1, max = 2, num = 3, sum = 4, sum_squares = 5;
//                    repeated double bucket_limit = 6 [packed]; repeated double bucket = 7
//                    [packed]; }
// simple_value and histo are members of a oneof, so they are written even when zero.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "io/histogram.h"

namespace mixprec::io {

// The first record of every event file.
inline constexpr std::string_view kEventFileVersion = "brain.Event:2";

// Event{wall_time, file_version: "brain.Event:2"}.
std::string encode_file_version_event(double wall_time);

// Event{wall_time, step, summary: {value: [{tag, simple_value}]}}.
std::string encode_scalar_event(double wall_time, std::int64_t step, std::string_view tag,
                                float value);

// Event{wall_time, step, summary: {value: [{tag, histo}]}}.
std::string encode_histogram_event(double wall_time, std::int64_t step, std::string_view tag,
                                   const Histogram& histogram);

}  // namespace mixprec::io
