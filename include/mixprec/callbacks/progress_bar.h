// Keras-style progress output for fit()/evaluate() (keras.utils.Progbar).
//
// Bar style (a terminal), redrawn in place with '\r', at most once per min_redraw_seconds:
//   Epoch 1/5
//    12/235 [=>............................] - ETA: 3s - loss: 0.5000 - accuracy: 0.8000
// and, when the pass finishes, the complete line followed by a newline:
//   235/235 [==============================] - 3s 12ms/step - loss: 0.4100 - accuracy: 0.8500
// Line style (stdout is a file or a pipe): nothing while the pass runs, then one line:
//   Epoch 1/5 - 235/235 - 3s 12ms/step - loss: 0.4100 - accuracy: 0.8500
//
// Values print as Keras does: "%.4f", or "%.4e" when |value| <= 1e-3; counts (the loss scale,
// skipped steps) print as integers.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

#pragma GCC visibility push(default)  // the public API (CMakeLists.txt: hidden by default)

namespace mixprec::callbacks {

enum class ProgressStyle { bar, line };
enum class ValueFormat { metric, count };

struct ProgressValue {
  std::string name;
  double value = 0.0;
  ValueFormat format = ValueFormat::metric;
};

// Seconds since any fixed origin, non-decreasing. Tests pass a fake one.
using ProgressClock = std::function<double()>;

struct ProgressBarOptions {
  ProgressStyle style = ProgressStyle::bar;
  std::ostream* stream = nullptr;   // default: std::cout
  ProgressClock clock = nullptr;    // default: std::chrono::steady_clock
  double min_redraw_seconds = 0.1;  // redraws at most ~10 times a second (terminal output is slow)
  int width = 30;                   // characters between the brackets
};

class ProgressBar {
 public:
  // ValueError when width < 1 or min_redraw_seconds is negative or NaN.
  explicit ProgressBar(ProgressBarOptions options = {});

  // Starts a pass of `steps` steps (>= 0; ValueError otherwise). `title` ("Epoch 1/5") is printed
  // on its own line at once in bar style and leads the final line in line style; empty: none.
  void start(std::int64_t steps, std::string_view title = {});
  // True when update() would redraw now: bar style, a pass started, and nothing drawn yet in this
  // pass or min_redraw_seconds passed since the last redraw. Reads the clock once; allocates
  // nothing, so a training loop can ask every step and build the values only when it is true.
  bool due() const;
  // Redraws the bar after `step` finished steps (1..steps) with the running values, when due();
  // otherwise (and in line style) does nothing.
  void update(std::int64_t step, const std::vector<ProgressValue>& values);
  // Ends the pass: the complete bar (or the line) with the total time, the time per step and the
  // final values, then a newline.
  void finish(const std::vector<ProgressValue>& values);
  // Ends a pass early (an exception is on its way): in bar style, a newline after a drawn bar so
  // that what is printed next starts on its own line. Nothing otherwise.
  void interrupt();

  // ---- formatting (public for tests and the command line) ----
  // " - loss: 0.4100" pieces without the separator: "loss: 0.4100", "loss_scale: 32768".
  static std::string format_value(const ProgressValue& value);
  // Keras's ETA: "7s", "1:05", "1:02:03".
  static std::string format_eta(double seconds);
  // "12ms/step", "3s/step", "250us/step".
  static std::string format_per_step(double seconds_per_step);

 private:
  double now() const;
  std::string bar_text(std::int64_t step) const;
  void write_in_place(const std::string& line);

  ProgressBarOptions options_;
  std::ostream* out_;
  std::int64_t steps_ = 0;
  std::string title_;
  bool started_ = false;
  bool drawn_ = false;  // something drawn in this pass
  double start_time_ = 0.0;
  double last_draw_ = 0.0;
  std::size_t last_width_ = 0;  // length of the line on screen, to blank a shorter redraw's tail
};

}  // namespace mixprec::callbacks

#pragma GCC visibility pop
