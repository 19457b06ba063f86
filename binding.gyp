{
  "targets": [
    {
      "target_name": "fd_passing",
      "sources": ["src/native/fd-passing.c"],
      "cflags": ["-O2", "-Wall", "-Wextra"],
      "defines": ["NAPI_VERSION=8"]
    }
  ]
}
