// reuse_freed_host_memory: a freed block of a step's size is handed out again without page faults
// (glibc's defaults return it to the system, and the next step faults every page in again), and the
// user's own allocator settings are left alone.
#include <privdiff/engine/host_allocator.hpp>

#include <gtest/gtest.h>

#include <sys/resource.h>

#include <cstdlib>
#include <string>

using namespace privdiff::sdk::engine;

namespace {

long minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

// Allocates `bytes`, writes one byte per page (volatile: the compiler may not drop the block),
// frees it; returns the page faults this took.
long faults_of_one_use(std::size_t bytes) {
  const long before = minor_faults();
  auto* block = static_cast<volatile char*>(std::malloc(bytes));
  if (!block) throw std::bad_alloc();
  for (std::size_t i = 0; i < bytes; i += 4096) block[i] = 1;
  std::free(const_cast<char*>(block));
  return minor_faults() - before;
}

// Sets an environment variable for one scope.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old, had_ = true;
    setenv(name, value, 1);
  }
  ~ScopedEnv() { had_ ? setenv(name_, old_.c_str(), 1) : unsetenv(name_); }

 private:
  const char* name_;
  std::string old_;
  bool had_ = false;
};

}  // namespace

#if defined(__GLIBC__)
TEST(HostAllocator, AFreedStepSizedBlockIsReusedWithoutPageFaults) {
  if (const char* t = std::getenv("GLIBC_TUNABLES"); t && std::string(t).find("glibc.malloc.") != std::string::npos) {
    GTEST_SKIP() << "GLIBC_TUNABLES sets malloc options here: the allocator is the user's";
  }
  EXPECT_EQ(reuse_freed_host_memory(), "freed memory kept for reuse (mmap threshold 32 MiB, trim threshold 1 GiB)");
  constexpr std::size_t bytes = std::size_t{24} << 20;  // one 64 x 64 x 28 x 28 float activation is 12.8 MB
  const long pages = static_cast<long>(bytes / 4096);
  EXPECT_GT(faults_of_one_use(bytes), pages / 2);  // the first use maps its pages
  for (int use = 0; use < 3; ++use) EXPECT_LT(faults_of_one_use(bytes), pages / 20) << "use " << use + 2;
}

TEST(HostAllocator, LeavesTheUsersSettingsAlone) {
  {
    const ScopedEnv system("PRIVDIFF_SYSTEM_MALLOC", "1");
    EXPECT_EQ(reuse_freed_host_memory(), "system defaults (PRIVDIFF_SYSTEM_MALLOC=1)");
  }
  const ScopedEnv tunables("GLIBC_TUNABLES", "glibc.malloc.arena_max=2");
  EXPECT_EQ(reuse_freed_host_memory(), "system defaults with GLIBC_TUNABLES");
}
#endif
