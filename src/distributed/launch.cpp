// The launcher (distributed::launch, `ingot launch`; torchrun's job on one host): forks one process
// per rank with torchrun's environment and a fresh rendezvous folder, relays their output line by
// line with a "[rank N]" prefix, and stops the others when one fails.
#include <fcntl.h>
#include <fmt/format.h>
#include <ingot/distributed.h>
#include <ingot/error.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string_view>
#include <thread>

namespace ingot::distributed {
namespace {

volatile sig_atomic_t g_signal = 0;  // SIGINT/SIGTERM received by the launcher: passed on
void remember_signal(int sig) { g_signal = sig; }

struct Child {
  pid_t pid = -1;
  int fds[2] = {-1, -1};        // its stdout and stderr (read ends), -1 once closed
  std::string partial[2];       // an unfinished line of each
  bool exited = false;
  int status = 0;
};

void write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    ssize_t n = ::write(fd, s.data() + done, s.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += size_t(n);
  }
}

// Relays what the child wrote, whole lines with the prefix (the rest kept for later, or flushed at EOF).
void relay(Child& c, int stream, int rank, bool eof) {
  int out = stream == 0 ? STDOUT_FILENO : STDERR_FILENO;
  std::string& buf = c.partial[stream];
  std::string prefix = fmt::format("[rank {}] ", rank);
  size_t start = 0;
  for (size_t nl; (nl = buf.find('\n', start)) != std::string::npos; start = nl + 1)
    write_all(out, prefix + buf.substr(start, nl + 1 - start));
  buf.erase(0, start);
  if (eof && !buf.empty()) {
    write_all(out, prefix + buf + "\n");
    buf.clear();
  }
}

// Each rank's share of the CPUs the launcher may use (contiguous slices), so that each rank's thread
// pool is sized for its share (core/thread_pool.cpp reads the affinity mask) rather than every rank
// running a team as large as the machine. nullopt with fewer CPUs than ranks (left to the scheduler).
std::optional<cpu_set_t> cpu_share(int r, int nproc) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) return std::nullopt;
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
  }
  if (int(cpus.size()) < nproc) return std::nullopt;
  size_t begin = cpus.size() * size_t(r) / size_t(nproc), end = cpus.size() * size_t(r + 1) / size_t(nproc);
  cpu_set_t share;
  CPU_ZERO(&share);
  for (size_t i = begin; i < end; ++i) CPU_SET(cpus[i], &share);
  return share;
}

