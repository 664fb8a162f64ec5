// load_extension: an extension's sources compiled just in time with the system compiler and nvcc,
// cached by a hash of everything that decides the result, then loaded (extension/registry.h).
//
// What PyTorch's cpp_extension.load gets wrong and this does not (docs/CUSTOM_OPS.md):
//  - an unchanged extension is never recompiled: the key is computed from the inputs (sources, the
//    headers beside them, Ingot's extension headers, flags, compiler identity, Ingot's version, the
//    GPU architecture), and a finished build is the library file itself, put in place by rename();
//  - the lock is flock(2) on a file: the kernel drops it when its holder dies, so a killed build never
//    leaves later loads waiting;
//  - at most `jobs` compilers run at once;
//  - the cache must belong to the user and not be writable by group or others.
#include <dlfcn.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

#include "core/backend.h"
#include "core/strings.h"
#include "extension/registry.h"

#ifndef INGOT_VERSION
#define INGOT_VERSION "0.1.0"
#endif
#ifndef INGOT_SOURCE_INCLUDE_DIR
#define INGOT_SOURCE_INCLUDE_DIR ""
#endif
#ifndef INGOT_INSTALL_INCLUDE_DIR
#define INGOT_INSTALL_INCLUDE_DIR ""
#endif

extern char** environ;

namespace ingot {
namespace {

namespace fs = std::filesystem;

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

std::string read_text(const fs::path& p, const std::string& what) {
  std::ifstream in(p, std::ios::binary);
  if (!in) fail("{} '{}' cannot be read ({})", what, p.string(), std::strerror(errno));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// An executable on PATH (or the path itself when it has a slash); "" when not found.
std::string find_program(const std::string& name) {
  if (name.find('/') != std::string::npos) return access(name.c_str(), X_OK) == 0 ? name : "";
  std::stringstream path(env("PATH"));
  std::string dir;
  while (std::getline(path, dir, ':')) {
    const fs::path p = fs::path(dir.empty() ? "." : dir) / name;
    if (access(p.c_str(), X_OK) == 0) return p.string();
  }
  return "";
}

std::string find_nvcc() {
  for (const std::string& home : {env("CUDA_HOME"), env("CUDA_PATH")})
    if (!home.empty() && access((home + "/bin/nvcc").c_str(), X_OK) == 0) return home + "/bin/nvcc";
  if (std::string p = find_program("nvcc"); !p.empty()) return p;
  return access("/usr/local/cuda/bin/nvcc", X_OK) == 0 ? "/usr/local/cuda/bin/nvcc" : "";
}

// A compiler's identity for the cache key without running it: its resolved path, size and time.
std::string program_identity(const std::string& program) {
  std::error_code ec;
  const fs::path real = fs::canonical(program, ec);
  struct stat st{};
  if (ec || stat(real.c_str(), &st) != 0) return program;
  return fmt::format("{}:{}:{}", real.string(), st.st_size, st.st_mtim.tv_sec);
}

// The folder that holds <ingot/extension.h>: $INGOT_INCLUDE_DIR, the include folder of the tree
// libingot.so was installed into (<prefix>/lib/../include, wherever the prefix is), the one beside
// it (the Python wheel's ingot/include), this build's source tree, the configured install prefix.
std::string include_dir() {
  std::string installed, beside;
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&include_dir), &info) && info.dli_fname) {
    const fs::path lib_dir = fs::path(info.dli_fname).parent_path();
    installed = (lib_dir.parent_path() / "include").string();
    beside = (lib_dir / "include").string();
  }
  for (const std::string& d : {env("INGOT_INCLUDE_DIR"), installed, beside, std::string(INGOT_SOURCE_INCLUDE_DIR),
                               std::string(INGOT_INSTALL_INCLUDE_DIR)})
    if (!d.empty() && fs::exists(fs::path(d) / "ingot" / "extension.h")) return d;
  fail("Ingot's extension headers (ingot/extension.h) were not found: set INGOT_INCLUDE_DIR to the folder that "
       "holds ingot/");
}

