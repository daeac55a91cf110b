#include "tools/braid-doctor/measure_child.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <thread>

#include "tools/braid-doctor/measure_util.h"

extern char** environ;

namespace braid::doctor::measure {

pid_t spawnChild(const SpawnRequest& request, std::string* why) {
  if (request.argv.empty()) {
    *why = "no program to start";
    return -1;
  }
  // The environment: ours, with the requested names replaced.
  std::vector<std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string entry = *e;
    bool replaced = false;
    for (const auto& s : request.setEnv) {
      size_t eq = s.find('=');
      if (eq == std::string::npos) continue;
      if (entry.compare(0, eq + 1, s, 0, eq + 1) == 0) replaced = true;
    }
    if (!replaced) env.push_back(entry);
  }
  for (const auto& s : request.setEnv) env.push_back(s);
  std::vector<char*> argvPtr, envPtr;
  for (const auto& a : request.argv) argvPtr.push_back(const_cast<char*>(a.c_str()));
  argvPtr.push_back(nullptr);
  for (const auto& e : env) envPtr.push_back(const_cast<char*>(e.c_str()));
  envPtr.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawnattr_t attr;
  int rc = posix_spawn_file_actions_init(&actions);
  if (rc != 0) {
    *why = std::string("posix_spawn_file_actions_init: ") + std::strerror(rc);
    return -1;
  }
  rc = posix_spawnattr_init(&attr);
  if (rc != 0) {
    posix_spawn_file_actions_destroy(&actions);
    *why = std::string("posix_spawnattr_init: ") + std::strerror(rc);
    return -1;
  }
  const std::string out = request.outputPath.empty() ? "/dev/null" : request.outputPath;
  if (rc == 0) rc = posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (rc == 0) rc = posix_spawn_file_actions_adddup2(&actions, 1, 2);
  if (rc == 0) rc = posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP);
  if (rc == 0) rc = posix_spawnattr_setpgroup(&attr, 0);  // a group of its own, led by the child
  int savedFlags = -1;
  if (rc == 0 && request.keepFd >= 0) {
    savedFlags = fcntl(request.keepFd, F_GETFD);
    if (savedFlags < 0 || fcntl(request.keepFd, F_SETFD, savedFlags & ~FD_CLOEXEC) != 0) rc = errno;
  }
  pid_t pid = -1;
  if (rc == 0) rc = posix_spawn(&pid, argvPtr[0], &actions, &attr, argvPtr.data(), envPtr.data());
  if (savedFlags >= 0) (void)fcntl(request.keepFd, F_SETFD, savedFlags);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    *why = "cannot start " + request.argv[0] + ": " + std::strerror(rc);
    return -1;
  }
  return pid;
}

ChildEnd waitChild(pid_t pid, double deadline) {
  ChildEnd end;
  // Bounded: every round sleeps 2 ms, and the deadline ends the loop.
  for (;;) {
    int status = 0;
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) {
      end.exited = true;
      if (WIFEXITED(status)) {
        end.exitCode = WEXITSTATUS(status);
        end.text = "exit " + std::to_string(end.exitCode);
      } else if (WIFSIGNALED(status)) {
        end.text = "killed by signal " + std::to_string(WTERMSIG(status));
      }
      // Its own children (braid-perf's ranks) may outlive it: end the group too.
      (void)kill(-pid, SIGKILL);
      return end;
    }
    if (r < 0 && errno != EINTR) {
      end.text = std::string("waitpid: ") + std::strerror(errno);
      return end;
    }
    if (nowSeconds() >= deadline) {
      killChild(pid);
      end.killed = true;
      end.text = "killed at its deadline";
      return end;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

void killChild(pid_t pid) {
  if (pid <= 0) return;
  (void)kill(-pid, SIGKILL);
  (void)kill(pid, SIGKILL);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
}

std::string fileTail(const std::string& path, size_t maxBytes) {
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return "";
  std::streamoff size = in.tellg();
  std::streamoff from = size > static_cast<std::streamoff>(maxBytes) ? size - static_cast<std::streamoff>(maxBytes) : 0;
  in.seekg(from);
  std::string text(static_cast<size_t>(size - from), '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  for (auto& c : text)
    if (c == '\n') c = ' ';
  return text;
}

bool TempDir::create(std::string* why) {
  const char* base = std::getenv("TMPDIR");
  std::string pattern = std::string(base && *base ? base : "/tmp") + "/braid-doctor-XXXXXX";
  std::vector<char> name(pattern.begin(), pattern.end());
  name.push_back('\0');
  if (mkdtemp(name.data()) == nullptr) {
    *why = "mkdtemp(" + pattern + "): " + std::strerror(errno);
    return false;
  }
  path_ = name.data();
  return true;
}

TempDir::~TempDir() {
  if (path_.empty()) return;
  if (DIR* dir = opendir(path_.c_str())) {
    while (dirent* e = readdir(dir)) {
      if (std::strcmp(e->d_name, ".") == 0 || std::strcmp(e->d_name, "..") == 0) continue;
      (void)unlink((path_ + "/" + e->d_name).c_str());
    }
    closedir(dir);
  }
  (void)rmdir(path_.c_str());
}

}  // namespace braid::doctor::measure
