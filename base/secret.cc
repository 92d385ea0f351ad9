#include "base/secret.h"

#include <string.h>

#include <algorithm>
#include <utility>

namespace forkbox {

SecretString::SecretString(SecretString&& other) noexcept : value_(std::move(other.value_)) {
  other.clear();  // A short string's bytes were copied, and stay in its inline buffer.
}

SecretString& SecretString::operator=(const SecretString& other) {
  if (this != &other) *this = std::string_view(other.value_);
  return *this;
}

SecretString& SecretString::operator=(SecretString&& other) noexcept {
  if (this == &other) return *this;
  clear();
  value_ = std::move(other.value_);
  other.clear();
  return *this;
}

SecretString& SecretString::operator=(std::string_view value) {
  clear();
  value_.assign(value);
  return *this;
}

SecretLines& SecretLines::operator=(SecretLines&& other) noexcept {
  if (this == &other) return *this;
  clear();
  lines_ = std::move(other.lines_);
  return *this;
}

void SecretLines::Add(std::string&& line) {
  if (lines_.size() == lines_.capacity()) {
    std::vector<std::string> bigger;
    bigger.reserve(std::max<size_t>(4, 2 * lines_.size()));
    for (std::string& l : lines_) bigger.push_back(std::move(l));
    clear();  // The moved-from lines: a short one keeps its bytes (all but the first) in place.
    lines_.swap(bigger);
  }
  lines_.push_back(std::move(line));
  WipeString(line);
}

void SecretLines::clear() {
  for (std::string& line : lines_) WipeString(line);
  lines_.clear();
}

void WipeString(std::string& s) {
  // Resized within its capacity: no new buffer, and every byte it owns is then its own to zero.
  s.resize(s.capacity());
  ::explicit_bzero(s.data(), s.size());
  s.clear();
}

void AppendWiped(std::string& s, std::string_view more) {
  if (more.size() > s.capacity() - s.size()) {
    std::string bigger;
    bigger.reserve(std::max({2 * s.capacity(), s.size() + more.size(), size_t{256}}));
    bigger.append(s);
    WipeString(s);
    s.swap(bigger);  // `bigger` now holds the old buffer, zeroed, and frees it.
  }
  s.append(more);
}

}  // namespace forkbox
