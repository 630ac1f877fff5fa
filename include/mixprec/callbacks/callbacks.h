// Every callback (keras.callbacks): include this one header.
#pragma once

#include "mixprec/callbacks/backup_and_restore.h"
#include "mixprec/callbacks/callback.h"
#include "mixprec/callbacks/csv_logger.h"
#include "mixprec/callbacks/early_stopping.h"
#include "mixprec/callbacks/history.h"
#include "mixprec/callbacks/learning_rate_scheduler.h"
#include "mixprec/callbacks/model_checkpoint.h"
#include "mixprec/callbacks/monitor.h"
#include "mixprec/callbacks/progbar_logger.h"
#include "mixprec/callbacks/progress_bar.h"
#include "mixprec/callbacks/reduce_lr_on_plateau.h"
#include "mixprec/callbacks/tensorboard.h"
#include "mixprec/callbacks/terminate_on_nan.h"

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

#pragma GCC visibility pop
