// The provider settings as they travel in the start frame (ipc::ProviderSettings) and as a
// Provider takes them (ProviderConfig). Both directions live here, side by side, so that a field
// added to one cannot be forgotten by the other binary.
#pragma once

#include "agent/provider.h"
#include "ipc/messages.h"

namespace forkbox::agent {

ipc::ProviderSettings ToProviderSettings(const ProviderConfig& config);
ProviderConfig FromProviderSettings(const ipc::ProviderSettings& settings);

}  // namespace forkbox::agent
