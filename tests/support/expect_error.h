// expect_error<E>(f, {"part", ...}): f() must throw E, and its message must contain every part.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace mixprec::testing {

template <typename E, typename F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const E& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << msg << "\nmissing: " << p;
  }
}

}  // namespace mixprec::testing
