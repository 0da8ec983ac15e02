// The host and its tests must bind std::filesystem to libstdc++. A pip PyTorch's libtorch exports
// its own copies of some libstdc++ symbols; when libtorch came before libstdc++ in an executable's
// needed libraries, std::filesystem::remove_all resolved to libtorch's copy and crashed through a
// null pointer (seen with LibTorch 2.11). The top-level CMakeLists puts libstdc++ first.
#include <dlfcn.h>
#include <unistd.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <utility>
#include <fstream>
#include <string>

namespace {

namespace fs = std::filesystem;

// The library that defines the function at `address`.
std::string library_of(const void* address) {
  Dl_info info{};
  if (::dladdr(address, &info) == 0 || !info.dli_fname) return "?";
  return info.dli_fname;
}

template <typename F>
const void* address_of(F* f) {  // a function's address as data (what dladdr takes)
  return reinterpret_cast<const void*>(reinterpret_cast<std::uintptr_t>(f));
}

// What this binary's own calls bind to: in a position-independent executable a function's address
// is the definition its reference was bound to: libstdc++.so, or where a toolchain links libstdc++
// statically (the GPU machine's GCC does) the copy in this binary or libprivdiff_sdk — never LibTorch.
// (A plain dlsym lookup is not the same question: libtorch's copies may come first in its order.)
TEST(LinkOrder, StdFilesystemBindsToLibstdcxx) {
  using RemoveAll = std::uintmax_t(const fs::path&);
  using RemoveAllNoThrow = std::uintmax_t(const fs::path&, std::error_code&);
  using CreateDirectories = bool(const fs::path&);
  using Status = fs::file_status(const fs::path&);
  const std::pair<const char*, const void*> functions[] = {
      {"remove_all", address_of(static_cast<RemoveAll*>(&fs::remove_all))},
      {"remove_all (error_code)", address_of(static_cast<RemoveAllNoThrow*>(&fs::remove_all))},
      {"create_directories", address_of(static_cast<CreateDirectories*>(&fs::create_directories))},
      {"status", address_of(static_cast<Status*>(&fs::status))},
  };
  for (const auto& [name, address] : functions) {
    const std::string file = fs::path(library_of(address)).filename().string();
    const bool torch = file.rfind("libtorch", 0) == 0 || file.rfind("libc10", 0) == 0;
    EXPECT_FALSE(torch) << "std::filesystem::" << name << " binds to LibTorch's copy in " << file;
  }
}

TEST(LinkOrder, RemoveAllWorks) {  // what crashed: a directory tree made and removed
  const fs::path root = fs::temp_directory_path() / ("privdiff-link-order-" + std::to_string(::getpid()));
  fs::create_directories(root / "a" / "b");
  std::ofstream(root / "a" / "b" / "file") << "x";
  EXPECT_EQ(fs::remove_all(root), 4u);
  EXPECT_FALSE(fs::exists(root));
}

}  // namespace
