// The process group's internals shared by src/distributed/ (the API is include/ingot/distributed.h).
#pragma once
#include "core/collectives.h"

namespace ingot::distributed {

// The group's communicator (an error when there is no group).
Communicator& communicator();

}  // namespace ingot::distributed
