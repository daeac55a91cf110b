#include "tests/launcher/launcher.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <map>
#include <stdexcept>
#include <system_error>

#include "tests/common/launch_vars.h"

extern char** environ;

namespace braid::test {
namespace {

using Clock = std::chrono::steady_clock;

// After a rank's main process exits, its pipe may stay open in a child that left the process
// group; this long we keep reading before we give up on it.
constexpr auto kDrainAfterExit = std::chrono::milliseconds(1000);
// A rank's exit is noticed by polling waitpid at least this often (EOF usually comes first).
constexpr int kReapPollMs = 50;
// A line longer than this is passed to onLine in pieces.
constexpr size_t kMaxLineBytes = 64 * 1024;

struct RankProcess {
  RankResult result;
  pid_t pid = -1;
  int outFd = -1;
  bool reaped = false;
  Clock::time_point reapedAt{};
  std::string partialLine;
  bool truncated = false;
  bool finished() const { return reaped && outFd < 0; }
};

std::system_error systemError(const std::string& what) { return {errno, std::generic_category(), what}; }

void closeFd(int& fd) {
  if (fd >= 0) close(fd);  // nothing useful to do on failure: the fd is gone either way
  fd = -1;
}

std::string resolveProgram(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = std::getenv("PATH");
  std::string dirs = (path && *path) ? path : "/usr/local/bin:/usr/bin:/bin";
  size_t begin = 0;
  while (begin <= dirs.size()) {
    size_t end = dirs.find(':', begin);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(begin, end - begin);
    std::string candidate = (dir.empty() ? std::string(".") : dir) + "/" + name;
    struct stat info {};
    if (stat(candidate.c_str(), &info) == 0 && S_ISREG(info.st_mode) && access(candidate.c_str(), X_OK) == 0)
      return candidate;
    begin = end + 1;
  }
  return name;  // execve fails with ENOENT and the rank reports it
}

// The launcher's environment, then spec.env, then the rank variables; later entries win.
std::vector<std::string> rankEnvironment(const LaunchSpec& spec, int rank) {
  std::vector<std::string> entries;
  std::map<std::string, size_t> indexOfKey;
  auto set = [&](const std::string& key, const std::string& entry) {
    auto [it, inserted] = indexOfKey.emplace(key, entries.size());
    if (inserted)
      entries.push_back(entry);
    else
      entries[it->second] = entry;
  };
  for (char** e = environ; e && *e; ++e) {
    std::string entry(*e);
    set(entry.substr(0, entry.find('=')), entry);
  }
  for (const auto& [key, value] : spec.env) set(key, key + "=" + value);
  set(kRankVar, std::string(kRankVar) + "=" + std::to_string(rank));
  set(kNRanksVar, std::string(kNRanksVar) + "=" + std::to_string(spec.nRanks));
  if (!spec.uniqueIdHex.empty()) set(kUniqueIdVar, std::string(kUniqueIdVar) + "=" + spec.uniqueIdHex);
  return entries;
}

std::vector<char*> pointersTo(std::vector<std::string>& strings) {
  std::vector<char*> pointers;
  for (auto& s : strings) pointers.push_back(s.data());
  pointers.push_back(nullptr);
  return pointers;
}

// In the forked child: tells the launcher why it could not exec, through the status pipe.
[[noreturn]] void failChild(int statusFd) {
  int err = errno;
  ssize_t written = write(statusFd, &err, sizeof err);
  _exit(written == sizeof err ? 127 : 126);
}

// Runs in the forked child: only async-signal-safe calls until execve.
[[noreturn]] void execRank(const char* path, char* const* argv, char* const* envp, int outFd, int nullFd,
                           int statusFd, pid_t launcher) {
  auto fail = [statusFd]() { failChild(statusFd); };
  // Its own process group, so that a timeout can kill whatever the rank started.
  if (setpgid(0, 0) != 0) fail();
  // Die with the launcher rather than linger as an orphan.
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) fail();
  if (getppid() != launcher) _exit(126);
  sigset_t none;
  sigemptyset(&none);
  if (sigprocmask(SIG_SETMASK, &none, nullptr) != 0) fail();
  struct sigaction defaults {};
  defaults.sa_handler = SIG_DFL;
  for (int sig : {SIGPIPE, SIGINT, SIGTERM, SIGCHLD})
    if (sigaction(sig, &defaults, nullptr) != 0) fail();
  if (dup2(nullFd, STDIN_FILENO) < 0 || dup2(outFd, STDOUT_FILENO) < 0 || dup2(outFd, STDERR_FILENO) < 0) fail();
  execve(path, argv, envp);
  failChild(statusFd);
}

class RankRunner {
 public:
  explicit RankRunner(const LaunchSpec& spec) : spec_(spec) {}
  ~RankRunner() {
    killAndReapAll();
    closeFd(nullFd_);
  }

