// mixprec.callbacks: the built-in callbacks, and Callback as a base for Python subclasses. fit()
// and evaluate() run without the GIL; a Python hook takes it for the call (the trampoline below),
// and is called only when the subclass defines it, so a callback that watches epochs costs the
// batches nothing.
#include "callbacks.h"

namespace mixprec::python {

namespace {

using namespace callbacks;

py::dict logs_to_dict(const Logs& logs) {
  py::dict d;
  for (const auto& [name, value] : logs) d[py::str(name)] = value;
  return d;
}

// The trampoline: a Python subclass's hooks, called with the GIL taken and the logs as a dict.
class PyCallback : public Callback {
 public:
  using Callback::Callback;

  void on_train_begin(const Logs& logs) override {
    py::gil_scoped_acquire gil;
    py::object self = py::cast(static_cast<Callback*>(this), py::return_value_policy::reference);
    const TrainingParams& p = params();
    py::dict params;
    params["epochs"] = p.epochs;
    params["initial_epoch"] = p.initial_epoch;
    params["steps"] = p.steps;
    params["verbose"] = p.verbose;
    py::setattr(self, "params", params);
    call("on_train_begin", logs);
  }
  void on_train_end(const Logs& logs) override { call_with_gil("on_train_end", logs); }
  void on_epoch_begin(int epoch, const Logs& logs) override {
    call_with_gil("on_epoch_begin", logs, epoch);
  }
  void on_epoch_end(int epoch, const Logs& logs) override {
    call_with_gil("on_epoch_end", logs, epoch);
  }
  void on_train_batch_begin(std::int64_t batch, const Logs& logs) override {
    call_with_gil("on_train_batch_begin", logs, batch);
  }
  void on_train_batch_end(std::int64_t batch, const Logs& logs) override {
    call_with_gil("on_train_batch_end", logs, batch);
  }
  void on_test_begin(const Logs& logs) override { call_with_gil("on_test_begin", logs); }
  void on_test_end(const Logs& logs) override { call_with_gil("on_test_end", logs); }
  void on_test_batch_end(std::int64_t batch, const Logs& logs) override {
    call_with_gil("on_test_batch_end", logs, batch);
  }