// Creates `dir` (0700) when missing; refuses one that is not the user's or is writable by others.
void secure_directory(const fs::path& dir) {
  std::error_code ec;
  if (!fs::exists(dir)) {
    fs::create_directories(dir, ec);
    if (ec) fail("cannot create the extension cache '{}': {}", dir.string(), ec.message());
    chmod(dir.c_str(), 0700);
  }
  struct stat st{};
  if (stat(dir.c_str(), &st) != 0) fail("extension cache '{}': {}", dir.string(), std::strerror(errno));
  if (!S_ISDIR(st.st_mode)) fail("extension cache '{}' is not a directory", dir.string());
  if (st.st_uid != geteuid())
    fail("refusing the extension cache '{}': it belongs to user {}, not to this user ({}); code in it could be "
         "replaced by its owner", dir.string(), st.st_uid, geteuid());
  if (st.st_mode & (S_IWGRP | S_IWOTH))
    fail("refusing the extension cache '{}': it is writable by {} (mode {:04o}), so others could replace the code "
         "this process would run (chmod go-w '{}')", dir.string(), (st.st_mode & S_IWOTH) ? "everyone" : "its group",
         st.st_mode & 07777, dir.string());
}

fs::path cache_root(const ExtensionOptions& o) {
  if (!o.build_directory.empty()) return o.build_directory;
  if (std::string d = env("INGOT_EXTENSIONS_DIR"); !d.empty()) return d;
  if (std::string d = env("XDG_CACHE_HOME"); !d.empty()) return fs::path(d) / "ingot" / "extensions";
  std::string home = env("HOME");
  if (home.empty()) fail("no cache for extensions: HOME is not set (give build_directory or INGOT_EXTENSIONS_DIR)");
  return fs::path(home) / ".cache" / "ingot" / "extensions";
}

int job_count(const ExtensionOptions& o) {
  if (o.jobs > 0) return o.jobs;
  for (const char* var : {"INGOT_EXTENSION_JOBS", "MAX_JOBS"}) {
    if (const int n = std::atoi(env(var).c_str()); n > 0) return n;
  }
  return int(std::clamp<unsigned>(std::thread::hardware_concurrency(), 1, 4));
}

std::string cuda_arch(const ExtensionOptions& o) {
  std::string arch = o.cuda_arch.empty() ? env("INGOT_EXTENSION_CUDA_ARCH") : o.cuda_arch;
  if (arch.empty())
    if (Backend* cuda = find_backend(DeviceType::CUDA)) arch = cuda->arch(0);
  if (arch.empty()) arch = "sm_90";
  if (arch.rfind("sm_", 0) != 0 || arch.size() < 5 || !std::all_of(arch.begin() + 3, arch.end(), ::isalnum))
    fail("CUDA architecture '{}': expected a name like sm_90", arch);
  return arch;
}

// The lock that serializes builds of one extension across processes: flock, which the kernel
// releases when its holder exits or is killed, so no stale lock outlives a build.
class BuildLock {
 public:
  BuildLock(const fs::path& file, const std::function<void(const std::string&)>& log) {
    fd_ = open(file.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd_ < 0) fail("cannot open the build lock '{}': {}", file.string(), std::strerror(errno));
    if (flock(fd_, LOCK_EX | LOCK_NB) != 0) {
      char holder[32] = {};
      (void)!pread(fd_, holder, sizeof holder - 1, 0);
      log(fmt::format("waiting for process {} that is building it (lock {})", std::string(holder).empty() ? "?" : holder,
                      file.string()));
      while (flock(fd_, LOCK_EX) != 0) {
        if (errno != EINTR) fail("build lock '{}': {}", file.string(), std::strerror(errno));
      }
    }
    const std::string pid = std::to_string(getpid());
    (void)!ftruncate(fd_, 0);
    (void)!pwrite(fd_, pid.data(), pid.size(), 0);
  }
  ~BuildLock() { close(fd_); }  // closing drops the lock
  BuildLock(const BuildLock&) = delete;
  BuildLock& operator=(const BuildLock&) = delete;

 private:
  int fd_ = -1;
};

struct Job {
  std::vector<std::string> argv;
  fs::path log;
  std::string source;  // what it compiles ("" for the link)
};

std::string command_line(const std::vector<std::string>& argv) {
  return join(argv, " ", [](const std::string& a) {
    return a.find_first_of(" \t\"'") == std::string::npos ? a : "'" + a + "'";
  });
}

pid_t spawn(const Job& job) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, job.log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, 1, 2);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  std::vector<char*> argv;
  for (const std::string& a : job.argv) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  pid_t pid = 0;
  const int rc = posix_spawn(&pid, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) fail("cannot run {}: {}", job.argv[0], std::strerror(rc));
  return pid;
}

int wait_for(pid_t pid) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
}

