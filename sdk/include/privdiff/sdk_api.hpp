#pragma once
/// @file
/// Symbol visibility for the SDK. Everything is built with hidden visibility; SDK types that
/// cross library boundaries (interfaces with vtables, exceptions) are marked PRIVDIFF_SDK_API so
/// their typeinfo is unique and `dynamic_cast` / `catch` work between the host and plugins.

#if defined(_WIN32)
#define PRIVDIFF_SDK_API __declspec(dllexport)
#else
#define PRIVDIFF_SDK_API __attribute__((visibility("default")))
#endif