  std::vector<RankResult> run() {
    nullFd_ = open("/dev/null", O_RDONLY | O_CLOEXEC);
    if (nullFd_ < 0) throw systemError("braid-launch: open /dev/null");
    start_ = Clock::now();
    for (int r = 0; r < spec_.nRanks; ++r) startRank(r);
    while (!std::all_of(ranks_.begin(), ranks_.end(), [](const RankProcess& p) { return p.finished(); })) {
      reapExited();
      enforceTimeout();
      readOutput();
      giveUpOnStuckPipes();
    }
    std::vector<RankResult> results;
    for (auto& rank : ranks_) {
      if (rank.truncated)
        rank.result.output += "\n[braid-launch: output truncated after " + std::to_string(spec_.maxCapturedBytes) +
                              " bytes]\n";
      results.push_back(std::move(rank.result));
    }
    ranks_.clear();
    return results;
  }

 private:
  void startRank(int r) {
    std::vector<std::string> argv = spec_.argv;
    std::string path = resolveProgram(argv[0]);
    std::vector<std::string> env = rankEnvironment(spec_, r);
    std::vector<char*> argvPointers = pointersTo(argv), envPointers = pointersTo(env);

    int outPipe[2], statusPipe[2];
    if (pipe2(outPipe, O_CLOEXEC) != 0) throw systemError("braid-launch: pipe");
    if (pipe2(statusPipe, O_CLOEXEC) != 0) {
      int err = errno;
      close(outPipe[0]);
      close(outPipe[1]);
      throw std::system_error(err, std::generic_category(), "braid-launch: pipe");
    }
    pid_t launcher = getpid();
    pid_t pid = fork();
    if (pid == 0) execRank(path.c_str(), argvPointers.data(), envPointers.data(), outPipe[1], nullFd_, statusPipe[1],
                           launcher);
    int forkErr = errno;
    close(outPipe[1]);
    close(statusPipe[1]);
    if (pid < 0) {
      close(outPipe[0]);
      close(statusPipe[0]);
      throw std::system_error(forkErr, std::generic_category(), "braid-launch: fork for rank " + std::to_string(r));
    }
    // Also from here, so that a kill of the group cannot miss a child that has not run yet.
    // EACCES means the child already exec'd, after its own setpgid.
    // Failure is harmless: the child sets its own group first thing and reports if it can't.
    (void)setpgid(pid, pid);
    RankProcess rank;
    rank.result.rank = r;
    rank.pid = pid;
    rank.outFd = outPipe[0];
    // Reads happen only after poll() reports data, so a failure here (blocking mode) is harmless.
    (void)fcntl(rank.outFd, F_SETFL, O_NONBLOCK);
    int execErr = 0;
    ssize_t got;
    do got = read(statusPipe[0], &execErr, sizeof execErr);
    while (got < 0 && errno == EINTR);
    close(statusPipe[0]);
    ranks_.push_back(std::move(rank));
    if (got == sizeof execErr) {
      std::string why = "braid-launch: cannot execute '" + path + "': " + std::strerror(execErr) + "\n";
      append(ranks_.back(), why.data(), why.size());
    }
  }

