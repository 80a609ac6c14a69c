{
  "targets": [
    {
      "target_name": "gpumem_addon",
      "sources": [
        "native/addon/src/addon.cpp",
        "native/addon/src/aggregate.cpp",
        "native/addon/src/capture_decoder.cpp",
        "native/addon/src/categories.cpp",
        "native/addon/src/export_pickle.cpp",
        "native/addon/src/model.cpp",
        "native/addon/src/pickle_reader.cpp",
        "native/addon/src/replay.cpp",
        "native/addon/src/snapshot_import.cpp"
      ],
      "include_dirs": [
        "<!(node -p \"require('node-addon-api').include_dir\")",
        "native/format"
      ],
      "defines": ["NAPI_VERSION=8", "NAPI_CPP_EXCEPTIONS"],
      "cflags!": ["-fno-exceptions"],
      "cflags_cc!": ["-fno-exceptions", "-fno-rtti"],
      "cflags_cc": ["-std=c++17", "-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
      "xcode_settings": { "GCC_ENABLE_CPP_EXCEPTIONS": "YES", "CLANG_CXX_LANGUAGE_STANDARD": "c++17" }
    }
  ]
}
