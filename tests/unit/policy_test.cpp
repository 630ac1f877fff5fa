// Policy names and dtypes (DESIGN §2.2), the error for a wrong name, the process-wide global policy
// and the DESIGN §2.4 accumulation switches (setters, parsing, and the environment read in a fresh
// process).
#include "mixprec/mixed_precision/policy.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "mixed_precision/switches.h"
#include "mixprec/error.h"
#include "mixprec/logging.h"

namespace mixprec::mixed_precision {
namespace {

// Restores the global policy and silences (but keeps) log output for the test's duration.
class PolicyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = global_policy();
    previous_handler_ = set_log_handler([](LogLevel, std::string_view) {});
  }
  void TearDown() override {
    set_global_policy(saved_);
    set_log_handler(std::move(previous_handler_));
  }

 private:
  Policy saved_;
  LogHandler previous_handler_;
};

struct Expected {
  const char* name;
  DType compute;
  DType variable;
  bool mixed;
};

TEST_F(PolicyTest, EveryValidNameHasItsDtypes) {
  const std::vector<Expected> table = {
      {"float32", DType::float32, DType::float32, false},
      {"float16", DType::float16, DType::float16, false},
      {"bfloat16", DType::bfloat16, DType::bfloat16, false},
      {"float64", DType::float64, DType::float64, false},
      {"mixed_float16", DType::float16, DType::float32, true},
      {"mixed_bfloat16", DType::bfloat16, DType::float32, true},
  };
  for (const Expected& e : table) {
    SCOPED_TRACE(e.name);
    const Policy p(e.name);
    EXPECT_EQ(p.name(), e.name);
    EXPECT_EQ(p.compute_dtype(), e.compute);
    EXPECT_EQ(p.variable_dtype(), e.variable);
    EXPECT_EQ(p.is_mixed(), e.mixed);
  }
  const std::vector<std::string> names = Policy::valid_names();
  EXPECT_EQ(std::set<std::string>(names.begin(), names.end()),
            (std::set<std::string>{"float32", "float16", "bfloat16", "float64", "mixed_float16",
                                   "mixed_bfloat16"}));
  EXPECT_EQ(names.size(), 6u);
}

TEST_F(PolicyTest, DefaultConstructedAndImplicitFromString) {
  EXPECT_EQ(Policy().name(), "float32");
  const Policy from_literal = "mixed_bfloat16";  // the {.dtype = "..."} spelling
  EXPECT_EQ(from_literal.compute_dtype(), DType::bfloat16);
  EXPECT_TRUE(Policy("mixed_float16") == Policy(std::string_view("mixed_float16")));
  EXPECT_FALSE(Policy("float16") == Policy("mixed_float16"));
}

TEST_F(PolicyTest, UnknownNameThrowsListingTheValidNames) {
  for (const char* bad : {"mixed_fp16", "", "Float32", "float32 ", "int32", "mixed_float32"}) {
    SCOPED_TRACE(bad);
    try {
      Policy p(bad);
      ADD_FAILURE() << "no exception for '" << bad << "'";
    } catch (const ValueError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("unknown policy '" + std::string(bad) + "'"), std::string::npos)
          << message;
      EXPECT_NE(message.find("valid policies: float32, mixed_float16, mixed_bfloat16"),
                std::string::npos)
          << message;
      for (const char* valid : {"float16", "bfloat16", "float64"}) {
        EXPECT_NE(message.find(valid), std::string::npos) << message;
      }
    }
  }
}

TEST_F(PolicyTest, GlobalPolicyDefaultsToFloat32) {
  // Each ctest case runs in its own process, and every test here restores the policy it changes.
  EXPECT_EQ(global_policy().name(), "float32");
}

TEST_F(PolicyTest, SetGlobalPolicyIsVisibleAndRestorable) {
  const Policy before = global_policy();
  set_global_policy("mixed_float16");
  EXPECT_EQ(global_policy().name(), "mixed_float16");
  EXPECT_EQ(global_policy().compute_dtype(), DType::float16);
  EXPECT_EQ(global_policy().variable_dtype(), DType::float32);
  set_global_policy(Policy("bfloat16"));
  EXPECT_EQ(global_policy().name(), "bfloat16");
  set_global_policy(before);
  EXPECT_EQ(global_policy(), before);
  EXPECT_THROW(set_global_policy("half"), ValueError);
  EXPECT_EQ(global_policy(), before);  // a bad name leaves the policy alone
}