  void append(RankProcess& rank, const char* data, size_t size) {
    std::string& out = rank.result.output;
    size_t room = spec_.maxCapturedBytes > out.size() ? spec_.maxCapturedBytes - out.size() : 0;
    out.append(data, std::min(room, size));
    if (size > room) rank.truncated = true;
    if (!spec_.onLine) return;
    rank.partialLine.append(data, size);
    size_t begin = 0, newline;
    while ((newline = rank.partialLine.find('\n', begin)) != std::string::npos) {
      spec_.onLine(rank.result.rank, std::string_view(rank.partialLine).substr(begin, newline - begin));
      begin = newline + 1;
    }
    rank.partialLine.erase(0, begin);
    if (rank.partialLine.size() >= kMaxLineBytes) flushPartialLine(rank);
  }

  void flushPartialLine(RankProcess& rank) {
    if (spec_.onLine && !rank.partialLine.empty()) spec_.onLine(rank.result.rank, rank.partialLine);
    rank.partialLine.clear();
  }

  void endOutput(RankProcess& rank) {
    closeFd(rank.outFd);
    flushPartialLine(rank);
  }

  void reapExited() {
    for (auto& rank : ranks_) {
      if (rank.reaped) continue;
      int status = 0;
      pid_t got = waitpid(rank.pid, &status, WNOHANG);
      if (got == 0) continue;
      if (got < 0) {
        if (errno == EINTR) continue;
        // ECHILD: someone else reaped it (SIGCHLD ignored by our parent?). Its end is unknown.
        std::string why = std::string("braid-launch: lost rank's exit status: ") + std::strerror(errno) + "\n";
        append(rank, why.data(), why.size());
      } else if (WIFEXITED(status)) {
        rank.result.exitCode = WEXITSTATUS(status);
      } else if (WIFSIGNALED(status)) {
        rank.result.signal = WTERMSIG(status);
      } else {
        continue;  // stopped or continued: still alive
      }
      rank.reaped = true;
      rank.reapedAt = Clock::now();
      // Whatever the rank left running in its group goes with it.
      // ESRCH (an empty group) is the usual answer; giveUpOnStuckPipes bounds any other case.
      (void)kill(-rank.pid, SIGKILL);
    }
  }

  void enforceTimeout() {
    auto now = Clock::now();
    bool cancelled = spec_.cancel != nullptr && *spec_.cancel != 0;
    bool expired = spec_.timeoutSeconds > 0 && now >= start_ + toDuration(spec_.timeoutSeconds);
    if (!stopping_ && (cancelled || expired)) {
      stopping_ = true;
      killAt_ = now + toDuration(spec_.graceSeconds);
      for (auto& rank : ranks_) {
        if (rank.reaped) continue;
        rank.result.timedOut = expired;
        signalGroup(rank, SIGTERM);
      }
    }
    if (stopping_ && !killSent_ && now >= killAt_) {
      killSent_ = true;
      for (auto& rank : ranks_)
        if (!rank.reaped) signalGroup(rank, SIGKILL);
    }
  }

  // The whole group; the process alone if the group is gone (it failed to set one up).
  // A failure of both means the process is already dead: nothing else to try.
  static void signalGroup(RankProcess& rank, int sig) {
    if (kill(-rank.pid, sig) != 0) (void)kill(rank.pid, sig);
  }

  static Clock::duration toDuration(double seconds) {
    return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(std::max(0.0, seconds)));
  }

  int pollTimeoutMs() const {
    auto now = Clock::now();
    auto wait = std::chrono::milliseconds(kReapPollMs);
    auto limit = [&](Clock::time_point when) {
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(when - now) + std::chrono::milliseconds(1);
      wait = std::clamp(left, std::chrono::milliseconds(0), wait);
    };
    if (!stopping_ && spec_.timeoutSeconds > 0) limit(start_ + toDuration(spec_.timeoutSeconds));
    if (stopping_ && !killSent_) limit(killAt_);
    return static_cast<int>(wait.count());
  }

