// The file tools: read_file, write_file, edit_file. Every path goes through ResolveInWorkdir.
#pragma once

#include <nlohmann/json.hpp>

#include "agent/tools.h"

namespace forkbox::agent {

// {path, offset?, limit?}: offset is the 1-based first line, limit the number of lines. Binary
// files (NUL bytes or invalid UTF-8 in the first 8 KiB) are described, never dumped; output past
// max_output_chars is cut with a marker telling the model which offset to continue from.
ToolOutput RunReadFileTool(const nlohmann::json& input, const ToolContext& ctx);
// {path, content}: creates missing parent directories; never follows a final symlink out.
ToolOutput RunWriteFileTool(const nlohmann::json& input, const ToolContext& ctx);
// {path, old_text, new_text}: replaces exactly one occurrence; "not found" and "found N times" are
// errors that say which.
ToolOutput RunEditFileTool(const nlohmann::json& input, const ToolContext& ctx);

}  // namespace forkbox::agent
