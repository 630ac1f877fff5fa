// Debugging what makes up the host memory peak: while tracing is on, the host allocator
// (core/allocator.cpp) records every live block with its size and the return addresses of its
// allocation, and keeps a copy of that set each time the traced bytes reach a new peak.
//
// MIXPREC_PEAK_TRACE=<file> turns it on for the whole process and writes the blocks live at the
// peak to <file> at exit, one line per block: "<bytes> <module>+0x<offset> ..." (innermost frame
// first), for `addr2line -f -C -e <module> <offset>...`; grouping the lines by their frames gives
// the peak by allocation site (how the EfficientNet-B0 peak of issue 14 was broken down). Slow (a
// backtrace per allocation): for diagnosis only, never on by default.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace mixprec::core {

// Starts (clearing what was recorded) or stops tracing; blocks allocated while it was off are not
// seen, and their frees are ignored.
void set_peak_trace(bool on);
bool peak_trace_enabled();

// The sizes of the traced blocks live at the traced peak, largest first.
std::vector<std::size_t> peak_trace_block_sizes();

// Writes the blocks live at the traced peak to `path` in the format above (what the
// MIXPREC_PEAK_TRACE exit handler calls); false when the file cannot be written.
bool write_peak_trace(const char* path);

// Called by the host allocator for each block.
void peak_trace_allocated(const void* block, std::size_t bytes);
void peak_trace_freed(const void* block);

}  // namespace mixprec::core
