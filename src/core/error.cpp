#include <ingot/error.h>

namespace ingot {

Error& Error::add_context(const std::string& context) {
  if (context.empty() || context_.find(context) != std::string::npos) return *this;
  context_ = context_.empty() ? context : context + ": " + context_;
  full_ = context_ + ": " + message_;
  return *this;
}

}  // namespace ingot
