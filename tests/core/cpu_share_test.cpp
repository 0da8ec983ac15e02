// [run] threads = 0 uses the cores other processes leave idle (core/util/cpu_share.hpp): with another
// process busy on this machine, a run allowed 2 threads drops to 1 and says why. (Whether an idle
// machine gives every core back cannot be tested here: ctest runs other tests beside this one.)
#include "util/cpu_share.hpp"

#include <gtest/gtest.h>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

using namespace privdiff::core;

TEST(CpuShare, AnotherBusyProcessTakesAThreadAway) {
  CpuShare share(2);
  ASSERT_EQ(share.threads(), 2);
  const pid_t busy = ::fork();
  ASSERT_GE(busy, 0);
  if (busy == 0) {  // the other process: one core busy for 1.5 s
    const auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(1500);
    volatile unsigned spin = 0;
    while (std::chrono::steady_clock::now() < end) spin = spin + 1;
    ::_exit(0);
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(1200));  // this process idle meanwhile
  const auto change = share.rechoose(std::chrono::milliseconds(100));
  ::waitpid(busy, nullptr, 0);
  ASSERT_TRUE(change.has_value()) << "no change with another process busy";
  EXPECT_EQ(change->first, 1);
  EXPECT_EQ(share.threads(), 1);
  EXPECT_NE(change->second.find("privdiff now uses 1 thread"), std::string::npos) << change->second;
  EXPECT_NE(change->second.find("[run] threads = N"), std::string::npos) << change->second;
  // Too soon to measure again: nothing changes.
  EXPECT_FALSE(share.rechoose(std::chrono::seconds(60)).has_value());
}
