// The file tools: read_file, write_file, edit_file. Every path is opened with openat2 beneath
// ToolContext::workdir_fd; only regular files are read or written (opened non-blocking and
// checked with fstat: a FIFO, socket or device is a clear tool error, never a hang), and every
// call is bounded by ToolContext::timeout_ms.
#pragma once

#include <nlohmann/json.hpp>

#include "agent/tools.h"

namespace forkbox::agent {

// {path, offset?, limit?}: offset is the 1-based first line, limit the number of lines. Binary
// files (NUL bytes or invalid UTF-8 in the first 8 KiB) are described, never dumped; output past
// max_output_chars is cut with a marker telling the model which offset to continue from.
ToolOutput RunReadFileTool(const nlohmann::json& input, const ToolContext& ctx);
// {path, content}: creates missing parent directories (each beneath the workdir); a symlink is
// followed only while it stays beneath the workdir.
ToolOutput RunWriteFileTool(const nlohmann::json& input, const ToolContext& ctx);
// {path, old_text, new_text}: replaces exactly one occurrence; "not found" and "found N times" are
// errors that say which.
ToolOutput RunEditFileTool(const nlohmann::json& input, const ToolContext& ctx);

}  // namespace forkbox::agent
