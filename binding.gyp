{
  "targets": [
    {
      "target_name": "gpumem_addon",
      "sources": [
        "native/addon/src/addon.cpp",
        "native/addon/src/alloc_conf.cpp",
        "native/addon/src/aggregate.cpp",
        "native/addon/src/capture_decoder.cpp",
        "native/addon/src/capture_overview.cpp",
        "native/addon/src/categories.cpp",
        "native/addon/src/export_pickle.cpp",
        "native/addon/src/model.cpp",
        "native/addon/src/overview.cpp",
        "native/addon/src/pickle_reader.cpp",
        "native/addon/src/range_open.cpp",
        "native/addon/src/replay.cpp",
        "native/addon/src/samples.cpp",
        "native/addon/src/snapshot_import.cpp",
        "native/addon/src/policy_replay.cpp",
        "native/allocator/src/device_allocator.cc",
        "native/allocator/src/invariants.cc",
        "native/allocator/src/oom_message.cc",
        "native/allocator/src/restore.cc",
        "native/allocator/src/sim_backend.cc",
        "native/allocator/src/stats.cc",
        "native/allocator/src/what_if.cc",
        "native/allocator/src/pytorch_settings.cc",
        "native/floor/floor_shims.cc"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "native/format",
        "native/allocator/src"
      ],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc": ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter", "-ffp-contract=off",
                    "-include", "<(module_root_dir)/native/floor/floor.h"],
      "libraries": ["-Wl,--push-state,--no-as-needed", "-l:libpthread.so.0", "-l:libdl.so.2", "-Wl,--pop-state"],
      "xcode_settings": { "GCC_ENABLE_CPP_EXCEPTIONS": "YES", "CLANG_CXX_LANGUAGE_STANDARD": "c++17" }
    }
  ]
}