// What rank r's process starts with: the launcher's environment with torchrun's variables and the
// rendezvous set (built before fork: the child of a threaded process may only make async-signal-safe
// calls until it execs).
std::vector<std::string> rank_environment(int r, int nproc, const std::string& folder) {
  const std::vector<std::pair<std::string, std::string>> set{{"RANK", std::to_string(r)},
                                                             {"LOCAL_RANK", std::to_string(r)},
                                                             {"WORLD_SIZE", std::to_string(nproc)},
                                                             {"LOCAL_WORLD_SIZE", std::to_string(nproc)},
                                                             {"INGOT_RENDEZVOUS", "file://" + folder}};
  std::vector<std::string> env;
  for (char** e = environ; *e; ++e) {
    std::string_view entry(*e);
    bool replaced = false;
    for (const auto& [name, value] : set) replaced = replaced || entry.substr(0, name.size() + 1) == name + "=";
    if (!replaced) env.emplace_back(entry);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

// Starts rank r of `options.nproc`: forks, and execs `args` in the child with the rank's environment,
// its own process group and CPU share, its output on pipes when prefixed. Throws (with nothing left
// open) when a pipe or the fork fails.
void start_rank(Child& c, int r, const LaunchOptions& options, const std::string& folder, const std::vector<char*>& args) {
  int pipes[2][2] = {{-1, -1}, {-1, -1}};
  auto close_pipes = [&] {
    for (auto& p : pipes) {
      for (int fd : p) {
        if (fd >= 0) close(fd);
      }
    }
  };
  if (options.prefix_output) {
    for (auto& p : pipes) {
      if (pipe2(p, O_CLOEXEC) != 0) {
        const int err = errno;
        close_pipes();
        fail("launch: pipe ({})", std::strerror(err));
      }
    }
  }
  std::vector<std::string> env = rank_environment(r, options.nproc, folder);
  std::vector<char*> envp;
  for (std::string& e : env) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::optional<cpu_set_t> share = options.bind_cpus ? cpu_share(r, options.nproc) : std::nullopt;
  const std::string cannot_run = fmt::format("ingot launch: cannot run '{}': ", args[0]);
  const pid_t launcher = getpid();
  c.pid = fork();
  if (c.pid < 0) {
    const int err = errno;
    close_pipes();
    fail("launch: fork ({})", std::strerror(err));
  }
  if (c.pid == 0) {  // async-signal-safe calls only, until exec
    setpgid(0, 0);   // a process group per rank: stopping a rank stops what it started too
    // A launcher that dies without stopping the ranks (SIGKILL, a crash) still stops them: the
    // kernel sends SIGTERM when the forking thread exits (kept across exec); a launcher gone
    // before this line is caught by the check after it.
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != launcher) _exit(1);
    if (share) sched_setaffinity(0, sizeof(*share), &*share);
    signal(SIGINT, SIG_DFL);
    signal(SIGTERM, SIG_DFL);
    if (options.prefix_output) {
      dup2(pipes[0][1], STDOUT_FILENO);
      dup2(pipes[1][1], STDERR_FILENO);
    }
    execvpe(args[0], args.data(), envp.data());
    const char* why = strerror(errno);
    (void)!::write(STDERR_FILENO, cannot_run.data(), cannot_run.size());
    (void)!::write(STDERR_FILENO, why, strlen(why));
    (void)!::write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  setpgid(c.pid, c.pid);  // (also in the child: whichever runs first)
  if (options.prefix_output) {
    close(pipes[0][1]);
    close(pipes[1][1]);
    c.fds[0] = pipes[0][0];
    c.fds[1] = pipes[1][0];
  }
}

int exit_code(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return 1;
}

}  // namespace

int launch(const std::vector<std::string>& argv, const LaunchOptions& options) {
  if (argv.empty()) fail("launch: no command to run");
  if (options.nproc < 1) fail("launch: {} processes", options.nproc);
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = fmt::format("{}/ingot-rendezvous-XXXXXX", tmp && *tmp ? tmp : "/tmp");
  if (!mkdtemp(templ.data())) fail("launch: cannot make a rendezvous folder {} ({})", templ, std::strerror(errno));
  std::string folder = templ;

  struct sigaction sa {}, old_int {}, old_term {};
  sa.sa_handler = remember_signal;
  sigaction(SIGINT, &sa, &old_int);
  sigaction(SIGTERM, &sa, &old_term);
  g_signal = 0;

  std::vector<Child> children(size_t(options.nproc));
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  // Restores the signal handlers and removes the rendezvous folder (at the end, or on a throw).
  auto restore = [&] {
    sigaction(SIGINT, &old_int, nullptr);
    sigaction(SIGTERM, &old_term, nullptr);
    std::error_code ec;
    std::filesystem::remove_all(folder, ec);
  };
  try {
    for (int r = 0; r < options.nproc; ++r) start_rank(children[size_t(r)], r, options, folder, args);
  } catch (...) {  // part-way: the ranks already started are stopped, not left running
    for (Child& c : children) {
      if (c.pid <= 0) continue;
      kill(-c.pid, SIGKILL);
      waitpid(c.pid, &c.status, 0);
      for (int fd : c.fds) {
        if (fd >= 0) close(fd);
      }
    }
    restore();
    throw;
  }

  int result = 0;
  bool stopping = false;
  auto stop_all = [&](int sig) {
    for (Child& c : children) {
      if (!c.exited) kill(-c.pid, sig);
    }
  };
  auto stop_started = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> exited_at;
  for (;;) {
    // Output first, then exits: a child's last lines are relayed before its status is looked at.
    std::vector<pollfd> fds;
    std::vector<std::pair<size_t, int>> owners;
    for (size_t r = 0; r < children.size(); ++r) {
      for (int s = 0; s < 2; ++s) {
        if (children[r].fds[s] >= 0) {
          fds.push_back({children[r].fds[s], POLLIN, 0});
          owners.emplace_back(r, s);
        }
      }
    }
    if (!fds.empty()) poll(fds.data(), fds.size(), 50);
    else std::this_thread::sleep_for(std::chrono::milliseconds(20));
    for (size_t i = 0; i < fds.size(); ++i) {
      if (!(fds[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
      auto [r, s] = owners[i];
      Child& c = children[r];
      char buf[65536];
      ssize_t n = read(c.fds[s], buf, sizeof buf);
      if (n > 0) {
        c.partial[s].append(buf, size_t(n));
        relay(c, s, int(r), false);
      } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
        relay(c, s, int(r), true);
        close(c.fds[s]);
        c.fds[s] = -1;
      }
    }
    for (size_t r = 0; r < children.size(); ++r) {
      Child& c = children[r];
      if (c.exited) continue;
      if (waitpid(c.pid, &c.status, WNOHANG) != c.pid) continue;
      c.exited = true;
      int code = exit_code(c.status);
      if (code != 0 && result == 0) {
        result = code;
        if (!stopping) {
          std::string msg = fmt::format("ingot launch: rank {} exited with status {}; stopping the other ranks\n", r, code);
          write_all(STDERR_FILENO, msg);
        }
      }
    }
    if (g_signal && !stopping) {
      stopping = true;
      stop_all(g_signal);
      if (result == 0) result = 128 + g_signal;
      stop_started = std::chrono::steady_clock::now();
    }
    if (result != 0 && !stopping) {
      stopping = true;
      stop_all(SIGTERM);
      stop_started = std::chrono::steady_clock::now();
    }
    if (stopping && std::chrono::steady_clock::now() - stop_started > std::chrono::seconds(10)) stop_all(SIGKILL);
    bool all_exited = true, all_closed = true;
    for (const Child& c : children) {
      all_exited = all_exited && c.exited;
      all_closed = all_closed && c.fds[0] < 0 && c.fds[1] < 0;
    }
    if (all_exited && !all_closed) {
      // A process the ranks left behind may hold their output open: relay it for a while, not forever.
      if (!exited_at) exited_at = std::chrono::steady_clock::now();
      if (std::chrono::steady_clock::now() - *exited_at > std::chrono::seconds(2)) {
        for (size_t r = 0; r < children.size(); ++r) {
          for (int s = 0; s < 2; ++s) {
            if (children[r].fds[s] < 0) continue;
            relay(children[r], s, int(r), true);
            close(children[r].fds[s]);
            children[r].fds[s] = -1;
          }
        }
        all_closed = true;
      }
    }
    if (all_exited && all_closed) break;
  }
  restore();
  return result;
}

std::optional<int> relaunch_as_ranks(int argc, char** argv, int nproc) {
  if (nproc <= 1 || launched()) return std::nullopt;
  std::vector<std::string> args{"/proc/self/exe"};  // this program, wherever it was found
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return launch(args, {.nproc = nproc});
}

}  // namespace ingot::distributed