 private:
  // Calls the Python override `name` if the subclass defines one (GIL held by the caller).
  template <typename... Index>
  void call(const char* name, const Logs& logs, Index... index) {
    py::function override = py::get_override(static_cast<const Callback*>(this), name);
    if (override) override(index..., logs_to_dict(logs));
  }
  template <typename... Index>
  void call_with_gil(const char* name, const Logs& logs, Index... index) {
    py::gil_scoped_acquire gil;
    call(name, logs, index...);
  }
};

}  // namespace

void InterruptCheck::check(bool stop_training) {
  py::gil_scoped_acquire gil;
  if (error_ || PyErr_CheckSignals() == 0) return;
  error_ = std::make_shared<py::error_already_set>();  // takes the KeyboardInterrupt
  if (!stop_training) throw *error_;
  if (has_model()) model().set_stop_training(true);
}

void InterruptCheck::rethrow() {
  if (error_) {
    auto error = std::move(error_);
    throw *error;
  }
}

std::vector<CallbackRef> to_callbacks(py::handle list, py::handle model) {
  std::vector<CallbackRef> out;
  if (list.is_none()) return out;
  for (auto item : py::iter(list)) {
    if (!py::isinstance<Callback>(item)) {
      throw py::type_error("callbacks must be mixprec.callbacks.Callback instances, got " +
                           py::str(py::type::of(item).attr("__name__")).cast<std::string>());
    }
    // Keras: a callback reads the model as self.model.
    if (!model.is_none() && py::hasattr(item, "__dict__")) py::setattr(item, "model", model);
    out.emplace_back(item.cast<std::shared_ptr<Callback>>());
  }
  return out;
}

void bind_callbacks(py::module_& parent) {
  py::module_ m = parent.def_submodule("callbacks", "Callbacks of fit() and evaluate().");
  py::class_<Callback, PyCallback, std::shared_ptr<Callback>>(m, "Callback", py::dynamic_attr(),
                                                              R"doc(
Base of callbacks (keras.callbacks.Callback). Subclass it in Python and define any of
on_train_begin(logs), on_train_end(logs), on_epoch_begin(epoch, logs), on_epoch_end(epoch, logs),
on_train_batch_begin(batch, logs), on_train_batch_end(batch, logs), on_test_begin(logs),
on_test_end(logs), on_test_batch_end(batch, logs); logs is a dict of floats. fit() sets
self.model (set self.model.stop_training = True to stop after the current batch) and self.params.
Call super().__init__() in your __init__.)doc")
      .def(py::init<>())
      .def(
          "on_train_begin", [](Callback&, py::object) {}, py::arg("logs") = py::none())
      .def(
          "on_train_end", [](Callback&, py::object) {}, py::arg("logs") = py::none())
      .def(
          "on_epoch_begin", [](Callback&, int, py::object) {}, py::arg("epoch"),
          py::arg("logs") = py::none())
      .def(
          "on_epoch_end", [](Callback&, int, py::object) {}, py::arg("epoch"),
          py::arg("logs") = py::none())
      .def(
          "on_train_batch_begin", [](Callback&, std::int64_t, py::object) {}, py::arg("batch"),
          py::arg("logs") = py::none())
      .def(
          "on_train_batch_end", [](Callback&, std::int64_t, py::object) {}, py::arg("batch"),
          py::arg("logs") = py::none())
      .def(
          "on_test_begin", [](Callback&, py::object) {}, py::arg("logs") = py::none())
      .def(
          "on_test_end", [](Callback&, py::object) {}, py::arg("logs") = py::none())
      .def(
          "on_test_batch_end", [](Callback&, std::int64_t, py::object) {}, py::arg("batch"),
          py::arg("logs") = py::none());

  auto mode = [](const std::string& name) {
    if (name == "auto") return MonitorMode::automatic;
    if (name == "min") return MonitorMode::min;
    if (name == "max") return MonitorMode::max;
    throw ValueError("mode must be 'auto', 'min' or 'max', got '" + name + "'");
  };
  auto save_freq = [](py::object f) -> std::variant<std::string, std::int64_t> {
    if (py::isinstance<py::str>(f)) return f.cast<std::string>();
    return f.cast<std::int64_t>();
  };

  py::class_<EarlyStopping, Callback, std::shared_ptr<EarlyStopping>>(m, "EarlyStopping")
      .def(py::init([mode](const std::string& monitor, double min_delta, int patience, int verbose,
                           const std::string& m, std::optional<double> baseline,
                           bool restore_best_weights, int start_from_epoch) {
             return std::make_shared<EarlyStopping>(
                 EarlyStoppingOptions{.monitor = monitor,
                                      .min_delta = min_delta,
                                      .patience = patience,
                                      .mode = mode(m),
                                      .baseline = baseline,
                                      .restore_best_weights = restore_best_weights,
                                      .start_from_epoch = start_from_epoch,
                                      .verbose = verbose != 0});
           }),
           py::arg("monitor") = "val_loss", py::arg("min_delta") = 0.0, py::arg("patience") = 0,
           py::arg("verbose") = 0, py::arg("mode") = "auto", py::arg("baseline") = py::none(),
           py::arg("restore_best_weights") = false, py::arg("start_from_epoch") = 0)
      .def_property_readonly("stopped_epoch", &EarlyStopping::stopped_epoch)
      .def_property_readonly("best_epoch", &EarlyStopping::best_epoch)
      .def_property_readonly("best", &EarlyStopping::best);

  py::class_<ModelCheckpoint, Callback, std::shared_ptr<ModelCheckpoint>>(m, "ModelCheckpoint")
      .def(py::init([mode, save_freq](const std::string& filepath, const std::string& monitor,
                                      int verbose, bool save_best_only, bool save_weights_only,
                                      const std::string& m, py::object freq,
                                      std::optional<double> initial_value_threshold,
                                      int max_to_keep) {
             ModelCheckpointOptions o;
             o.filepath = filepath;
             o.monitor = monitor;
             o.verbose = verbose != 0;
             o.save_best_only = save_best_only;
             o.save_weights_only = save_weights_only;
             o.mode = mode(m);
             o.save_freq = save_freq(freq);
             o.initial_value_threshold = initial_value_threshold;
             o.max_to_keep = max_to_keep;
             return std::make_shared<ModelCheckpoint>(o);
           }),
           py::arg("filepath"), py::arg("monitor") = "val_loss", py::arg("verbose") = 0,
           py::arg("save_best_only") = false, py::arg("save_weights_only") = false,
           py::arg("mode") = "auto", py::arg("save_freq") = "epoch",
           py::arg("initial_value_threshold") = py::none(), py::arg("max_to_keep") = 0)
      .def_property_readonly("best", &ModelCheckpoint::best);

  py::class_<CSVLogger, Callback, std::shared_ptr<CSVLogger>>(m, "CSVLogger")
      .def(py::init([](const std::string& filename, const std::string& separator, bool append) {
             if (separator.size() != 1)
               throw ValueError("CSVLogger: separator must be 1 character");
             return std::make_shared<CSVLogger>(
                 filename, CSVLoggerOptions{.separator = separator[0], .append = append});
           }),
           py::arg("filename"), py::arg("separator") = ",", py::arg("append") = false);

  py::class_<TerminateOnNaN, Callback, std::shared_ptr<TerminateOnNaN>>(m, "TerminateOnNaN")
      .def(py::init([] { return std::make_shared<TerminateOnNaN>(); }))
      .def_property_readonly("terminated", &TerminateOnNaN::terminated);

  py::class_<ReduceLROnPlateau, Callback, std::shared_ptr<ReduceLROnPlateau>>(m,
                                                                              "ReduceLROnPlateau")
      .def(py::init([mode](const std::string& monitor, double factor, int patience, int verbose,
                           const std::string& m, double min_delta, int cooldown, double min_lr) {
             return std::make_shared<ReduceLROnPlateau>(
                 ReduceLROnPlateauOptions{.monitor = monitor,
                                          .factor = factor,
                                          .patience = patience,
                                          .mode = mode(m),
                                          .min_delta = min_delta,
                                          .cooldown = cooldown,
                                          .min_lr = min_lr,
                                          .verbose = verbose != 0});
           }),
           py::arg("monitor") = "val_loss", py::arg("factor") = 0.1, py::arg("patience") = 10,
           py::arg("verbose") = 0, py::arg("mode") = "auto", py::arg("min_delta") = 1e-4,
           py::arg("cooldown") = 0, py::arg("min_lr") = 0.0);

  py::class_<LearningRateScheduler, Callback, std::shared_ptr<LearningRateScheduler>>(
      m, "LearningRateScheduler")
      .def(py::init([](py::function schedule, int verbose) {
             auto fn = std::make_shared<py::function>(std::move(schedule));
             auto call = [fn](int epoch, double lr) {
               py::gil_scoped_acquire gil;
               return (*fn)(epoch, lr).cast<double>();
             };
             return std::make_shared<LearningRateScheduler>(call, verbose != 0);
           }),
           py::arg("schedule"), py::arg("verbose") = 0);

  py::class_<TensorBoard, Callback, std::shared_ptr<TensorBoard>>(m, "TensorBoard")
      .def(py::init([save_freq](const std::string& log_dir, int histogram_freq,
                                py::object update_freq, bool write_gradients) {
             TensorBoardOptions o;
             o.log_dir = log_dir;
             o.histogram_freq = histogram_freq;
             o.update_freq = save_freq(update_freq);
             o.write_gradients = write_gradients;
             return std::make_shared<TensorBoard>(o);
           }),
           py::arg("log_dir") = "logs", py::arg("histogram_freq") = 0,
           py::arg("update_freq") = "epoch", py::arg("write_gradients") = false);

  py::class_<BackupAndRestore, Callback, std::shared_ptr<BackupAndRestore>>(m, "BackupAndRestore")
      .def(
          py::init([save_freq](const std::string& backup_dir, py::object freq,
                               bool delete_checkpoint, int max_to_keep, int verbose, bool restart) {
            BackupAndRestoreOptions o;
            o.backup_dir = backup_dir;
            o.save_freq = save_freq(freq);
            o.delete_checkpoint = delete_checkpoint;
            o.max_to_keep = max_to_keep;
            o.verbose = verbose != 0;
            o.restart = restart;
            return std::make_shared<BackupAndRestore>(o);
          }),
          py::arg("backup_dir"), py::arg("save_freq") = "epoch",
          py::arg("delete_checkpoint") = true, py::arg("max_to_keep") = 2, py::arg("verbose") = 0,
          py::arg("restart") = false);
}

}  // namespace mixprec::python
