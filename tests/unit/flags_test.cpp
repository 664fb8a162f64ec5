// The flags table (core/flags.h): defaults, parsing, a bad value falling back to the default with a
// warning, live switches re-read, and every switch of the library going through the table.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

#include "core/flags.h"
#include "ingot/error.h"

namespace ingot {
namespace {

TEST(Flags, DefaultsWhenUnset) {
  // Switches that nothing in the unit-test process reads before this test (CUDA kernels' switches).
  unsetenv("INGOT_DEPTHWISE_NCHW");
  EXPECT_TRUE(flags::enabled("INGOT_DEPTHWISE_NCHW"));
  // Read once: a later change in the environment is not seen.
  setenv("INGOT_DEPTHWISE_NCHW", "0", 1);
  EXPECT_TRUE(flags::enabled("INGOT_DEPTHWISE_NCHW"));
  unsetenv("INGOT_DEPTHWISE_NCHW");
}

TEST(Flags, BadValueWarnsAndUsesTheDefault) {
  setenv("INGOT_DEPTHWISE_VEC", "maybe", 1);
  setenv("INGOT_CONV_RETIME", "3x", 1);
  testing::internal::CaptureStderr();
  EXPECT_TRUE(flags::enabled("INGOT_DEPTHWISE_VEC"));
  EXPECT_EQ(flags::integer("INGOT_CONV_RETIME"), 1);
  std::string err = testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("INGOT_DEPTHWISE_VEC='maybe' is not 0 or 1; using the default (1)"), std::string::npos) << err;
  EXPECT_NE(err.find("INGOT_CONV_RETIME='3x' is not an integer"), std::string::npos) << err;
  unsetenv("INGOT_DEPTHWISE_VEC");
  unsetenv("INGOT_CONV_RETIME");
}

TEST(Flags, LiveListIsReadAtEveryUse) {
  unsetenv("INGOT_HIDE_CUDA_KERNELS");
  EXPECT_TRUE(flags::list("INGOT_HIDE_CUDA_KERNELS").empty());
  setenv("INGOT_HIDE_CUDA_KERNELS", "Relu,,Resize", 1);
  EXPECT_EQ(flags::list("INGOT_HIDE_CUDA_KERNELS"), (std::vector<std::string>{"Relu", "Resize"}));
  EXPECT_TRUE(flags::list_contains("INGOT_HIDE_CUDA_KERNELS", "Resize"));
  EXPECT_FALSE(flags::list_contains("INGOT_HIDE_CUDA_KERNELS", "Res"));
  unsetenv("INGOT_HIDE_CUDA_KERNELS");
  EXPECT_FALSE(flags::list_contains("INGOT_HIDE_CUDA_KERNELS", "Relu"));
}

TEST(Flags, UnknownNameOrWrongKindThrows) {
  EXPECT_THROW(flags::enabled("INGOT_NO_SUCH_SWITCH"), Error);
  EXPECT_THROW(flags::integer("INGOT_FLASH_ATTENTION"), Error);
}

TEST(Flags, DescribeListsEverySwitchWithItsHelp) {
  std::string text = flags::describe();
  for (const flags::Flag& f : flags::all()) {
    EXPECT_NE(text.find(std::string(f.name) + "="), std::string::npos) << f.name;
    EXPECT_FALSE(f.help.empty()) << f.name;
  }
}

// The library reads the environment only through the table: every INGOT_* name that src/ mentions
// in a getenv or a flags:: call is in it, and no file but flags.cpp calls getenv on an INGOT_ name.
TEST(Flags, EverySwitchInTheSourceIsInTheTable) {
  namespace fs = std::filesystem;
  std::set<std::string> table;
  for (const flags::Flag& f : flags::all()) table.insert(std::string(f.name));
  const std::regex flag_call(R"re(flags::\w+\("(INGOT_\w+)")re");
  const std::regex raw_getenv(R"re(getenv\("INGOT_)re");
  int calls = 0;
  for (const auto& entry : fs::recursive_directory_iterator(fs::path(INGOT_SOURCE_DIR) / "src")) {
    if (!entry.is_regular_file() || entry.path().filename() == "flags.cpp") continue;
    std::ifstream in(entry.path());
    std::stringstream text;
    text << in.rdbuf();
    const std::string s = text.str();
    EXPECT_FALSE(std::regex_search(s, raw_getenv)) << entry.path() << " reads an INGOT_ switch with getenv";
    for (std::sregex_iterator it(s.begin(), s.end(), flag_call), end; it != end; ++it) {
      EXPECT_TRUE(table.count((*it)[1])) << entry.path() << " reads " << (*it)[1] << ", which is not in the table";
      ++calls;
    }
  }
  EXPECT_GE(calls, int(table.size()));
}

}  // namespace
}  // namespace ingot
