// Runs a piece of work in a forked child process, so that a crash, an abort or a hang inside it
// (a third-party library's bug on a hostile input) cannot take the calling process down. The child
// shares the parent's memory copy-on-write, runs `work`, and sends back the bytes it returns through
// a pipe; the parent waits at most `timeout_s`.
//
// For advisory work whose failure the caller can live with: ONNX's shape inference on a downloaded
// model (onnx_import.cpp). Not for work that must touch the parent's state: nothing the child
// changes is seen by the parent except the returned bytes.
#pragma once
#include <functional>
#include <optional>
#include <string>

namespace ingot {

struct IsolatedResult {
  bool started = false;              // a child ran (false: no pipe or no fork here)
  std::optional<std::string> bytes;  // what `work` returned; empty when it did not finish
  std::string why;                   // when it did not: "killed by signal 11 (Segmentation fault)", ...
};

// `work` runs in the child only; an exception it throws is reported in `why` with its message.
// Without fork (it failed: EAGAIN, a sandbox), nothing runs and `why` says so.
IsolatedResult run_isolated(const std::function<std::string()>& work, double timeout_s);

}  // namespace ingot
