#include "region/process_identity.hpp"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace hami::region {
namespace {

constexpr const char* kStat =
    "1234 (bash) S 1 1234 1234 34816 1234 4194560 1039 0 0 0 1 0 0 0 20 0 1 0 987654 8527872 "
    "1120 18446744073709551615 1 1 0 0 0 0 65536 3670020 1266777851 0 0 0 17 1 0 0 0 0 0\n";

TEST(ProcStat, ParsesStateAndStartTime) {
  auto st = parse_proc_stat(kStat);
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->state, 'S');
  EXPECT_EQ(st->start_time, 987654u);
}

TEST(ProcStat, CommandWithSpacesAndParentheses) {
  auto st = parse_proc_stat("77 (a) b (c) )) Z 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 555 x");
  ASSERT_TRUE(st) << st.error().message;
  EXPECT_EQ(st->state, 'Z');
  EXPECT_EQ(st->start_time, 555u);
}

TEST(ProcStat, Malformed) {
  EXPECT_FALSE(parse_proc_stat(""));
  EXPECT_FALSE(parse_proc_stat("1 bash S 1"));
  EXPECT_FALSE(parse_proc_stat("1 (bash) S 1 2 3"));
  EXPECT_FALSE(parse_proc_stat("1 (b) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 notanumber"));
  EXPECT_FALSE(parse_proc_stat("1 (b) S 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 -5"));
}

TEST(ProcessIdentity, SelfMatchesProc) {
  auto me = self_identity();
  ASSERT_TRUE(me);
  EXPECT_EQ(me->pid, ::getpid());
  auto again = read_process_identity(::getpid());
  ASSERT_TRUE(again);
  EXPECT_EQ(*again, *me);
  EXPECT_GT(me->start_time, 0u);
}

TEST(ProcessIdentity, ChildStartsLaterAndZombiesAreDead) {
  int p[2];
  ASSERT_EQ(::pipe(p), 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(p[1]);
    char c;
    (void)!::read(p[0], &c, 1);
    _exit(0);
  }
  ::close(p[0]);
  auto me = self_identity();
  auto it = read_process_identity(child);
  ASSERT_TRUE(it) << it.error().message;
  EXPECT_GE(it->start_time, me->start_time);
  EXPECT_TRUE(process_alive(child));
  ::close(p[1]);  // let it exit; do not reap yet
  for (int i = 0; i < 2000 && process_alive(child); ++i)
    ::usleep(1000);
  EXPECT_FALSE(process_alive(child)) << "a zombie counts as dead";
  ::waitpid(child, nullptr, 0);
  EXPECT_FALSE(process_alive(child));
  EXPECT_FALSE(read_process_identity(child));
  EXPECT_FALSE(process_alive(0));
  EXPECT_FALSE(process_alive(-3));
}

}  // namespace
}  // namespace hami::region
