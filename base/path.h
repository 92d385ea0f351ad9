// Lexical containment of absolute, normal paths (no ".", "..", "//" or trailing "/"): the one
// "is this path beneath that tree" check. Callers canonicalise first; nothing here touches the
// file system, so a link on disk is the caller's concern.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace forkbox {

// True when `path` is `tree` or lies beneath it. Every absolute path lies beneath "/". The empty
// tree contains nothing. Relative paths compare the same way ("a/b" is beneath "a").
bool PathWithin(std::string_view path, std::string_view tree);

// The part of `path` below `tree` ("a/b" for "/w/a/b" below "/w", "etc/x" for "/etc/x" below
// "/"), or nullopt when `path` is `tree` itself or does not lie beneath it.
std::optional<std::string> PathBelow(std::string_view path, std::string_view tree);

// `path` with repeated separators and "." components removed ("/w//a/./b" -> "/w/a/b"); ".."
// stays (only the file system can say where it leads) and so does a trailing "/" (it asks for a
// directory). A path made only of them becomes "/" or ".".
std::string TidySeparators(std::string_view path);

}  // namespace forkbox
