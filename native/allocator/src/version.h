// version.h — the library's version: gpumem_version() and the capture header's "allocator_version".
#pragma once

namespace gpumem {
inline constexpr char kVersion[] = "0.1.0";
}  // namespace gpumem
