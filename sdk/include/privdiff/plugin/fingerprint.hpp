#pragma once
/// @file
/// The build fingerprint: everything that must match between the host and a plugin for their C++
/// objects to be interchangeable (compiler family and major version, libstdc++ string ABI, LibTorch
/// major.minor, CPU/CUDA flavour, SDK major.minor). It is a string literal computed from macros in
/// *the including translation unit*, so a plugin's descriptor records the plugin's build and the
/// host compares it with its own.
///
/// Format: `key=value` pairs separated by ';', e.g.
/// `sdk=0.1;compiler=gcc-12;cxx11abi=1;torch=1.13;flavour=cpu`.

#include <privdiff/build_config.hpp>
#include <torch/version.h>  // tiny header: TORCH_VERSION_MAJOR / MINOR only

#define PRIVDIFF_FP_STR2(x) #x
#define PRIVDIFF_FP_STR(x) PRIVDIFF_FP_STR2(x)

#if defined(__clang__)
#define PRIVDIFF_FP_COMPILER "clang-" PRIVDIFF_FP_STR(__clang_major__)
#elif defined(__GNUC__)
#define PRIVDIFF_FP_COMPILER "gcc-" PRIVDIFF_FP_STR(__GNUC__)
#elif defined(_MSC_VER)
#define PRIVDIFF_FP_COMPILER "msvc-" PRIVDIFF_FP_STR(_MSC_VER)
#else
#define PRIVDIFF_FP_COMPILER "unknown"
#endif

#if defined(_GLIBCXX_USE_CXX11_ABI)
#define PRIVDIFF_FP_CXX11ABI PRIVDIFF_FP_STR(_GLIBCXX_USE_CXX11_ABI)
#else
#define PRIVDIFF_FP_CXX11ABI "n/a"
#endif

/// The fingerprint of the translation unit that expands it (a string literal).
#define PRIVDIFF_BUILD_FINGERPRINT                                                        \
  "sdk=" PRIVDIFF_FP_STR(PRIVDIFF_SDK_VERSION_MAJOR) "." PRIVDIFF_FP_STR(                 \
      PRIVDIFF_SDK_VERSION_MINOR) ";compiler=" PRIVDIFF_FP_COMPILER                       \
      ";cxx11abi=" PRIVDIFF_FP_CXX11ABI ";torch=" PRIVDIFF_FP_STR(TORCH_VERSION_MAJOR) "." \
      PRIVDIFF_FP_STR(TORCH_VERSION_MINOR) ";flavour=" PRIVDIFF_TORCH_FLAVOUR
