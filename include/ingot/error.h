// The one error type. Its message names what is at fault: model, node, op, input index, and the
// expected vs actual dtype/shape. Context is added as the error travels up (kernel -> executor ->
// session), so a kernel only says what it knows.
#pragma once
#include <ingot/export.h>
#include <fmt/format.h>

#include <stdexcept>
#include <string>

INGOT_API_BEGIN
namespace ingot {

class Error : public std::runtime_error {
 public:
  explicit Error(std::string message) : std::runtime_error(message), message_(std::move(message)) {}

  // Prefix a piece of context ("model 'm.onnx'", "node 'conv1' (Conv)") once.
  Error& add_context(const std::string& context);
  const char* what() const noexcept override { return full_.empty() ? message_.c_str() : full_.c_str(); }
  const std::string& message() const { return message_; }

 private:
  std::string message_;
  std::string context_;
  std::string full_;
};

template <class... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace ingot
INGOT_API_END

#define INGOT_CHECK(cond, ...)               \
  do {                                       \
    if (!(cond)) ::ingot::fail(__VA_ARGS__); \
  } while (0)
