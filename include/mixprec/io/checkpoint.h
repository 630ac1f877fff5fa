// Training checkpoints: everything a fit() needs to continue bit-identically after the process
// that ran it is gone (DESIGN §2.5: "scale, counter and inner optimizer state are saved and
// restored with checkpoints").
//
// A checkpoint is one safetensors file (include/mixprec/io/safetensors.h), written atomically:
//  - tensors "model/<variable>" (every variable by its name, "dense_1/kernel", in its dtype,
//    BatchNormalization's moving statistics included) and "optimizer/<slot>" (every slot of the
//    optimizer, "optimizer/inner/momentum/0" for a LossScaleOptimizer's inner one);
//  - "__metadata__": {"format": "mixprec-checkpoint", "version": "1", "state": JSON text} with the
//    optimizer's iterations and scalars (the loss scale, its growth counter, the skipped steps),
//    the learning rate when a callback replaced it, the position in fit() (the epoch, the batch
//    within it and the shuffling state that reproduces that epoch's order), the random state
//    (mixprec::default_generator() and every layer's own generator, such as a seeded Dropout's),
//    and the run's shape (batch size, batches per epoch), checked on resume, and the world size
//    (the number of processes of the data-parallel group that wrote it: mixprec::distributed;
//    a checkpoint without it, written before the field existed, has world size 1).
//
// Resuming: load_checkpoint() from a callback's on_train_begin (BackupAndRestore does this) makes
// that fit() start at the checkpoint's epoch and batch; outside fit() it restores the weights,
// optimizer and random state only. Training on to the same end gives the same weights and loss
// scale, bit for bit, as the run that was never interrupted (on the CPU; on a GPU the kernels'
// own determinism applies).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>

#include "mixprec/io/load_options.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec {
class Model;
}

namespace mixprec::io {

struct CheckpointInfo {
  std::string model_name;
  std::string optimizer;        // Optimizer::name()
  std::int64_t iterations = 0;  // optimizer steps taken
  std::optional<double> loss_scale;
  // The position fit() continues from: batch `step` of epoch `epoch` (0-based); both 0 for a
  // checkpoint saved outside fit().
  int epoch = 0;
  std::int64_t step = 0;
  bool in_fit = false;  // saved during fit() (it has a position to resume from)
  int world_size = 1;   // processes in the data-parallel group that wrote it
  // The global dtype policy when it was written ("mixed_float16"); "" for checkpoints written
  // before the field.
  std::string policy;
};

// Saves `model` (compiled) to `path` atomically: the previous file at `path`, if any, stays whole
// until the new one is complete. IOError on a failing write; ValueError for an uncompiled model.
void save_checkpoint(const Model& model, const std::filesystem::path& path);

// Validates the whole file against `model` (same variables with the same shapes and dtypes, an
// optimizer of the same kind, the same batch size and batches per epoch when resuming inside fit,
// the same world size as mixprec::distributed::world_size() now)
// and only then restores it; on any error (IOError for the file, ValueError for a mismatch, each
// naming the file and the problem) the model, its optimizer and the random state are untouched.
// The file's checksums are verified (IOError naming the first tensor, or the metadata, that
// differs; files written before checksums load unchecked); every value of the state is checked
// against its range (the loss scale, the counters, the epoch and step: IOError naming the field's
// path, "state.optimizer.scalars.loss_scale", never clamped); weights and optimizer slots holding
// NaN or Inf are an IOError unless options.allow_nonfinite.
CheckpointInfo load_checkpoint(Model& model, const std::filesystem::path& path,
                               const LoadOptions& options = {});

// The header of a checkpoint, without loading its tensors. IOError for a bad file.
CheckpointInfo read_checkpoint_info(const std::filesystem::path& path);

}  // namespace mixprec::io

#pragma GCC visibility pop
