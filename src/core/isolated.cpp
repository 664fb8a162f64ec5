#include "core/isolated.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <exception>

#include <fmt/format.h>

// Present when a sanitizer runtime is linked (the fuzz build). A fuzzer's death callback writes the
// current input as a crash: the child's deaths are expected, so the child removes it.
extern "C" __attribute__((weak)) void __sanitizer_set_death_callback(void (*)(void));

namespace ingot {
namespace {

bool write_all(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    const ssize_t n = ::write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= size_t(n);
  }
  return true;
}

// The child's whole life: its message is one status byte ('o' result, 'e' exception), a 64-bit
// length and the bytes. It leaves with _exit: no atexit handlers, static destructors or stdio
// flushes of the parent's state run twice.
[[noreturn]] void child_main(int fd, const std::function<std::string()>& work) {
  // A crash must end the child, not run the parent's handlers (a fuzzer's, a sanitizer's report
  // path that writes files): the default action for every deadly signal.
  for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS, SIGALRM}) std::signal(sig, SIG_DFL);
  if (__sanitizer_set_death_callback) __sanitizer_set_death_callback(nullptr);
  char status = 'o';
  std::string payload;
  try {
    payload = work();
  } catch (const std::exception& e) {
    status = 'e';
    payload = e.what();
  } catch (...) {
    status = 'e';
    payload = "an exception that is not a std::exception";
  }
  const uint64_t size = payload.size();
  const bool sent = write_all(fd, &status, 1) && write_all(fd, &size, sizeof size) && write_all(fd, payload.data(), payload.size());
  ::_exit(sent ? 0 : 3);
}

std::string describe_status(int status) {
  if (WIFSIGNALED(status)) {
    const int sig = WTERMSIG(status);
    const char* name = ::strsignal(sig);
    return fmt::format("killed by signal {} ({})", sig, name ? name : "unknown");
  }
  if (WIFEXITED(status)) return fmt::format("exited with status {} without a result", WEXITSTATUS(status));
  return "ended without a result";
}

}  // namespace

IsolatedResult run_isolated(const std::function<std::string()>& work, double timeout_s) {
  IsolatedResult result;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    result.why = fmt::format("could not create a pipe: {}", std::strerror(errno));
    return result;
  }
  const pid_t pid = ::fork();
  if (pid < 0) {
    result.why = fmt::format("could not fork: {}", std::strerror(errno));
    ::close(fds[0]);
    ::close(fds[1]);
    return result;
  }
  if (pid == 0) {
    ::close(fds[0]);
    child_main(fds[1], work);
  }
  ::close(fds[1]);
  result.started = true;

  // Read until the child closes its end (it finished or died) or the time is up.
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_s));
  std::string message;
  bool timed_out = false;
  char buffer[1 << 16];
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    const int ready = ::poll(&p, 1, int(std::min<int64_t>(left, 1000)));
    if (ready < 0 && errno != EINTR) break;
    if (ready <= 0) continue;
    const ssize_t n = ::read(fds[0], buffer, sizeof buffer);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    message.append(buffer, size_t(n));
  }
  ::close(fds[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int status = 0;
  pid_t waited;
  do {
    waited = ::waitpid(pid, &status, 0);
  } while (waited < 0 && errno == EINTR);

  constexpr size_t header = 1 + sizeof(uint64_t);
  uint64_t size = 0;
  if (message.size() >= header) std::memcpy(&size, message.data() + 1, sizeof size);
  const bool complete = message.size() >= header && message.size() - header == size;
  if (timed_out) {
    result.why = fmt::format("did not finish within {:g} s", timeout_s);
  } else if (complete && message[0] == 'o') {
    result.bytes = message.substr(header);
  } else if (complete && message[0] == 'e') {
    result.why = "failed: " + message.substr(header);
  } else {
    result.why = waited == pid ? describe_status(status) : "ended without a result";
  }
  return result;
}

}  // namespace ingot
