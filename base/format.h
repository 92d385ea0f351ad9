// Human-readable figures shared by every message forkbox prints or shows the model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace forkbox {

// "2s" for whole seconds, else one decimal: "1.5s".
std::string FormatSeconds(int64_t ms);

// "a, b, c": the items joined by ", " ("" for none).
std::string JoinList(const std::vector<std::string>& items);

}  // namespace forkbox
