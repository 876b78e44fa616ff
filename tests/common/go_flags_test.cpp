#include "common/go_flags.hpp"

#include <gtest/gtest.h>

namespace hami::goflags {
namespace {

using Args = std::vector<std::string>;

TEST(GoFlags, SingleDashLongNamesBecomeDoubleDash) {
  EXPECT_EQ(normalize({"scheduler", "-v=4", "-debug", "-config-file=/c.yaml", "-http_bind", "x"}),
            (Args{"scheduler", "--v=4", "--debug", "--config-file=/c.yaml", "--http_bind", "x"}));
}

TEST(GoFlags, ShortOptionsValuesAndOperandsStay) {
  EXPECT_EQ(normalize({"p", "-v", "4", "-v4", "-h", "--v=4", "--debug=true", "-1", "-", "x=-y"}),
            (Args{"p", "-v", "4", "-v4", "-h", "--v=4", "--debug=true", "-1", "-", "x=-y"}));
  EXPECT_EQ(normalize({"-prog", "--", "-v=4", "-debug"}), (Args{"-prog", "--", "-v=4", "-debug"}));
}

TEST(GoFlags, ArgvKeepsTheRewrittenStrings) {
  const char* argv[] = {"prog", "-v=5", "--x"};
  Argv a(3, argv);
  ASSERT_EQ(a.argc(), 3);
  EXPECT_STREQ(a.argv()[0], "prog");
  EXPECT_STREQ(a.argv()[1], "--v=5");
  EXPECT_STREQ(a.argv()[2], "--x");
}

TEST(GoFlags, KlogVerbosityMapsToInfoThenDebug) {
  EXPECT_EQ(klog_level(0), log::Level::kInfo);
  EXPECT_EQ(klog_level(3), log::Level::kInfo);
  EXPECT_EQ(klog_level(4), log::Level::kDebug);
  EXPECT_EQ(klog_level(10), log::Level::kDebug);
  EXPECT_EQ(most_verbose(log::Level::kError, log::Level::kInfo), log::Level::kInfo);
  EXPECT_EQ(most_verbose(log::Level::kDebug, log::Level::kInfo), log::Level::kDebug);
}

TEST(GoFlags, StringMapAsPflag) {
  auto m = parse_string_map("gpu=on,zone=a=b,gpu=off,empty=");
  ASSERT_TRUE(m) << m.error().message;
  ASSERT_EQ(m->size(), 3u);
  EXPECT_EQ((*m)[0], (std::pair<std::string, std::string>{"gpu", "off"}));
  EXPECT_EQ((*m)[1], (std::pair<std::string, std::string>{"zone", "a=b"}));
  EXPECT_EQ((*m)[2], (std::pair<std::string, std::string>{"empty", ""}));
  EXPECT_TRUE(parse_string_map("")->empty());
  for (const char* bad : {"gpu", "=on", "gpu=on,", "a=b,,c=d"}) {
    auto r = parse_string_map(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("key=value"), std::string::npos) << r.error().message;
  }
}

TEST(GoFlags, NotSupportedNamesTheFlag) {
  EXPECT_EQ(not_supported("--mig-strategy=single", "MIG"),
            "--mig-strategy=single: not supported by this build: MIG");
}

}  // namespace
}  // namespace hami::goflags
