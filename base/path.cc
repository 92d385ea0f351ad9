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

}  // namespace forkbox
