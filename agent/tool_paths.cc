// ResolveInWorkdir: the file tools' own check that a path stays inside the workdir (the sandbox
// enforces the same boundary again underneath).
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "agent/tools.h"

namespace forkbox::agent {
namespace {

bool IsInside(const std::string& root, const std::string& path) {
  if (root == "/") return true;
  return path == root || (path.size() > root.size() && path.compare(0, root.size(), root) == 0 &&
                          path[root.size()] == '/');
}

std::string RealPath(const std::string& path, int* err) {
  char buf[PATH_MAX];
  if (::realpath(path.c_str(), buf) == nullptr) {
    *err = errno;
    return "";
  }
  *err = 0;
  return buf;
}

std::string ParentOf(const std::string& path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos || slash == 0) return "/";
  return path.substr(0, slash);
}

}  // namespace

bool ResolveInWorkdir(const std::string& workdir, const std::string& path, std::string* resolved,
                      std::string* error) {
  if (path.empty()) {
    *error = "path is empty";
    return false;
  }
  if (path.find('\0') != std::string::npos) {
    *error = "path contains a NUL byte";
    return false;
  }
  int err = 0;
  std::string root = RealPath(workdir, &err);
  if (root.empty()) {
    *error = "workdir '" + workdir + "' cannot be resolved: " + std::strerror(err);
    return false;
  }
  std::string full = path[0] == '/' ? path : root + "/" + path;
  while (full.size() > 1 && full.back() == '/') full.pop_back();

  // Find the deepest existing ancestor; remember the components that do not exist yet.
  std::vector<std::string> missing;
  std::string probe = full;
  std::string base;
  for (;;) {
    base = RealPath(probe, &err);
    if (!base.empty()) break;
    if (err != ENOENT) {
      *error = "cannot resolve '" + path + "': " + std::strerror(err);
      return false;
    }
    // A dangling symlink would be followed by a later open(O_CREAT) to wherever it points.
    struct stat st;
    if (::lstat(probe.c_str(), &st) == 0 && S_ISLNK(st.st_mode)) {
      *error = "'" + path + "' goes through a dangling symbolic link ('" + probe +
               "'); refusing to follow it";
      return false;
    }
    size_t slash = probe.find_last_of('/');
    missing.push_back(probe.substr(slash + 1));
    probe = ParentOf(probe);
  }
  // The missing components do not exist, so they contain no symlinks: resolve them lexically.
  std::string out = base;
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    const std::string& c = *it;
    if (c.empty() || c == ".") continue;
    if (c == "..") {
      out = ParentOf(out);
      continue;
    }
    out += (out == "/" ? "" : "/") + c;
  }
  if (!IsInside(root, out)) {
    *error = "path '" + path + "' resolves to '" + out + "', which is outside the workdir '" +
             root + "'; file tools only work inside the workdir";
    return false;
  }
  *resolved = out;
  return true;
}

}  // namespace forkbox::agent
