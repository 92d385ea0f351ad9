// Human-readable figures shared by every message forkbox prints or shows the model.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace forkbox {

// "2s" for whole seconds, else one decimal: "1.5s".
std::string FormatSeconds(int64_t ms);

// "a, b, c": the items joined by ", " ("" for none).
std::string JoinList(const std::vector<std::string>& items);

// "1 turn", "3 turns", "0 turns": `n` and `word`, with an "s" unless n is 1.
std::string Plural(int64_t n, std::string_view word);

}  // namespace forkbox
