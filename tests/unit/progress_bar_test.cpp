// ProgressBar: the Keras bar and the per-pass line, written from a fake clock into a string
// stream; expected text is spelled out by hand from Keras's Progbar rules (30-character bar,
// '>' at the head while running, "%.4f" values, "%.0fs" elapsed and ms/step).
#include "mixprec/callbacks/progress_bar.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <sstream>
#include <string>

#include "mixprec/error.h"

namespace mixprec::callbacks {
namespace {

struct FakeClock {
  double t = 0.0;
};

ProgressBar make_bar(FakeClock& clock, std::ostringstream& out, ProgressStyle style,
                     double min_redraw = 0.1) {
  return ProgressBar({.style = style,
                      .stream = &out,
                      .clock = [&clock] { return clock.t; },
                      .min_redraw_seconds = min_redraw});
}

TEST(ProgressBarTest, BarRedrawsInPlaceAndFinishesWithTimingAndValues) {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar = make_bar(clock, out, ProgressStyle::bar);
  bar.start(235, "Epoch 1/5");
  EXPECT_EQ(out.str(), "Epoch 1/5\n");

  clock.t = 0.6;
  ASSERT_TRUE(bar.due());
  bar.update(12, {{"loss", 0.5}, {"accuracy", 0.8}});
  // 12/235 of 30 = 1.53 -> 1 filled character, the head '>'; ETA 0.05 s/step * 223 = 11.15 s.
  const std::string first =
      "\r 12/235 [>.............................] - ETA: 11s - loss: 0.5000 - accuracy: 0.8000";
  EXPECT_EQ(out.str(), "Epoch 1/5\n" + first);

  clock.t = 0.65;  // 0.05 s later: not due, nothing drawn
  EXPECT_FALSE(bar.due());
  bar.update(13, {{"loss", 0.49}});
  EXPECT_EQ(out.str(), "Epoch 1/5\n" + first);

  clock.t = 1.2;  // 100/235 of 30 = 12.77 -> 11 '=' and the head; ETA 0.012 * 135 = 1.62 s
  bar.update(100, {{"loss", 0.45}, {"accuracy", 0.82}});
  // One character shorter than the first ("1s" after "11s"): a space blanks the leftover.
  const std::string second =
      "\r100/235 [===========>..................] - ETA: 1s - loss: 0.4500 - accuracy: 0.8200 ";
  EXPECT_EQ(out.str(), "Epoch 1/5\n" + first + second);

  clock.t = 2.82;  // 2.82 s / 235 steps = 12 ms/step
  bar.finish({{"loss", 0.41}, {"accuracy", 0.85}, {"loss_scale", 32768.0, ValueFormat::count}});
  EXPECT_EQ(out.str(), "Epoch 1/5\n" + first + second +
                           "\r235/235 [==============================] - 3s 12ms/step - loss: "
                           "0.4100 - accuracy: 0.8500 - loss_scale: 32768\n");
}

TEST(ProgressBarTest, ShorterRedrawBlanksTheRestOfTheLine) {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar = make_bar(clock, out, ProgressStyle::bar);
  bar.start(4);
  bar.update(1, {{"loss", 1.0}, {"a_long_metric_name", 0.5}});
  const std::string first = out.str();
  ASSERT_EQ(first,
            "\r1/4 [======>.......................] - ETA: 0s - loss: 1.0000 - "
            "a_long_metric_name: 0.5000");
  clock.t = 1.0;
  bar.update(2, {{"loss", 1.0}});
  const std::string line2 = "\r2/4 [==============>...............] - ETA: 1s - loss: 1.0000";
  // Padded with spaces to the previous line's length (without its '\r').
  EXPECT_EQ(out.str(), first + line2 + std::string(first.size() - line2.size(), ' '));
}

TEST(ProgressBarTest, LineStylePrintsOneLinePerPass) {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar = make_bar(clock, out, ProgressStyle::line);
  bar.start(235, "Epoch 2/5");
  EXPECT_FALSE(bar.due());
  clock.t = 1.0;
  bar.update(100, {{"loss", 0.3}});
  EXPECT_EQ(out.str(), "");
  clock.t = 2.82;
  bar.finish({{"loss", 0.41}, {"accuracy", 0.85}, {"val_loss", 0.5}});
  EXPECT_EQ(out.str(),
            "Epoch 2/5 - 235/235 - 3s 12ms/step - loss: 0.4100 - accuracy: 0.8500 - "
            "val_loss: 0.5000\n");
  // Without a title (evaluate): the count leads.
  std::ostringstream out2;
  ProgressBar eval = make_bar(clock, out2, ProgressStyle::line);
  eval.start(79);
  clock.t = 3.0;  // 0.18 s / 79 = 2.3 ms
  eval.finish({{"loss", 0.3}});
  EXPECT_EQ(out2.str(), "79/79 - 0s 2ms/step - loss: 0.3000\n");
}

TEST(ProgressBarTest, RedrawsAtMostTenTimesASecond) {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar = make_bar(clock, out, ProgressStyle::bar);
  bar.start(1000);
  int calls_due = 0;
  for (int step = 1; step <= 1000; ++step) {
    clock.t = 0.005 * step;  // 5 ms steps: 5 s in all
    if (bar.due()) {
      ++calls_due;
      bar.update(step, {{"loss", 1.0}});
    }
  }
  const std::string text = out.str();
  const auto redraws = std::count(text.begin(), text.end(), '\r');
  EXPECT_EQ(redraws, calls_due);
  // The first step draws, then one redraw per 0.1 s (every 20 or 21 steps): about 50.
  EXPECT_GE(redraws, 45);
  EXPECT_LE(redraws, 51);
}

TEST(ProgressBarTest, FormatsValuesAsKeras) {
  EXPECT_EQ(ProgressBar::format_value({"loss", 0.41}), "loss: 0.4100");
  EXPECT_EQ(ProgressBar::format_value({"loss", 1e-4}), "loss: 1.0000e-04");
  EXPECT_EQ(ProgressBar::format_value({"loss", 0.0}), "loss: 0.0000e+00");
  EXPECT_EQ(ProgressBar::format_value({"loss", -2.5}), "loss: -2.5000");
  EXPECT_EQ(ProgressBar::format_value({"loss_scale", 32768, ValueFormat::count}),
            "loss_scale: 32768");
  EXPECT_EQ(ProgressBar::format_value({"loss_scale", std::ldexp(1.0, 60), ValueFormat::count}),
            "loss_scale: 1.153e+18");
  EXPECT_EQ(ProgressBar::format_value({"skipped_steps", 3, ValueFormat::count}),
            "skipped_steps: 3");
  EXPECT_EQ(ProgressBar::format_eta(59.9), "59s");
  EXPECT_EQ(ProgressBar::format_eta(65), "1:05");
  EXPECT_EQ(ProgressBar::format_eta(3725), "1:02:05");
  EXPECT_EQ(ProgressBar::format_per_step(0.0005), "500us/step");
  EXPECT_EQ(ProgressBar::format_per_step(0.012), "12ms/step");
  EXPECT_EQ(ProgressBar::format_per_step(2.4), "2s/step");
}

TEST(ProgressBarTest, EmptyPassAndInvalidOptions) {
  FakeClock clock;
  std::ostringstream out;
  ProgressBar bar = make_bar(clock, out, ProgressStyle::bar);
  bar.start(0);
  bar.finish({});
  EXPECT_EQ(out.str(), "\r0/0 [==============================] - 0s 0s/step\n");
  EXPECT_THROW(bar.start(-1), ValueError);
  EXPECT_THROW(ProgressBar({.width = 0}), ValueError);
  EXPECT_THROW(ProgressBar({.min_redraw_seconds = -1.0}), ValueError);
  EXPECT_THROW(ProgressBar({.min_redraw_seconds = std::nan("")}), ValueError);
}

}  // namespace
}  // namespace mixprec::callbacks
