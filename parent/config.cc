#include "parent/config.h"

#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <system_error>
#include <utility>

#include "agent/http_client.h"
#include "base/path.h"

namespace forkbox::parent {

namespace {

Result<std::string> Canonical(const std::string& path, const char* what) {
  char buf[PATH_MAX];
  if (realpath(path.c_str(), buf) == nullptr) {
    return Status::FromErrno(errno, std::string(what) + " '" + path + "'");
  }
  return std::string(buf);
}

}  // namespace

Result<std::string> ResolveWorkdir(const Options& options) {
  std::string dir = options.workdir.empty() ? "." : options.workdir;
  // No --workdir: the current directory, which may have been removed under the caller.
  auto canonical = Canonical(
      dir, options.workdir.empty() ? "the current directory (no --workdir)" : "--workdir");
  if (!canonical.ok()) return canonical.status();
  struct stat st;
  if (stat(canonical->c_str(), &st) != 0) return Status::FromErrno(errno, "stat " + *canonical);
  if (!S_ISDIR(st.st_mode)) {
    return Status::InvalidArgument("--workdir '" + dir + "' is not a directory");
  }
  return canonical;
}

Result<ChildPathChoice> ChooseChildPath(const Options& options) {
  using agent::SettingSource;
  if (!options.child_path.empty()) return ChildPathChoice{options.child_path, {}};
  const char* env = getenv("FORKBOX_CHILD");
  if (env != nullptr && *env != '\0') {
    return ChildPathChoice{env, {SettingSource::kEnvironment, "FORKBOX_CHILD"}};
  }
  if (!options.child_path_file.empty()) {
    return ChildPathChoice{options.child_path_file, {SettingSource::kFile, ""}};
  }
  std::error_code ec;
  auto self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return Status::Internal("readlink /proc/self/exe: " + ec.message());
  return ChildPathChoice{(self.parent_path() / "forkbox-child").string(),
                         {SettingSource::kDefault, ""}};
}

Result<std::string> ResolveChildPath(const Options& options) {
  Result<ChildPathChoice> choice = ChooseChildPath(options);
  if (!choice.ok()) return choice.status();
  const char* const kFrom[] = {"--child-path", "FORKBOX_CHILD", "the config file",
                               "the default (next to forkbox)"};
  const std::string from = kFrom[choice->from.kind];
  auto canonical = Canonical(choice->path, "forkbox-child");
  if (!canonical.ok()) {
    return Status::InvalidArgument(canonical.status().message() + " (from " + from + ")");
  }
  if (access(canonical->c_str(), X_OK) != 0) {
    return Status::FromErrno(errno, std::string("forkbox-child '") + *canonical +
                                        "' is not executable (from " + from + ")");
  }
  return canonical;
}

Status CheckChildOutsideWritableTrees(const std::string& child_path,
                                      const std::vector<std::string>& writable_trees) {
  const std::filesystem::path named = agent::HttpModuleDirOf(child_path);
  std::error_code ec;
  const std::filesystem::path real = std::filesystem::weakly_canonical(named, ec);
  const std::pair<std::string, const char*> checked[] = {
      {child_path, "forkbox-child"},
      {named.lexically_normal().string(), "the module directory of forkbox-child"},
      {ec ? named.lexically_normal().string() : real.string(),
       "the module directory of forkbox-child"}};
  for (const std::string& tree : writable_trees) {
    for (const auto& [path, what] : checked) {
      if (!PathWithin(path, tree)) continue;
      return Status::InvalidArgument(
          std::string(what) + " '" + path + "' is inside the writable tree '" + tree +
          "': a task could replace it, and the next task would start outside the sandbox; "
          "install forkbox outside the trees tasks write (cmake --install) or point "
          "--child-path at a copy outside them");
    }
  }
  return Status::Ok();
}

Result<sandbox::Policy> SessionPolicy(const sandbox::Settings& settings, const std::string& workdir,
                                      const std::string& model_url) {
  Result<sandbox::Policy> policy = sandbox::ResolvePolicy(settings, workdir);
  if (!policy.ok()) return policy.status();
  Result<uint16_t> port = agent::UrlPort(model_url);
  if (!port.ok()) return port.status();
  policy->model_port = *port;
  return policy;
}

}  // namespace forkbox::parent
