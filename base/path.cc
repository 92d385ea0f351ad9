#include "base/path.h"

namespace forkbox {

bool PathWithin(std::string_view path, std::string_view tree) {
  if (tree.empty() || !path.starts_with(tree)) return false;
  // "/" ends in its separator already: every absolute path continues below it.
  return path.size() == tree.size() || tree.back() == '/' || path[tree.size()] == '/';
}

std::optional<std::string> PathBelow(std::string_view path, std::string_view tree) {
  if (path.size() == tree.size() || !PathWithin(path, tree)) return std::nullopt;
  const size_t skip = tree.back() == '/' ? tree.size() : tree.size() + 1;
  return std::string(path.substr(skip));
}

std::string TidySeparators(std::string_view path) {
  const bool absolute = path.starts_with('/');
  std::string out = absolute ? "/" : "";
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    const std::string_view part = path.substr(start, slash - start);
    if (!part.empty() && part != ".") {
      if (!out.empty() && out.back() != '/') out += '/';
      out += part;
    }
    start = slash + 1;
  }
  if (out.empty()) return ".";
  if (path.ends_with('/') && out.back() != '/') out += '/';
  return out;
}

}  // namespace forkbox
