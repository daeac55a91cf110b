#include "subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>

extern char** environ;

namespace braid::doctor {

namespace {

constexpr size_t kOutputLimit = 256 * 1024;

bool executable(const std::string& path) { return ::access(path.c_str(), X_OK) == 0; }

}  // namespace

std::string findProgram(const std::string& name, const std::vector<std::string>& extraDirs) {
  if (name.find('/') != std::string::npos) return executable(name) ? name : std::string();
  std::vector<std::string> dirs;
  if (const char* path = std::getenv("PATH")) {
    std::string p = path;
    size_t start = 0;
    while (start <= p.size()) {
      size_t colon = p.find(':', start);
      if (colon == std::string::npos) colon = p.size();
      dirs.push_back(colon > start ? p.substr(start, colon - start) : ".");
      start = colon + 1;
    }
  }
  dirs.insert(dirs.end(), extraDirs.begin(), extraDirs.end());
  for (const auto& d : dirs) {
    std::string candidate = d + "/" + name;
    if (executable(candidate)) return candidate;
  }
  return {};
}

CommandResult runCommand(const std::vector<std::string>& argv, double timeoutSeconds, const std::string& cwd) {
  CommandResult r;
  if (argv.empty()) {
    r.error = "no command";
    return r;
  }
  std::string program = findProgram(argv[0]);
  if (program.empty()) {
    r.error = argv[0] + ": not found";
    return r;
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) {
    r.error = std::string("pipe: ") + std::strerror(errno);
    return r;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 1);
  posix_spawn_file_actions_adddup2(&actions, fds[1], 2);
  if (!cwd.empty()) posix_spawn_file_actions_addchdir_np(&actions, cwd.c_str());
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = -1;
  int rc = posix_spawn(&pid, program.c_str(), &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    r.error = program + ": cannot start: " + std::strerror(rc);
    return r;
  }
  r.started = true;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeoutSeconds);
  char buf[4096];
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      r.timedOut = true;
      break;
    }
    pollfd p{fds[0], POLLIN, 0};
    int n = ::poll(&p, 1, static_cast<int>(left.count()));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      r.error = std::string("poll: ") + std::strerror(errno);
      r.timedOut = true;  // treat as lost: kill below
      break;
    }
    if (n == 0) continue;  // the deadline check above ends the loop
    ssize_t got = ::read(fds[0], buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) break;  // EOF: the child closed its ends (exited)
    if (r.output.size() < kOutputLimit)
      r.output.append(buf, std::min(static_cast<size_t>(got), kOutputLimit - r.output.size()));
  }
  ::close(fds[0]);
  // The child may have closed its output and still run: wait for it only until the deadline.
  int status = 0;
  for (;;) {
    pid_t w = r.timedOut ? 0 : ::waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno == EINTR) continue;
    if (w < 0) {
      r.error = std::string("waitpid: ") + std::strerror(errno);
      return r;
    }
    if (r.timedOut || std::chrono::steady_clock::now() >= deadline) {
      r.timedOut = true;
      ::kill(pid, SIGKILL);
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      if (r.error.empty()) r.error = argv[0] + ": no answer within " + std::to_string(static_cast<int>(timeoutSeconds + 0.5)) + " s (killed)";
      break;
    }
    ::usleep(2000);
  }
  if (WIFEXITED(status)) r.exitCode = WEXITSTATUS(status);
  else if (WIFSIGNALED(status)) r.exitCode = 128 + WTERMSIG(status);
  return r;
}

}  // namespace braid::doctor
