// CPU embedding lookup and its deterministic scatter-add (mixprec/transformer_ops.h):
//  - gather: every id is checked against [0, V) before any row is read (ValueError naming the first
//    bad id, its flat position and the shape of ids); then OpenMP over positions, each row copied
//    (same dtype) or converted once (float32 -> 16-bit: the bulk conversions of convert.h);
//  - scatter-add: the positions sorted by id by a stable counting sort (CSR: offsets per id, the
//    positions of each id in increasing order), then OpenMP over the ids, each row of the table
//    gradient summing its positions in that order in float32 (float64 for float64) and rounded
//    once to the table's dtype: the same bits for any thread count.
#pragma once

#include <cstdint>

#include "mixprec/tensor.h"

namespace mixprec::cpu {

// Throws ValueError naming `op` when some id of `ids` (int32/int64, CPU) is outside [0, vocab).
void check_embedding_ids(const char* op, const Tensor& ids, std::int64_t vocab);

Tensor embedding_gather(const Tensor& table, const Tensor& ids, DType out_dtype);
Tensor embedding_scatter_add(const Tensor& g, const Tensor& ids, std::int64_t vocab,
                             DType table_dtype);

}  // namespace mixprec::cpu
