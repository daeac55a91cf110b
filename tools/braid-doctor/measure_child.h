// Child processes of the measurements (braid-perf, the doctor's own IPC child): started with
// posix_spawn in a process group of their own so that a deadline kills them and whatever they
// started; output to a file; temporary folders removed on every path.
#pragma once
#include <sys/types.h>

#include <string>
#include <vector>

namespace braid::doctor::measure {

struct SpawnRequest {
  std::vector<std::string> argv;
  std::vector<std::string> setEnv;  // "NAME=value", replacing NAME in this process's environment
  std::string outputPath;           // the child's stdout and stderr; empty: /dev/null
  int keepFd = -1;                  // a descriptor the child inherits (its close-on-exec flag cleared)
};
// The child's pid, or -1 with *why.
pid_t spawnChild(const SpawnRequest& request, std::string* why);

struct ChildEnd {
  bool exited = false;  // by itself (exit or signal)
  bool killed = false;  // by us, past the deadline
  int exitCode = -1;    // when it exited normally
  std::string text;     // "exit 0", "killed by signal 11", "killed after 30.0 s (deadline)"
};
// Waits for the child until `deadline` (nowSeconds() time); past it kills its process group.
ChildEnd waitChild(pid_t pid, double deadline);
// Kills the child's process group now and reaps it.
void killChild(pid_t pid);

// Up to `maxBytes` from the end of a file, for error messages ("" when unreadable).
std::string fileTail(const std::string& path, size_t maxBytes);

// mkdtemp in $TMPDIR (or /tmp); its files (one level) and itself removed by the destructor.
class TempDir {
 public:
  bool create(std::string* why);
  const std::string& path() const { return path_; }
  ~TempDir();

 private:
  std::string path_;
};

}  // namespace braid::doctor::measure