// Runs the jobs, at most `parallel` at once; the first failure is raised with the compiler's output
// (after the jobs in flight finish).
void run_jobs(const std::vector<Job>& jobs, int parallel, const std::string& name,
              const std::function<void(const std::string&)>& log) {
  std::deque<std::pair<pid_t, const Job*>> running;
  std::string failure;
  auto reap = [&] {
    auto [pid, job] = running.front();
    running.pop_front();
    const int rc = wait_for(pid);
    if (rc != 0 && failure.empty()) {
      std::string out;
      try {
        out = read_text(job->log, "compiler log");
      } catch (const Error&) {
      }
      while (!out.empty() && (out.back() == '\n' || out.back() == ' ')) out.pop_back();
      failure = fmt::format("extension '{}': {} failed (exit code {}):\n{}", name,
                            job->source.empty() ? "linking" : "compiling " + job->source, rc,
                            out.empty() ? command_line(job->argv) : out);
    }
  };
  for (const Job& job : jobs) {
    if (!failure.empty()) break;
    while (int(running.size()) >= parallel) reap();
    if (!failure.empty()) break;
    log(command_line(job.argv));
    running.emplace_back(spawn(job), &job);
  }
  while (!running.empty()) reap();
  if (!failure.empty()) throw Error(failure);
}

// What this process loaded by cache key: a second load_extension of the same build is a lookup.
std::mutex g_loaded_mutex;
std::map<std::string, ExtensionInfo> g_loaded_by_key;  // cache folder | key -> what the load returned

}  // namespace