  void readOutput() {
    std::vector<pollfd> fds;
    std::vector<RankProcess*> owners;
    for (auto& rank : ranks_) {
      if (rank.outFd < 0) continue;
      fds.push_back({rank.outFd, POLLIN, 0});
      owners.push_back(&rank);
    }
    int timeoutMs = pollTimeoutMs();
    if (fds.empty()) {
      // Only exits are left to wait for.
      if (timeoutMs > 0) (void)poll(nullptr, 0, timeoutMs);  // a sleep; EINTR only shortens it
      return;
    }
    int ready = poll(fds.data(), fds.size(), timeoutMs);
    if (ready < 0) {
      if (errno == EINTR) return;  // a signal (maybe the cancel flag): re-check everything
      throw systemError("braid-launch: poll");
    }
    char buffer[64 * 1024];
    for (size_t i = 0; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      RankProcess& rank = *owners[i];
      ssize_t n = read(rank.outFd, buffer, sizeof buffer);
      if (n > 0)
        append(rank, buffer, static_cast<size_t>(n));
      else if (n == 0 || (errno != EINTR && errno != EAGAIN))
        endOutput(rank);
    }
  }

  void giveUpOnStuckPipes() {
    auto now = Clock::now();
    for (auto& rank : ranks_)
      if (rank.reaped && rank.outFd >= 0 && now - rank.reapedAt > kDrainAfterExit) endOutput(rank);
  }

  // For exceptions: no rank may outlive runRanks.
  void killAndReapAll() {
    for (auto& rank : ranks_) {
      if (!rank.reaped) {
        signalGroup(rank, SIGKILL);
        int status;
        while (waitpid(rank.pid, &status, 0) < 0 && errno == EINTR) {
        }
        rank.reaped = true;
      }
      closeFd(rank.outFd);
    }
  }

  const LaunchSpec& spec_;
  std::vector<RankProcess> ranks_;
  int nullFd_ = -1;
  Clock::time_point start_{};
  bool stopping_ = false;
  bool killSent_ = false;
  Clock::time_point killAt_{};
};

}  // namespace

std::vector<RankResult> runRanks(const LaunchSpec& spec) {
  if (spec.nRanks < 1) throw std::invalid_argument("runRanks: nRanks must be >= 1, got " + std::to_string(spec.nRanks));
  if (spec.argv.empty() || spec.argv[0].empty()) throw std::invalid_argument("runRanks: no program given");
  if (spec.timeoutSeconds < 0 || spec.graceSeconds < 0)
    throw std::invalid_argument("runRanks: timeout and grace must be >= 0 seconds");
  for (const auto& [key, value] : spec.env)
    if (key.empty() || key.find('=') != std::string::npos)
      throw std::invalid_argument("runRanks: bad environment variable name '" + key + "'");
  RankRunner runner(spec);
  return runner.run();
}

bool succeeded(const RankResult& result) {
  return result.exitCode == 0 && result.signal == 0 && !result.timedOut;
}

bool allSucceeded(const std::vector<RankResult>& results) {
  return std::all_of(results.begin(), results.end(), [](const RankResult& r) { return succeeded(r); });
}

std::string signalName(int signal) {
  const char* abbrev = sigabbrev_np(signal);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(signal);
}

std::string describeEnd(const RankResult& result) {
  std::string how;
  if (result.signal != 0)
    how = "killed by signal " + std::to_string(result.signal) + " (" + signalName(result.signal) + ")";
  else if (result.exitCode >= 0)
    how = "exited with code " + std::to_string(result.exitCode);
  else
    how = "ended in an unknown way";
  return result.timedOut ? "timed out (" + how + ")" : how;
}

}  // namespace braid::test