TEST_F(PolicyTest, GlobalPolicyIsVisibleAcrossThreadsAndConsistentUnderRaces) {
  set_global_policy("mixed_bfloat16");
  std::string seen_by_thread;
  std::thread([&] { seen_by_thread = global_policy().name(); }).join();
  EXPECT_EQ(seen_by_thread, "mixed_bfloat16");

  // Writers and readers race; every read must be one whole policy (name matching dtypes).
  const std::vector<std::string> names = {"float32", "mixed_float16", "bfloat16", "float64"};
  std::vector<std::thread> threads;
  std::vector<int> torn(4, 0);
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        if (t % 2 == 0) {
          set_global_policy(names[static_cast<std::size_t>((i + t) % 4)]);
        } else {
          const Policy p = global_policy();
          if (!(Policy(p.name()).compute_dtype() == p.compute_dtype() &&
                Policy(p.name()).variable_dtype() == p.variable_dtype())) {
            ++torn[static_cast<std::size_t>(t)];
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  EXPECT_EQ(torn, std::vector<int>(4, 0));
}

// ---- accumulation switches ----

// Restores both switches to float32 accumulation (the default) after the test.
class SwitchTest : public ::testing::Test {
 protected:
  void TearDown() override {
    set_fp16_matmul_use_fp32_compute(true);
    set_fp16_conv_use_fp32_compute(true);
  }
};

TEST_F(SwitchTest, DefaultIsFloat32AccumulationWhenTheVariablesAreUnset) {
  if (std::getenv("MIXPREC_FP16_MATMUL_USE_FP32_COMPUTE") != nullptr ||
      std::getenv("MIXPREC_FP16_CONV_USE_FP32_COMPUTE") != nullptr) {
    GTEST_SKIP() << "an accumulation variable is set in this test's environment";
  }
  EXPECT_TRUE(fp16_matmul_use_fp32_compute());
  EXPECT_TRUE(fp16_conv_use_fp32_compute());
}

TEST_F(SwitchTest, SettersOverrideEachSwitchIndependently) {
  set_fp16_matmul_use_fp32_compute(false);
  EXPECT_FALSE(fp16_matmul_use_fp32_compute());
  set_fp16_conv_use_fp32_compute(true);
  EXPECT_TRUE(fp16_conv_use_fp32_compute());
  EXPECT_FALSE(fp16_matmul_use_fp32_compute());
  set_fp16_conv_use_fp32_compute(false);
  set_fp16_matmul_use_fp32_compute(true);
  EXPECT_TRUE(fp16_matmul_use_fp32_compute());
  EXPECT_FALSE(fp16_conv_use_fp32_compute());
}

TEST(SwitchParseTest, AcceptsUnsetOneAndZero) {
  using internal::parse_switch;
  EXPECT_TRUE(parse_switch("MIXPREC_FP16_MATMUL_USE_FP32_COMPUTE", nullptr));
  EXPECT_TRUE(parse_switch("MIXPREC_FP16_MATMUL_USE_FP32_COMPUTE", "1"));
  EXPECT_FALSE(parse_switch("MIXPREC_FP16_MATMUL_USE_FP32_COMPUTE", "0"));
}

TEST(SwitchParseTest, AnyOtherValueIsAnErrorNamingTheVariable) {
  for (const char* bad : {"", "2", "true", "false", "yes", " 1", "0 ", "01", "-1"}) {
    SCOPED_TRACE(std::string("value '") + bad + "'");
    try {
      internal::parse_switch("MIXPREC_FP16_CONV_USE_FP32_COMPUTE", bad);
      ADD_FAILURE() << "no exception";
    } catch (const ValueError& e) {
      const std::string message = e.what();
      EXPECT_NE(message.find("MIXPREC_FP16_CONV_USE_FP32_COMPUTE"), std::string::npos) << message;
      EXPECT_NE(message.find("\"" + std::string(bad) + "\""), std::string::npos) << message;
    }
  }
}

// The environment is read once, on the first query, so it can only be tested in a fresh process:
// the "threadsafe" death-test style re-executes this test binary for the statement.
TEST(SwitchEnvironmentTest, FirstReadTakesTheEnvironmentAndSettersOverrideIt) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::setenv("MIXPREC_FP16_MATMUL_USE_FP32_COMPUTE", "0", 1);
        ::setenv("MIXPREC_FP16_CONV_USE_FP32_COMPUTE", "1", 1);
        const bool matmul = fp16_matmul_use_fp32_compute();
        const bool conv = fp16_conv_use_fp32_compute();
        ::setenv("MIXPREC_FP16_MATMUL_USE_FP32_COMPUTE", "1", 1);  // read once: no effect now
        const bool matmul_again = fp16_matmul_use_fp32_compute();
        set_fp16_matmul_use_fp32_compute(true);
        const bool overridden = fp16_matmul_use_fp32_compute();
        std::exit(!matmul && conv && !matmul_again && overridden ? 7 : 1);
      },
      ::testing::ExitedWithCode(7), "");
}

TEST(SwitchEnvironmentTest, ABadEnvironmentValueThrowsOnRead) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ::setenv("MIXPREC_FP16_CONV_USE_FP32_COMPUTE", "on", 1);
        try {
          fp16_conv_use_fp32_compute();
        } catch (const ValueError& e) {
          std::cerr << e.what() << std::endl;
          std::exit(5);
        }
        std::exit(1);
      },
      ::testing::ExitedWithCode(5), "MIXPREC_FP16_CONV_USE_FP32_COMPUTE.*\"on\"");
}

}  // namespace
}  // namespace mixprec::mixed_precision
