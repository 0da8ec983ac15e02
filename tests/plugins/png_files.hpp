#pragma once
// Writes small PNGs for the image-folder tests (stb_image_write, compiled into each test file that
// includes this: its functions are static there).

#include <gtest/gtest.h>
#define STB_IMAGE_WRITE_STATIC
#define STB_IMAGE_WRITE_IMPLEMENTATION
#include <stb/stb_image_write.h>

#include <cstdint>
#include <filesystem>
#include <vector>

namespace privdiff::testing {

/// A w x h image of `channels` channels, every value `value`; its folder is made if need be.
inline void write_png(const std::filesystem::path& file, int w, int h, int channels, std::uint8_t value) {
  std::filesystem::create_directories(file.parent_path());
  std::vector<std::uint8_t> pixels(static_cast<std::size_t>(w * h * channels), value);
  ASSERT_TRUE(stbi_write_png(file.c_str(), w, h, channels, pixels.data(), w * channels));
}

}  // namespace privdiff::testing