ExtensionInfo load_extension(const std::string& name, const std::vector<std::string>& sources,
                             const ExtensionOptions& options) {
  const auto start = std::chrono::steady_clock::now();
  auto seconds = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  std::function<void(const std::string&)> log = options.log;
  if (!log) log = [&](const std::string& line) {
    if (options.verbose) fmt::print(stderr, "ingot: extension '{}': {}\n", name, line);
  };
  try {
    if (name.empty() || !(std::isalpha(uint8_t(name[0])) || name[0] == '_') ||
        !std::all_of(name.begin(), name.end(), [](char c) { return std::isalnum(uint8_t(c)) || c == '_'; }))
      fail("the name must be letters, digits and '_', starting with a letter");
    if (sources.empty()) fail("no sources");

    // ---- everything that decides the build goes into the key
    const std::string inc = include_dir();
    std::string cxx = env("CXX").empty() ? "c++" : env("CXX");
    std::vector<fs::path> host_sources, cuda_sources;
    for (const std::string& s : sources) {
      const fs::path p = fs::absolute(s);
      const std::string ext = p.extension().string();
      if (ext == ".cu") {
        cuda_sources.push_back(p);
      } else if (ext == ".cpp" || ext == ".cc" || ext == ".cxx" || ext == ".c") {
        host_sources.push_back(p);
      } else {
        fail("source '{}': expected .cpp, .cc, .cxx, .c or .cu", s);
      }
    }
    const std::string nvcc = cuda_sources.empty() ? "" : find_nvcc();
    if (!cuda_sources.empty() && nvcc.empty())
      fail("source '{}' needs nvcc, which was not found (put the CUDA toolkit's bin on PATH or set CUDA_HOME)",
           cuda_sources[0].string());
    const std::string cxx_path = find_program(cxx);
    if (cxx_path.empty()) fail("the C++ compiler '{}' was not found (set CXX)", cxx);
    const std::string arch = cuda_sources.empty() ? "" : cuda_arch(options);

    XXH64_state_t* h = XXH64_createState();
    XXH64_reset(h, 0);
    auto feed = [&](const std::string& s) {
      XXH64_update(h, s.data(), s.size());
      XXH64_update(h, "\0", 1);
    };
    feed(fmt::format("ingot {} abi {} {}", INGOT_VERSION, INGOT_EXTENSION_ABI_VERSION, name));
    std::set<fs::path> headers;
    for (const std::vector<fs::path>* list : {&host_sources, &cuda_sources}) {
      for (const fs::path& p : *list) {
        feed(p.string());
        feed(read_text(p, "source"));
        // Headers beside the sources, which they may include.
        std::error_code ec;
        for (const auto& e : fs::directory_iterator(p.parent_path(), ec)) {
          const std::string x = e.path().extension().string();
          if (x == ".h" || x == ".hpp" || x == ".cuh" || x == ".inl") headers.insert(e.path());
        }
      }
    }
    for (const fs::path& p : headers) feed(p.string()), feed(read_text(p, "header"));
    for (const char* hdr : {"extension.h", "extension_abi.h"}) feed(read_text(fs::path(inc) / "ingot" / hdr, "Ingot header"));
    for (const auto* flags : {&options.extra_cflags, &options.extra_cuda_cflags, &options.extra_ldflags, &options.extra_include_paths}) {
      feed(std::to_string(flags->size()));
      for (const std::string& f : *flags) feed(f);
    }
    feed(program_identity(cxx_path));
    if (!nvcc.empty()) feed(program_identity(nvcc)), feed(arch);
    const std::string key = fmt::format("{:016x}", XXH64_digest(h));
    XXH64_freeState(h);

    // ---- the cache: <root>/<name>-<key>/lib<name>.so, one lock per name
    const fs::path root = cache_root(options);
    const std::string loaded_key = root.string() + "|" + key;
    {
      std::lock_guard lock(g_loaded_mutex);
      if (auto it = g_loaded_by_key.find(loaded_key); it != g_loaded_by_key.end()) {
        ExtensionInfo info = it->second;  // loaded already: no file read, hash or dlopen
        info.compiled = false;
        info.seconds = seconds();
        return info;
      }
    }
    secure_directory(root);
    const fs::path dir = root / fmt::format("{}-{}", name, key);
    const fs::path library = dir / fmt::format("lib{}.so", name);
    bool compiled = false;
    if (!fs::exists(library)) {
      BuildLock lock(root / (name + ".lock"), log);
      if (!fs::exists(library)) {  // another process may have built it while this one waited
        secure_directory(dir);
        log(fmt::format("building in {} ({} compile jobs at most)", dir.string(), job_count(options)));
        std::vector<std::string> includes{"-I" + inc};
        for (const std::string& p : options.extra_include_paths) includes.push_back("-I" + fs::absolute(p).string());
        if (!nvcc.empty()) includes.push_back("-I" + (fs::path(nvcc).parent_path().parent_path() / "include").string());
        std::vector<Job> compile;
        std::vector<std::string> objects;
        for (const fs::path& src : host_sources) {
          const std::string obj = (dir / (src.filename().string() + ".o")).string();
          std::vector<std::string> argv{cxx_path, "-O3", "-fPIC", "-fvisibility=hidden", "-c", src.string(), "-o", obj};
          if (src.extension() != ".c") argv.insert(argv.begin() + 1, "-std=c++17");
          argv.insert(argv.end(), includes.begin(), includes.end());
          argv.insert(argv.end(), options.extra_cflags.begin(), options.extra_cflags.end());
          compile.push_back({argv, dir / (src.filename().string() + ".log"), src.filename().string()});
          objects.push_back(obj);
        }
        const std::string cc = arch.empty() ? "" : arch.substr(3);
        for (const fs::path& src : cuda_sources) {
          const std::string obj = (dir / (src.filename().string() + ".o")).string();
          std::vector<std::string> argv{nvcc, "-std=c++17", "-O3", "-Xcompiler", "-fPIC,-fvisibility=hidden",
                                        fmt::format("-gencode=arch=compute_{},code=[sm_{},compute_{}]", cc, cc, cc),
                                        "-c", src.string(), "-o", obj};
          argv.insert(argv.end(), includes.begin(), includes.end());
          argv.insert(argv.end(), options.extra_cuda_cflags.begin(), options.extra_cuda_cflags.end());
          compile.push_back({argv, dir / (src.filename().string() + ".log"), src.filename().string()});
          objects.push_back(obj);
        }
        run_jobs(compile, job_count(options), name, log);
        // Linked to a temporary name and renamed: a library in the cache is always a finished one.
        const fs::path tmp = dir / fmt::format(".lib{}.so.{}", name, getpid());
        std::vector<std::string> link{nvcc.empty() ? cxx_path : nvcc, "-shared", "-o", tmp.string()};
        link.insert(link.end(), objects.begin(), objects.end());
        if (!nvcc.empty()) link.insert(link.end(), {"-cudart", "static"});
        link.insert(link.end(), options.extra_ldflags.begin(), options.extra_ldflags.end());
        run_jobs({Job{link, dir / "link.log", ""}}, 1, name, log);
        std::error_code ec;
        fs::rename(tmp, library, ec);
        if (ec) fail("cannot put the library in place ({}): {}", library.string(), ec.message());
        compiled = true;
      }
    }
    ExtensionInfo info = extension::load_file(library.string(), name).info();
    {
      std::lock_guard lock(g_loaded_mutex);
      g_loaded_by_key[loaded_key] = info;
    }
    info.compiled = compiled;
    info.seconds = seconds();
    log(fmt::format("{} {} ({} ops) in {:.3f} s", compiled ? "built and loaded" : "loaded", library.string(),
                    info.ops.size(), info.seconds));
    return info;
  } catch (Error& e) {
    // Compiler output is the message itself; everything else gets the extension named.
    if (std::string_view(e.message()).rfind("extension '", 0) != 0) e.add_context(fmt::format("extension '{}'", name));
    throw;
  }
}

}  // namespace ingot
